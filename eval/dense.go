package eval

import (
	"context"
	"fmt"
	"math"
)

// Embedder supplies the embeddings of our model to [Dense]: the lead wires
// model.Model.Embed over a graph.Store built from the training view.
type Embedder interface {
	// Fit prepares the embedder on the training view (build the graph store
	// of the view; load or train the model). Nothing later than train.AsOf
	// may be used.
	Fit(ctx context.Context, train *TrainView) error
	// EmbedItems returns one vector per item (by dense id) as of asOf; a nil
	// vector marks an item that cannot be embedded.
	EmbedItems(ctx context.Context, asOf int64) ([][]float32, error)
	// EmbedUser returns the user's vector from their neighbourhood as of
	// q.AsOf (in replay: including the replayed events already observed),
	// or nil when the user cannot be embedded.
	EmbedUser(ctx context.Context, q *Query) ([]float32, error)
	// Observe ingests a replayed event (add it to the graph store; no
	// retraining).
	Observe(in Interaction)
}

// Priors is implemented by an [Embedder] whose retrieval adds per-item
// terms to the dot product (our engagement prior and co-engagement term);
// [Dense] adds them too.
type Priors interface {
	// ItemPriors returns the weighted terms of every item by dense id for
	// query q (its user may select other priors), as of the events observed
	// so far, or nil for none.
	ItemPriors(q *Query) []float32
}

// Dense is exact dense retrieval: items are ranked by the dot product of
// their embedding with the user's (plus the item's prior when the embedder
// implements [Priors]), over every item.
type Dense struct {
	name  string
	emb   Embedder
	items [][]float32
	// scores by item; -Inf for items without a vector
	scores []float32
}

var (
	_ Recommender = (*Dense)(nil)
	_ Observer    = (*Dense)(nil)
)

// NewDense returns exact dense retrieval named name over emb's vectors.
func NewDense(name string, emb Embedder) *Dense { return &Dense{name: name, emb: emb} }

// Name returns the name given to [NewDense].
func (d *Dense) Name() string { return d.name }

// Fit fits the embedder and embeds every item as of the cut.
func (d *Dense) Fit(ctx context.Context, train *TrainView) error {
	if err := d.emb.Fit(ctx, train); err != nil {
		return fmt.Errorf("fit embedder: %w", err)
	}
	items, err := d.emb.EmbedItems(ctx, train.AsOf)
	if err != nil {
		return fmt.Errorf("embed items: %w", err)
	}
	if len(items) != train.Catalog.NumItems() {
		return fmt.Errorf("%w: embedder returned %d item vectors for %d items", ErrBadConfig, len(items), train.Catalog.NumItems())
	}
	d.items = items
	d.scores = make([]float32, len(items))
	return nil
}

// Items returns the item vectors computed by Fit, by dense item id. The
// slice is shared: do not modify it.
func (d *Dense) Items() [][]float32 { return d.items }

// Observe passes a replayed event to the embedder.
func (d *Dense) Observe(in Interaction) { d.emb.Observe(in) }

// TopK embeds the user and ranks every item by dot product.
func (d *Dense) TopK(ctx context.Context, q *Query, dst []int32) ([]int32, error) {
	u, err := d.emb.EmbedUser(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("embed user %d: %w", q.User, err)
	}
	var priors []float32
	if p, ok := d.emb.(Priors); ok {
		priors = p.ItemPriors(q)
	}
	negInf := float32(math.Inf(-1))
	for i, v := range d.items {
		if v == nil || u == nil {
			d.scores[i] = negInf
			continue
		}
		d.scores[i] = dot(u, v)
		if priors != nil {
			d.scores[i] += priors[i]
		}
	}
	return topKScores(d.scores, q, dst), nil
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range min(len(a), len(b)) {
		s += a[i] * b[i]
	}
	return s
}

// Retriever is an approximate top-K index over item vectors: our BoM token
// index (quantize, postings, exact re-rank).
type Retriever interface {
	// Build indexes the item vectors (by dense item id; nil = absent).
	Build(ctx context.Context, items [][]float32) error
	// Search returns up to k items for the user vector, best first, none
	// for which exclude is true.
	Search(ctx context.Context, user []float32, k int, exclude func(item int32) bool) ([]int32, error)
}

// Indexed is retrieval through a [Retriever] built on the item vectors of an
// exact [Dense] method, with the same user vectors. It reports its recall
// against that method's top-K ([Approximator]); the Dense method must be
// evaluated in the same run, before it.
type Indexed struct {
	name  string
	exact *Dense
	r     Retriever
}

var (
	_ Recommender  = (*Indexed)(nil)
	_ Approximator = (*Indexed)(nil)
)

// NewIndexed returns index-backed retrieval named name approximating exact.
func NewIndexed(name string, exact *Dense, r Retriever) *Indexed {
	return &Indexed{name: name, exact: exact, r: r}
}

// Name returns the name given to [NewIndexed].
func (x *Indexed) Name() string { return x.name }

// Exact returns the name of the exact dense method.
func (x *Indexed) Exact() string { return x.exact.Name() }

// Fit builds the index on the exact method's item vectors.
func (x *Indexed) Fit(ctx context.Context, _ *TrainView) error {
	if x.exact.items == nil {
		return fmt.Errorf("%w: %s is fitted before the exact method %s", ErrBadConfig, x.name, x.exact.Name())
	}
	if err := x.r.Build(ctx, x.exact.items); err != nil {
		return fmt.Errorf("build index: %w", err)
	}
	return nil
}

// TopK embeds the user and searches the index.
func (x *Indexed) TopK(ctx context.Context, q *Query, dst []int32) ([]int32, error) {
	u, err := x.exact.emb.EmbedUser(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("embed user %d: %w", q.User, err)
	}
	if u == nil {
		return dst[:0], nil
	}
	got, err := x.r.Search(ctx, u, q.K, q.Excluded)
	if err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	return append(dst[:0], got...), nil
}
