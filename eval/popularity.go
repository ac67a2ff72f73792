package eval

import "context"

// Popularity ranks items by their number of positive interactions (clicks
// or deeper). In replay it counts the replayed events too.
type Popularity struct {
	counts []float32
	scores []float32
}

var (
	_ Recommender = (*Popularity)(nil)
	_ Observer    = (*Popularity)(nil)
)

// NewPopularity returns an unfitted popularity baseline.
func NewPopularity() *Popularity { return &Popularity{} }

// Name returns "popularity".
func (p *Popularity) Name() string { return "popularity" }

// Fit counts the positive interactions of the view.
func (p *Popularity) Fit(_ context.Context, train *TrainView) error {
	p.counts = make([]float32, train.Catalog.NumItems())
	for _, in := range train.Interactions {
		if in.Positive() {
			p.counts[in.Item]++
		}
	}
	return nil
}

// Observe counts a replayed positive interaction.
func (p *Popularity) Observe(in Interaction) {
	if in.Positive() && int(in.Item) < len(p.counts) {
		p.counts[in.Item]++
	}
}

// TopK returns the most popular items the user has not interacted with.
func (p *Popularity) TopK(_ context.Context, q *Query, dst []int32) ([]int32, error) {
	return topKScores(p.counts, q, dst), nil
}
