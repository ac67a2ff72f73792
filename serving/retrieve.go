package serving

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/hir-ads/hir/index"
)

// UserQuery returns the index query that POST /v1/retrieve runs for a query
// vector: the quantizer's BoM query bag of vec, k hits, the filter, the
// excluded ad ids (graph node indices) and the weight of the ads' engagement
// priors in the re-rank; filter and exclude may be nil. The bitmap is
// retained, not copied.
func UserQuery(idx *index.Snapshot, vec []float32, k int, filter *index.Filter, exclude *roaring.Bitmap, priorWeight float32) index.Query {
	q := index.Query{Vector: vec, K: k, Filter: filter, Bag: idx.Quantizer().QueryBag(vec), PriorWeight: priorWeight}
	if exclude != nil && !exclude.IsEmpty() {
		q.Exclude = exclude
	}
	return q
}

// RetrieveVector runs the retrieve endpoint's candidate path for a query
// vector on the snapshot's live index (query bag -> postings ∩ filter, minus
// exclude -> exact re-rank with the priors weighted by priorWeight -> top-k)
// and returns the hits with the query it ran. Offline evaluation calls it to
// measure the production path. Safe for concurrent use.
func (s *Snapshot) RetrieveVector(ctx context.Context, vec []float32, k int, filter *index.Filter, exclude *roaring.Bitmap, priorWeight float32) (index.Query, index.Result, error) {
	if s == nil || s.Index == nil {
		return index.Query{}, index.Result{}, ErrNoSnapshot
	}
	idx := s.Index.Snapshot()
	q := UserQuery(idx, vec, k, filter, exclude, priorWeight)
	res, err := idx.Search(ctx, q)
	if err != nil {
		return q, index.Result{}, fmt.Errorf("search index: %w", err)
	}
	return q, res, nil
}
