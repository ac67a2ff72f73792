package eval

import (
	"container/heap"
	"context"
	"math"
)

// Query asks a method for a user's top-K items.
type Query struct {
	User int32
	// AsOf is the query time (unix ms): the method may use nothing later.
	AsOf int64
	// History is the user's engagement at or before AsOf, in time order. In
	// the replay protocol it includes the test-window events already
	// replayed. Read-only.
	History []Interaction
	// K is the number of items wanted.
	K int

	exclude []bool // by item: already interacted with; read-only
}

// Excluded reports whether item must not be returned (the user has already
// interacted with it).
func (q *Query) Excluded(item int32) bool {
	return int(item) < len(q.exclude) && q.exclude[item]
}

// Recommender is a retrieval method under evaluation. The harness calls Fit
// once, then TopK (and, for an [Observer], Observe) from one goroutine.
type Recommender interface {
	// Name identifies the method in reports ("popularity", "bpr", ...).
	Name() string
	// Fit trains on the view; it must not retain anything later than
	// train.AsOf (the view holds nothing later).
	Fit(ctx context.Context, train *TrainView) error
	// TopK appends to dst[:0] up to q.K items, best first, none excluded by
	// q and none repeated, and returns it.
	TopK(ctx context.Context, q *Query, dst []int32) ([]int32, error)
}

// Observer is implemented by methods whose state follows the event stream
// in the replay protocol: Observe is called with each test-window event after
// the queries it could have answered.
type Observer interface {
	Observe(in Interaction)
}

// Approximator is implemented by a method that approximates another one run
// in the same evaluation (the token index approximates exact dense
// retrieval). The harness then reports [MetricOverlap]: the recall of its
// top-K against the exact method's top-K on the same queries.
type Approximator interface {
	// Exact returns the name of the exact method, or "" when the method
	// approximates none.
	Exact() string
}

// topKScores appends to dst[:0] the k best non-excluded items by score (ties
// to the lower item id), skipping items scored -Inf or NaN.
func topKScores(scores []float32, q *Query, dst []int32) []int32 {
	k := q.K
	h := scoredHeap(make([]scored, 0, k+1))
	for i, s := range scores {
		if math.IsInf(float64(s), -1) || s != s || q.Excluded(int32(i)) {
			continue
		}
		if len(h) < k {
			heap.Push(&h, scored{int32(i), s})
			continue
		}
		if k > 0 && s > h[0].score { // equal scores keep the lower id, already in
			h[0] = scored{int32(i), s}
			heap.Fix(&h, 0)
		}
	}
	dst = dst[:0]
	for range len(h) {
		dst = append(dst, 0)
	}
	for j := len(h) - 1; j >= 0; j-- {
		dst[j] = heap.Pop(&h).(scored).item
	}
	return dst
}

type scored struct {
	item  int32
	score float32
}

// scoredHeap is a min-heap: the worst entry (lowest score, then highest id) on top.
type scoredHeap []scored

func (h scoredHeap) Len() int { return len(h) }
func (h scoredHeap) Less(a, b int) bool {
	if h[a].score != h[b].score {
		return h[a].score < h[b].score
	}
	return h[a].item > h[b].item
}
func (h scoredHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *scoredHeap) Push(x any)   { *h = append(*h, x.(scored)) }
func (h *scoredHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
