package eval

import (
	"context"
	"fmt"
	"math"
	"time"
)

// DefaultRecentHalfLife is the half-life of [RecentPopularity], the
// service's default prior half-life (serving.DefaultPriorHalfLife).
const DefaultRecentHalfLife = 14 * 24 * time.Hour

// MethodRecentPopularity names the [RecentPopularity] baseline.
const MethodRecentPopularity = "recent-popularity"

// RecentPopularityOptions configures [NewRecentPopularity].
type RecentPopularityOptions struct {
	// HalfLife is the half-life of a positive's weight (default
	// DefaultRecentHalfLife).
	HalfLife time.Duration
}

// RecentPopularity ranks items by their positive interactions weighted
// 2^((ts-cut)/HalfLife), where cut is the training view's AsOf: a trending
// list. In replay it adds the replayed positives with the same weight, so
// it stays fresh (only the ordering matters, and it does not depend on the
// reference time).
type RecentPopularity struct {
	halfLifeMS float64
	ref        int64
	sums       []float64 // by item, sum of 2^((ts-ref)/halfLife)
	scores     []float32 // sums as float32, refreshed after changes
	stale      bool
}

var (
	_ Recommender = (*RecentPopularity)(nil)
	_ Observer    = (*RecentPopularity)(nil)
)

// NewRecentPopularity returns an unfitted recent-popularity baseline.
func NewRecentPopularity(o RecentPopularityOptions) (*RecentPopularity, error) {
	if o.HalfLife < 0 {
		return nil, fmt.Errorf("%w: recent-popularity half-life %v", ErrBadConfig, o.HalfLife)
	}
	if o.HalfLife == 0 {
		o.HalfLife = DefaultRecentHalfLife
	}
	return &RecentPopularity{halfLifeMS: float64(o.HalfLife.Milliseconds())}, nil
}

// Name returns "recent-popularity".
func (p *RecentPopularity) Name() string { return MethodRecentPopularity }

// Fit sums the decayed positives of the view.
func (p *RecentPopularity) Fit(_ context.Context, train *TrainView) error {
	p.ref = train.AsOf
	p.sums = make([]float64, train.Catalog.NumItems())
	p.scores = make([]float32, len(p.sums))
	for _, in := range train.Interactions {
		p.add(in)
	}
	p.stale = true
	return nil
}

func (p *RecentPopularity) add(in Interaction) {
	if in.Positive() && in.Item >= 0 && int(in.Item) < len(p.sums) {
		p.sums[in.Item] += math.Exp2(float64(in.TS-p.ref) / p.halfLifeMS)
	}
}

// Observe adds a replayed positive.
func (p *RecentPopularity) Observe(in Interaction) {
	p.add(in)
	p.stale = true
}

// TopK returns the items with the largest decayed counts the user has not
// interacted with.
func (p *RecentPopularity) TopK(_ context.Context, q *Query, dst []int32) ([]int32, error) {
	if p.stale {
		for i, s := range p.sums {
			p.scores[i] = float32(s)
		}
		p.stale = false
	}
	return topKScores(p.scores, q, dst), nil
}
