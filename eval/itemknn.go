package eval

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
)

// ItemKNNOptions configures [ItemKNN].
type ItemKNNOptions struct {
	// Neighbors is the number of most similar items kept per item (default 100).
	Neighbors int
	// MaxHistory caps the positives per user used to count co-occurrences
	// (the latest are kept; default 500), bounding the quadratic count.
	MaxHistory int
}

// ItemKNN is item-based collaborative filtering: the cosine similarity of
// two items is their number of co-engaging users (positives in the training
// view) over the geometric mean of their user counts; a user's score for an
// item is the summed similarity to the items of the user's current positive
// history (the up-to-date history in replay). Ties, including every item for
// a user with no history, are broken by popularity.
type ItemKNN struct {
	opts      ItemKNNOptions
	neighbors [][]scored // by item: the most similar items, best first
	pop       []float32
	scores    []float32
}

var _ Recommender = (*ItemKNN)(nil)

// NewItemKNN returns an unfitted item-kNN baseline; zero options get defaults.
func NewItemKNN(opts ItemKNNOptions) (*ItemKNN, error) {
	if opts.Neighbors == 0 {
		opts.Neighbors = 100
	}
	if opts.MaxHistory == 0 {
		opts.MaxHistory = 500
	}
	if opts.Neighbors < 0 || opts.MaxHistory < 0 {
		return nil, fmt.Errorf("%w: negative item-kNN option %+v", ErrBadConfig, opts)
	}
	return &ItemKNN{opts: opts}, nil
}

// Name returns "item-knn".
func (m *ItemKNN) Name() string { return "item-knn" }

// Fit counts co-occurrences in the view and keeps each item's neighbours.
func (m *ItemKNN) Fit(ctx context.Context, train *TrainView) error {
	nItems := train.Catalog.NumItems()
	m.pop = make([]float32, nItems)
	var maxPop float32
	byUser := make(map[int32][]int32)
	for _, in := range train.Interactions {
		if !in.Positive() {
			continue
		}
		m.pop[in.Item]++
		maxPop = max(maxPop, m.pop[in.Item])
		byUser[in.User] = append(byUser[in.User], in.Item)
	}
	co := make([]map[int32]float32, nItems)
	n := 0
	for _, items := range byUser {
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("fit item-knn: %w", err)
			}
		}
		items = dedupe(items[max(0, len(items)-m.opts.MaxHistory):])
		for a, i := range items {
			for _, j := range items[a+1:] {
				if co[i] == nil {
					co[i] = make(map[int32]float32)
				}
				if co[j] == nil {
					co[j] = make(map[int32]float32)
				}
				co[i][j]++
				co[j][i]++
			}
		}
	}
	m.neighbors = make([][]scored, nItems)
	for i, row := range co {
		nb := make([]scored, 0, len(row))
		for j, c := range row {
			nb = append(nb, scored{j, c / float32(math.Sqrt(float64(m.pop[i])*float64(m.pop[j])))})
		}
		slices.SortFunc(nb, func(a, b scored) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return cmp.Compare(a.item, b.item)
		})
		m.neighbors[i] = slices.Clip(nb[:min(len(nb), m.opts.Neighbors)])
	}
	// Popularity tie-break, far below any similarity (>= 1/maxPop).
	for i := range m.pop {
		m.pop[i] = 1e-3 * m.pop[i] / max(maxPop, 1) / max(maxPop, 1)
	}
	m.scores = make([]float32, nItems)
	return nil
}

// TopK scores every item against the user's positive history.
func (m *ItemKNN) TopK(_ context.Context, q *Query, dst []int32) ([]int32, error) {
	copy(m.scores, m.pop)
	seen := make(map[int32]bool, len(q.History))
	for _, in := range q.History {
		if !in.Positive() || seen[in.Item] || int(in.Item) >= len(m.neighbors) {
			continue
		}
		seen[in.Item] = true
		for _, nb := range m.neighbors[in.Item] {
			m.scores[nb.item] += nb.score
		}
	}
	return topKScores(m.scores, q, dst), nil
}

// dedupe returns items without repeats, keeping first occurrences.
func dedupe(items []int32) []int32 {
	seen := make(map[int32]bool, len(items))
	out := items[:0:0]
	for _, it := range items {
		if !seen[it] {
			seen[it] = true
			out = append(out, it)
		}
	}
	return out
}
