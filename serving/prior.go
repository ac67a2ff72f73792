package serving

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hir-ads/hir/graph"
)

// Defaults of the engagement prior, chosen on the validation windows of
// MovieLens-100K and of a synthetic ads world (docs/evaluation.md).
const (
	// DefaultPriorHalfLife is the half-life of an engagement's weight in an
	// ad's trend.
	DefaultPriorHalfLife = 14 * 24 * time.Hour
	// DefaultPriorWeight scales the prior in the exact re-rank.
	DefaultPriorWeight = 0.3
)

// trend is every ad's recency-weighted count of positive engagement (click
// or deeper): an event at ts weighs 2^((ts-ref)/halfLife), so that the
// counts of all ads, taken at any later time, keep their order while old
// events fade. An ad's prior is ln(1+count): the log-popularity term that
// in-batch contrastive training removes from the embeddings' dot products
// (their logits estimate a user-ad affinity relative to the ad's base rate).
// Safe for concurrent use.
type trend struct {
	halfLifeMS float64
	ref        int64 // unix ms at which an event weighs 1

	mu  sync.Mutex
	raw map[uint32]float64 // by ad node index
}

// newTrend counts the positive engagement of every ad of store with
// ts <= until, weighted relative to ref.
func newTrend(store *graph.Store, ref, until int64, halfLife time.Duration) *trend {
	t := &trend{halfLifeMS: float64(halfLife.Milliseconds()), ref: ref, raw: map[uint32]float64{}}
	for i := range store.NumNodes(graph.NodeAd) {
		var sum float64
		store.Neighbors(graph.NodeID{Type: graph.NodeAd, Idx: uint32(i)}, until, func(e graph.Edge) bool {
			if !e.Out && e.Type.IsPositive() {
				sum += t.weight(e.TS)
			}
			return true
		})
		if sum > 0 {
			t.raw[uint32(i)] = sum
		}
	}
	return t
}

func (t *trend) weight(ts int64) float64 { return math.Exp2(float64(ts-t.ref) / t.halfLifeMS) }

// prior returns ad's prior, ln(1+count); 0 for a nil trend.
func (t *trend) prior(ad uint32) float32 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.priorLocked(ad)
}

// priorLocked is prior with t.mu held.
func (t *trend) priorLocked(ad uint32) float32 { return float32(math.Log1p(t.raw[ad])) }

// syncPriors sets the prior of every live ad of the index from the trend
// (0 for all when the trend is nil), in one index snapshot: for an index
// read from a file, whose docs carry the priors they were saved with.
func (s *Snapshot) syncPriors(ctx context.Context) error {
	idx := s.Index.Snapshot()
	ids := make([]uint32, 0, idx.Len())
	it := idx.Live().Iterator()
	for it.HasNext() {
		ids = append(ids, it.Next())
	}
	priors := make([]float32, len(ids))
	if t := s.trend; t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		for i, id := range ids {
			priors[i] = t.priorLocked(id)
		}
	}
	if err := s.Index.SetPriors(ctx, ids, priors); err != nil {
		return fmt.Errorf("set ad priors: %w", err)
	}
	return nil
}

// ObserveEngagement adds the positive engagement events among evs (stored
// in store already) to the ads' trend and updates their priors in the live
// index, so that retrieval follows what is engaging now without waiting for
// the next snapshot. The ingest path calls it for every stored batch.
func (s *Snapshot) ObserveEngagement(ctx context.Context, store *graph.Store, evs []graph.Event) error {
	t := s.trend
	if t == nil || s.Index == nil {
		return nil
	}
	var ids []uint32
	// The lock is held until the index has the new priors, so that
	// concurrent observers publish them in the order they counted.
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range evs {
		ev := &evs[i]
		if ev.Dst.Type != graph.NodeAd || !ev.Type.IsPositive() {
			continue
		}
		id, ok := store.Lookup(ev.Dst)
		if !ok {
			continue
		}
		t.raw[id.Idx] += t.weight(ev.TS)
		ids = append(ids, id.Idx)
	}
	priors := make([]float32, len(ids))
	for i, id := range ids {
		priors[i] = t.priorLocked(id)
	}
	if len(ids) == 0 {
		return nil
	}
	if err := s.Index.SetPriors(ctx, ids, priors); err != nil {
		return fmt.Errorf("update ad priors: %w", err)
	}
	return nil
}
