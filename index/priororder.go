package index

import (
	"cmp"
	"slices"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
)

// priorTop is the number of live docs with the highest prior that a
// snapshot keeps sorted per prior channel, for the prior pass of Search.
const priorTop = 1024

// priorOrder is a snapshot's lazily computed order of its live docs by
// prior, per channel (0: Doc.Prior, 1: Doc.NewUserPrior). Each snapshot
// owns its own (a transaction starts a new one). Safe for concurrent use.
type priorOrder struct {
	once [2]sync.Once
	top  [2]*ranked // at most priorTop ids, highest prior first (ties by smaller id)
	// popTop holds at most priorTop live docs with the largest popularity
	// coordinate (Snapshot.popAxis), largest first.
	popOnce sync.Once
	popTop  *ranked
}

// ranked is a short list of doc ids in rank order, with what a pass over
// it needs to tell, per query, which of them to score without a bitmap
// lookup per id.
type ranked struct {
	ids []uint32
	set *roaring.Bitmap // ids
	asc []int32         // positions in ids, by increasing id
}

func newRanked(ids []uint32) *ranked {
	r := &ranked{ids: ids, set: roaring.BitmapOf(ids...), asc: make([]int32, len(ids))}
	for i := range r.asc {
		r.asc[i] = int32(i)
	}
	slices.SortFunc(r.asc, func(a, b int32) int { return cmp.Compare(ids[a], ids[b]) })
	return r
}

// outside returns, per position of r.ids, whether that doc is allowed and
// not in cand: the docs a pass scores beside the candidates.
func (r *ranked) outside(cand *roaring.Bitmap, allowed allowSet) []bool {
	out := make([]bool, len(r.ids))
	it := allowed.of(r.set)
	it.AndNot(cand)
	// The bitmap's ids ascend, as r.ids read through r.asc do.
	j := 0
	for i := it.Iterator(); i.HasNext(); {
		id := i.Next()
		for r.ids[r.asc[j]] != id {
			j++
		}
		out[r.asc[j]] = true
	}
	return out
}

// byPrior returns the live docs with the highest prior of channel, best
// first.
func (s *Snapshot) byPrior(channel int) *ranked {
	o := s.porder
	o.once[channel].Do(func() {
		ids := topLive(s.live, priorTop, func(id uint32) float32 {
			if v := s.prior.at(int(id)); v != nil {
				return v[channel]
			}
			return 0
		})
		o.top[channel] = newRanked(ids)
	})
	return o.top[channel]
}

// byPopularity returns the live docs with the largest popularity
// coordinate (at most priorTop, largest first, ties by smaller id); nil
// when the snapshot has no popularity axis.
func (s *Snapshot) byPopularity() *ranked {
	if s.popAxis < 0 {
		return nil
	}
	o := s.porder
	o.popOnce.Do(func() {
		ids := topLive(s.live, priorTop, func(id uint32) float32 { return s.emb.at(int(id))[s.popAxis] })
		o.popTop = newRanked(ids)
	})
	return o.popTop
}

// topLive returns the at most n docs of live with the largest value, largest
// first (ties by smaller id). It keeps the re-rank's bounded heap
// (pushTop), O(|live| log n): it runs on the first query of every
// snapshot, and a snapshot follows every upsert of a million-ad index.
func topLive(live *roaring.Bitmap, n int, value func(id uint32) float32) []uint32 {
	h := make([]Hit, 0, min(n, int(live.GetCardinality())))
	for it := live.Iterator(); it.HasNext(); {
		id := it.Next()
		h = pushTop(h, n, Hit{ID: id, Score: value(id)})
	}
	slices.SortFunc(h, bestFirst)
	ids := make([]uint32, len(h))
	for i, e := range h {
		ids[i] = e.ID
	}
	return ids
}

// popularityPass adds to the top-k heap h the allowed docs outside cand
// among the docs with the largest popularity coordinate, unless the
// query's coordinate is negative: a popular doc can rank high through that
// coordinate alone, or through the coordinates the query bag's interest
// prototypes do not hold (the appended spectral factors, whose rows are
// longer the more engagement their ad holds), which a query weighing
// popularity at 0 still reads. It returns the number of docs it scored.
func (s *Snapshot) popularityPass(h []Hit, k int, vec []float32, cand *roaring.Bitmap, allowed allowSet,
	score func(id uint32) (Hit, bool)) ([]Hit, int) {
	r := s.popularityList(vec)
	if r == nil {
		return h, 0
	}
	return r.pass(h, k, cand, allowed, nil, score)
}

// popularityList returns the docs the popularity pass of a query vec
// scores, nil when it scores none (no popularity axis, or a negative
// coordinate).
func (s *Snapshot) popularityList(vec []float32) *ranked {
	if s.popAxis < 0 || vec[s.popAxis] < 0 {
		return nil
	}
	return s.byPopularity()
}

// pass adds to the top-k heap h, in r's order, the docs of r that are
// allowed and outside cand, until stop (nil: never), given the heap as it
// is, says that the doc at position i and all after it cannot enter. It
// returns the number of docs it scored.
func (r *ranked) pass(h []Hit, k int, cand *roaring.Bitmap, allowed allowSet, stop func(i int, h []Hit) bool,
	score func(id uint32) (Hit, bool)) ([]Hit, int) {
	outside := r.outside(cand, allowed)
	n := 0
	for i, id := range r.ids {
		if stop != nil && stop(i, h) {
			break
		}
		if !outside[i] {
			continue
		}
		hit, ok := score(id)
		if !ok {
			continue
		}
		n++
		h = pushTop(h, k, hit)
	}
	return h, n
}

// priorPass adds to the top-k heap h every allowed doc outside cand whose
// prior could lift it into the top k: its score is at most
// bound + priorW*prior (bound: the largest possible similarity plus boost
// of a doc outside cand), so docs whose priorW*prior is below the k-th
// score minus bound cannot enter, and the pass stops at the first of them
// in prior order. score computes a doc's hit. It returns the number of docs
// it scored.
func (s *Snapshot) priorPass(h []Hit, k int, priorW float32, channel int, bound float32, cand *roaring.Bitmap, allowed allowSet,
	score func(id uint32) (Hit, bool)) ([]Hit, int) {
	if priorW <= 0 || len(h) == 0 {
		return h, 0
	}
	top := s.byPrior(channel) // docs beyond the ranked ones are not considered (bounded cost)
	stop := func(i int, h []Hit) bool {
		if len(h) < k {
			return false
		}
		var prior float32
		if p := s.prior.at(int(top.ids[i])); p != nil {
			prior = p[channel]
		}
		return priorW*prior < h[0].Score-bound
	}
	return top.pass(h, k, cand, allowed, stop, score)
}
