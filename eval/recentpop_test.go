package eval

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hir-ads/hir/graph"
)

// TestRecentPopularity checks the decayed ranking against hand-computed
// weights, that replayed events move it, and that the half-life matters.
func TestRecentPopularity(t *testing.T) {
	const day = int64(24 * 3600 * 1000)
	cut := int64(100 * day)
	cat := &Catalog{Users: []string{"u0", "u1"}, Items: []string{"old", "new", "mid", "never"}}
	click := func(item int32, ts int64) Interaction {
		return Interaction{User: 0, Item: item, TS: ts, Type: graph.EdgeClick}
	}
	// item 0: 3 positives 42 days before the cut (3 x 2^-3 = 0.375);
	// item 1: 1 positive at the cut (1); item 2: 2 positives 14 days
	// before (2 x 2^-1 = 1, a tie with item 1: the lower id ranks first);
	// item 3: an impression only (0).
	view := &TrainView{Catalog: cat, AsOf: cut, Interactions: []Interaction{
		click(0, cut-42*day), click(0, cut-42*day), click(0, cut-42*day),
		click(2, cut-14*day), click(2, cut-14*day),
		{User: 0, Item: 3, TS: cut, Type: graph.EdgeImpression},
		click(1, cut),
	}}
	top := func(p Recommender) []int32 {
		t.Helper()
		got, err := p.TopK(context.Background(), &Query{User: 1, AsOf: cut, K: 4}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	cases := []struct {
		name    string
		half    time.Duration
		observe []Interaction
		want    []int32
	}{
		{name: "14 days", want: []int32{1, 2, 0, 3}},
		{name: "a long half-life is plain popularity", half: 10000 * 24 * time.Hour, want: []int32{0, 2, 1, 3}},
		{name: "a replayed positive counts at its time", observe: []Interaction{click(2, cut+7*day)}, want: []int32{2, 1, 0, 3}},
		{name: "a replayed impression does not count", observe: []Interaction{{Item: 0, TS: cut + 30*day, Type: graph.EdgeImpression}}, want: []int32{1, 2, 0, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewRecentPopularity(RecentPopularityOptions{HalfLife: tc.half})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Fit(context.Background(), view); err != nil {
				t.Fatal(err)
			}
			_ = top(p) // scores computed once before the replay
			for _, in := range tc.observe {
				p.Observe(in)
			}
			if got := top(p); !slices.Equal(got, tc.want) {
				t.Errorf("TopK = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := NewRecentPopularity(RecentPopularityOptions{HalfLife: -time.Hour}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("negative half-life: err = %v, want ErrBadConfig", err)
	}
}
