package eval

import (
	"context"
	"math"
	"strings"
	"unicode"
)

// MethodContentWords is the name of [ContentWords].
const MethodContentWords = "content-words"

// ContentWords is the word-count content baseline of issue 49: a user's
// profile counts the words longer than 3 characters (a title's year among
// them; genres and categories, which the item text names) over the items of
// their positive history; an item scores the sum of the profile's counts of
// its own distinct words, ties broken by the log of its positive
// interactions in the training view (replayed ones too). It uses no
// collaborative signal beyond that tie-break, so it reaches new items as
// well as old ones.
type ContentWords struct {
	words  [][]int32 // by item: its distinct word ids
	counts []float32 // by item: positive interactions
	scores []float32
	nWords int
}

var (
	_ Recommender = (*ContentWords)(nil)
	_ Observer    = (*ContentWords)(nil)
)

// NewContentWords returns an unfitted word-count content baseline.
func NewContentWords() *ContentWords { return &ContentWords{} }

// Name returns MethodContentWords.
func (m *ContentWords) Name() string { return MethodContentWords }

// contentWords splits text into its lower-case words of letters and digits
// longer than 3 characters.
func contentWords(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len([]rune(w)) > 3 {
			out = append(out, w)
		}
	}
	return out
}

// Fit reads every item's words and counts the positive interactions.
func (m *ContentWords) Fit(_ context.Context, train *TrainView) error {
	cat := train.Catalog
	ids := map[string]int32{}
	m.words = make([][]int32, cat.NumItems())
	for i, text := range cat.ItemText {
		seen := map[int32]bool{}
		for _, w := range contentWords(text) {
			id, ok := ids[w]
			if !ok {
				id = int32(len(ids))
				ids[w] = id
			}
			if !seen[id] {
				seen[id] = true
				m.words[i] = append(m.words[i], id)
			}
		}
	}
	m.nWords = len(ids)
	m.counts = make([]float32, cat.NumItems())
	for _, in := range train.Interactions {
		if in.Positive() {
			m.counts[in.Item]++
		}
	}
	m.scores = make([]float32, cat.NumItems())
	return nil
}

// Observe counts a replayed positive interaction (the tie-break).
func (m *ContentWords) Observe(in Interaction) {
	if in.Positive() && int(in.Item) < len(m.counts) {
		m.counts[in.Item]++
	}
}

// TopK ranks the items by the profile's counts of their words.
func (m *ContentWords) TopK(_ context.Context, q *Query, dst []int32) ([]int32, error) {
	profile := make([]float32, m.nWords)
	for _, in := range q.History {
		if in.Positive() && int(in.Item) < len(m.words) {
			for _, w := range m.words[in.Item] {
				profile[w]++
			}
		}
	}
	// The tie-break stays below one count: log1p(n) / (1 + log1p(max)).
	var maxCount float32
	for _, c := range m.counts {
		maxCount = max(maxCount, c)
	}
	scale := 1 / (1 + float32(math.Log1p(float64(maxCount))))
	for i, ws := range m.words {
		var s float32
		for _, w := range ws {
			s += profile[w]
		}
		m.scores[i] = s + scale*float32(math.Log1p(float64(m.counts[i])))
	}
	return topKScores(m.scores, q, dst), nil
}
