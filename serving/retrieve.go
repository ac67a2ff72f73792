package serving

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/hir-ads/hir/index"
)

// PriorTerm is the prior term of a retrieval's re-rank: the weight of the
// ads' engagement priors, and whether the user is new (see
// [Snapshot.NewUser]), which selects the new-user priors.
type PriorTerm struct {
	Weight  float32
	NewUser bool
}

// UserQuery returns the index query that POST /v1/retrieve runs for a query
// vector: the quantizer's BoM query bag of vec, k hits, the filter, the
// excluded ad ids (graph node indices) and the prior term of the re-rank;
// filter and exclude may be nil. The bitmap is retained, not copied.
func UserQuery(idx *index.Snapshot, vec []float32, k int, filter *index.Filter, exclude *roaring.Bitmap, prior PriorTerm) index.Query {
	q := index.Query{Vector: vec, K: k, Filter: filter, Bag: idx.Quantizer().QueryBag(vec), PriorWeight: prior.Weight, NewUser: prior.NewUser}
	if exclude != nil && !exclude.IsEmpty() {
		q.Exclude = exclude
	}
	return q
}

// RetrieveVector runs the retrieve endpoint's candidate path for a query
// vector on the snapshot's live index (query bag -> postings ∩ filter, minus
// exclude -> exact re-rank with the prior term -> top-k) and returns the
// hits with the query it ran. Offline evaluation calls it to measure the
// production path. Safe for concurrent use.
func (s *Snapshot) RetrieveVector(ctx context.Context, vec []float32, k int, filter *index.Filter, exclude *roaring.Bitmap, prior PriorTerm) (index.Query, index.Result, error) {
	if s == nil || s.Index == nil {
		return index.Query{}, index.Result{}, ErrNoSnapshot
	}
	idx := s.Index.Snapshot()
	q := UserQuery(idx, vec, k, filter, exclude, prior)
	res, err := idx.Search(ctx, q)
	if err != nil {
		return q, index.Result{}, fmt.Errorf("search index: %w", err)
	}
	return q, res, nil
}

// NewUser reports whether a user with the given number of events (stored,
// plus context events) is new for the snapshot's priors
// (PriorOptions.NewUserEvents): its retrievals read the new-user priors.
// False when the snapshot has no priors.
func (s *Snapshot) NewUser(events int) bool {
	return s != nil && s.trend != nil && s.trend.opts.newUser(events)
}
