package eval

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
	_ "github.com/blevesearch/bleve/v2/analysis/lang/en" // registers the "en" analyzer
	"github.com/blevesearch/bleve/v2/registry"

	"github.com/hir-ads/hir/graph"
)

// ContentOptions configures [Content].
type ContentOptions struct {
	// Analyzer is the name of a registered bleve analyzer (default "en":
	// unicode tokens, lower case, English stop words and stemming).
	Analyzer string
}

// Content is a content-only scorer: each item is a tf-idf vector of its
// bleve-analysed text (the ad's own text plus the text of the entities it
// points to by structure edges visible at the cut, e.g. its category or
// brand); a user is the sum of the vectors of their positive history (the
// up-to-date history in replay); the score is the cosine. It uses no
// collaborative signal. A user with no positive history scores every item 0.
type Content struct {
	opts     ContentOptions
	analyzer analysis.Analyzer
	postings [][]termWeight // by term index: the items with their weight
	vectors  [][]termWeight // by item: its unit vector (term = index into terms)
	terms    []string
	scores   []float32
}

type termWeight struct {
	id int32 // item (in postings) or term index (in vectors)
	w  float32
}

var _ Recommender = (*Content)(nil)

// NewContent returns an unfitted content scorer; zero options get defaults.
func NewContent(opts ContentOptions) (*Content, error) {
	if opts.Analyzer == "" {
		opts.Analyzer = "en"
	}
	a, err := registry.NewCache().AnalyzerNamed(opts.Analyzer)
	if err != nil {
		return nil, fmt.Errorf("%w: analyzer %q: %v", ErrBadConfig, opts.Analyzer, err)
	}
	return &Content{opts: opts, analyzer: a}, nil
}

// Name returns "content".
func (m *Content) Name() string { return "content" }

// Fit analyses the text of every item of the catalog.
func (m *Content) Fit(ctx context.Context, train *TrainView) error {
	cat := train.Catalog
	docs := make([]strings.Builder, cat.NumItems())
	for i, t := range cat.ItemText {
		docs[i].WriteString(t)
	}
	for _, ev := range train.Structure {
		if ev.Src.Type != graph.NodeAd || !ev.Type.IsStructure() {
			continue
		}
		i, ok := cat.Item(ev.Src.ID)
		if !ok {
			continue
		}
		if e := cat.Entities[ev.Dst]; e != nil && e.Text != "" {
			docs[i].WriteString("\n")
			docs[i].WriteString(e.Text)
		}
	}
	termIdx := make(map[string]int32)
	tfs := make([]map[int32]float32, len(docs))
	df := map[int32]int{}
	for i := range docs {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("fit content: %w", err)
			}
		}
		tf := make(map[int32]float32)
		for _, tok := range m.analyzer.Analyze([]byte(docs[i].String())) {
			t := string(tok.Term)
			id, ok := termIdx[t]
			if !ok {
				id = int32(len(m.terms))
				termIdx[t] = id
				m.terms = append(m.terms, t)
			}
			tf[id]++
		}
		for id := range tf {
			df[id]++
		}
		tfs[i] = tf
	}
	n := float64(len(docs))
	m.vectors = make([][]termWeight, len(docs))
	m.postings = make([][]termWeight, len(m.terms))
	for i, tf := range tfs {
		var norm float64
		vec := make([]termWeight, 0, len(tf))
		for id, c := range tf {
			w := (1 + math.Log(float64(c))) * (math.Log((1+n)/(1+float64(df[id]))) + 1)
			vec = append(vec, termWeight{id, float32(w)})
			norm += w * w
		}
		norm = math.Sqrt(norm)
		for k := range vec {
			vec[k].w /= float32(norm)
			t := vec[k].id
			m.postings[t] = append(m.postings[t], termWeight{int32(i), vec[k].w})
		}
		m.vectors[i] = vec
	}
	m.scores = make([]float32, len(docs))
	return nil
}

// TopK ranks items by cosine to the user's history profile.
func (m *Content) TopK(_ context.Context, q *Query, dst []int32) ([]int32, error) {
	profile := make(map[int32]float32)
	seen := make(map[int32]bool, len(q.History))
	for _, in := range q.History {
		if !in.Positive() || seen[in.Item] || int(in.Item) >= len(m.vectors) {
			continue
		}
		seen[in.Item] = true
		for _, tw := range m.vectors[in.Item] {
			profile[tw.id] += tw.w
		}
	}
	clear(m.scores)
	// Cosine up to the profile's norm, which does not change the ranking.
	for id, w := range profile {
		for _, p := range m.postings[id] {
			m.scores[p.id] += w * p.w
		}
	}
	return topKScores(m.scores, q, dst), nil
}
