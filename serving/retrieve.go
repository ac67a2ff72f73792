package serving

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
)

// PriorTerm is the prior term of a retrieval's re-rank: the weight of the
// ads' engagement priors, and whether the user is new (see
// [Snapshot.NewUser]), which selects the new-user priors.
type PriorTerm struct {
	Weight  float32
	NewUser bool
}

// CoTerm is the co-engagement term of a retrieval's re-rank: its weight
// and the user's recent distinct engaged ads, most recent first (see
// [Snapshot.RecentAds]).
type CoTerm struct {
	Weight float32
	Recent []uint32
}

// UserQuery returns the index query that POST /v1/retrieve runs for a query
// vector: the quantizer's BoM query bag of vec, k hits, the filter, the
// excluded ad ids (graph node indices), the prior term and the
// co-engagement term of the re-rank; filter and exclude may be nil. The
// bitmap is retained, not copied.
func (s *Snapshot) UserQuery(idx *index.Snapshot, vec []float32, k int, filter *index.Filter, exclude *roaring.Bitmap, prior PriorTerm, co CoTerm) index.Query {
	q := index.Query{Vector: vec, K: k, Filter: filter, Bag: idx.Quantizer().QueryBag(vec), PriorWeight: prior.Weight, NewUser: prior.NewUser,
		Boost: s.CoEngagement(co)}
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
func (s *Snapshot) RetrieveVector(ctx context.Context, vec []float32, k int, filter *index.Filter, exclude *roaring.Bitmap, prior PriorTerm, co CoTerm) (index.Query, index.Result, error) {
	if s == nil || s.Index == nil {
		return index.Query{}, index.Result{}, ErrNoSnapshot
	}
	idx := s.Index.Snapshot()
	q := s.UserQuery(idx, vec, k, filter, exclude, prior, co)
	res, err := idx.Search(ctx, q)
	if err != nil {
		return q, index.Result{}, fmt.Errorf("search index: %w", err)
	}
	return q, res, nil
}

// CoEngagement returns the co-engagement term of the re-rank by ad (graph
// node index; see [CoEngageOptions]): at most the strongest 1000 ads, nil
// when the term is off or the user has no engaged ads.
func (s *Snapshot) CoEngagement(co CoTerm) map[uint32]float32 {
	if s == nil {
		return nil
	}
	return s.co.boost(co.Recent, co.Weight)
}

// RecentAds returns the distinct ads (graph node indices) that user
// engaged with (click or deeper) at or before asOf, most recent first, as
// many as the co-engagement term reads; nil when the term is off.
func (s *Snapshot) RecentAds(store *graph.Store, user graph.NodeID, asOf int64) []uint32 {
	if s == nil || s.co == nil {
		return nil
	}
	return recentAds(store, user, asOf, s.co.opts.History)
}

// NewUser reports whether a user with the given number of events (stored,
// plus context events) is new for the snapshot's priors
// (PriorOptions.NewUserEvents): its retrievals read the new-user priors.
// False when the snapshot has no priors.
func (s *Snapshot) NewUser(events int) bool {
	return s != nil && s.trend != nil && s.trend.opts.newUser(events)
}
