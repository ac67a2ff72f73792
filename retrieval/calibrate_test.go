package retrieval

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/rank"
)

const calT0 = int64(1_700_000_000_000)

// trendingStore returns a world whose engagement after cut goes to the
// five ads that trend just before it: every user clicks six random ads
// over ten days, then, in the last day before cut, half the users click
// ads 0-4; after cut, the other users click ads 0-4. Popularity predicts
// the held-out clicks and nothing else does.
func trendingStore(t *testing.T) (*graph.Store, int64) {
	t.Helper()
	store := graph.NewStore(graph.Options{})
	const ads, users = 60, 40
	for i := range ads {
		if _, err := store.UpsertEntity(graph.Entity{Type: graph.NodeAd, ID: fmt.Sprintf("a%d", i), Text: fmt.Sprintf("topic%d item%d", i%6, i)}); err != nil {
			t.Fatal(err)
		}
	}
	const minute = 60_000
	cut := calT0 + 11*24*60*minute
	click := func(u, a int, ts int64) {
		t.Helper()
		ev := graph.Event{Src: graph.Ref{Type: graph.NodeUser, ID: fmt.Sprintf("u%d", u)},
			Dst: graph.Ref{Type: graph.NodeAd, ID: fmt.Sprintf("a%d", a)}, Type: graph.EdgeClick, TS: ts, Weight: 1}
		if _, err := store.AddEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	for u := range users {
		for j := range 6 {
			click(u, 5+(u*7+j*11)%(ads-5), calT0+int64(u*100+j)*minute)
		}
		for a := range 5 {
			if u%2 == 0 {
				click(u, a, cut-24*60*minute+int64(u*10+a)*minute) // trending before the cut
			} else {
				click(u, a, cut+int64(u*10+a)*minute) // held out
			}
		}
	}
	return store, cut
}

// tinyTrained trains a tiny model on store into a new data directory and
// returns its version directory.
func tinyTrained(t *testing.T, store *graph.Store) (string, *model.Checkpoint) {
	t.Helper()
	var cfg model.TrainConfig
	cfg.Model = model.Config{Dim: 16, Heads: 2, Layers: 1, FFNDim: 32, EmbedDim: 16, HashK: 8, HashDim: 16,
		TextBkts: 512, TextLen: 8, AttrBkts: 64, AttrLen: 4, VectorDim: 4, Prototypes: []int{4, 8}, Spectral: 8}
	cfg.Sampler.Teacher = graph.ViewOptions{MaxNodes: 8, Hops: 2}
	cfg.Sampler.Student = graph.ViewOptions{MaxNodes: 4, Hops: 1}
	cfg.Pairs, cfg.Steps = 8, 2
	ck, err := model.Train(context.Background(), store, cfg, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ck.Dir, ck
}

// TestCalibrate checks that the calibration finds the prior's weight where
// popularity predicts the held-out engagement, scores as of the cut (the
// held-out clicks neither count as seen nor reach the counts), and that a
// version carries it to the engines that serve it.
func TestCalibrate(t *testing.T) {
	ctx := context.Background()
	store, cut := trendingStore(t)
	dir, _ := tinyTrained(t, store)
	co := rank.DefaultWeights().CoEngagement
	opts := CalibrateOptions{Rank: rank.DefaultOptions(), CoEngagement: co, PriorWeights: []float32{0, 1, 3}, Seed: 1}
	c, err := CalibrateVersion(ctx, dir, cut, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil || len(c.Points) != 3 || c.Users != 20 || c.Cut != cut || c.CoEngagementWeight != co {
		t.Fatalf("calibration = %+v, want 3 points over the 20 held-out users at the cut", c)
	}
	if c.PriorWeight == 0 || c.Points[0].Recall >= 1 {
		t.Errorf("calibration chose prior weight %v (points %+v); popularity finds the held-out ads, want a positive weight", c.PriorWeight, c.Points)
	}
	for _, p := range c.Points[1:] {
		if p.Recall != 1 {
			t.Errorf("prior weight %v: recall %v, want 1 (the five trending ads rank first)", p.PriorWeight, p.Recall)
		}
	}
	// By default every engagement after the cut is ranked (Recent 0),
	// and a negative Recent reads the same.
	every := opts
	every.Recent, every.Cut = -1, cut
	ec, err := Calibrate(ctx, mustLoad(t, dir), store, every)
	if err != nil {
		t.Fatal(err)
	}
	if ec.Cut != c.Cut || ec.Users != c.Users {
		t.Errorf("Recent -1: cut %d, %d users; want the default's %d, %d", ec.Cut, ec.Users, c.Cut, c.Users)
	}
	// Only the latest share of the events: the cut moves later, fewer
	// users are ranked.
	late := opts
	late.Recent, late.Cut = 0.05, cut
	lc, err := Calibrate(ctx, mustLoad(t, dir), store, late)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Cut <= cut || lc.Users >= c.Users || lc.Users == 0 {
		t.Errorf("latest 5%%: cut %d, %d users; want after %d, fewer than %d", lc.Cut, lc.Users, cut, c.Users)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Calibration(); got == nil || got.PriorWeight != c.PriorWeight {
		t.Fatalf("loaded calibration = %+v, want prior weight %v", got, c.PriorWeight)
	}
	if m.PopularityAxis() < 0 {
		t.Fatal("the tiny model has no popularity coordinate")
	}
	pops := DefaultCalibratePopularityWeights()
	if len(c.PopularityPoints) != len(pops) || c.PopularityWeight == nil || !slices.Contains(pops, *c.PopularityWeight) {
		t.Fatalf("popularity weight %v, points %+v; want one of %v, a point each", c.PopularityWeight, c.PopularityPoints, pops)
	}
	for i, p := range c.PopularityPoints {
		if p.Popularity == nil || *p.Popularity != pops[i] || p.PriorWeight != 0 {
			t.Errorf("popularity point %d = %+v, want weight %v at prior weight 0", i, p, pops[i])
		}
	}
	for _, p := range c.Points {
		if p.Popularity != nil {
			t.Errorf("prior point %+v names a popularity weight", p)
		}
	}
	for _, tc := range []struct {
		name       string
		calibrated bool
		want       float32
	}{
		{"calibrated", true, c.PriorWeight},
		{"pinned", false, 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng, err := NewEngine(store, Options{Rank: rank.DefaultOptions(), Weights: rank.Weights{Prior: 0.25, CoEngagement: co},
				CalibratedPrior: tc.calibrated, NoKeywords: true})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			if got := eng.Weights(); got.Prior != 0.25 {
				t.Errorf("weights before a generation = %+v, want the options'", got)
			}
			s, err := Build(ctx, m, store, store.MaxTS(), BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.gen.Metrics["calibrated_prior_weight"]; got != float64(c.PriorWeight) {
				t.Errorf("generation metric calibrated_prior_weight = %v, want %v", got, c.PriorWeight)
			}
			if got := s.gen.Metrics["popularity_weight"]; got != float64(*c.PopularityWeight) {
				t.Errorf("generation metric popularity_weight = %v, want %v", got, *c.PopularityWeight)
			}
			if err := eng.Publish(ctx, s); err != nil {
				t.Fatal(err)
			}
			if got := eng.Weights(); got.Prior != tc.want || got.CoEngagement != co {
				t.Errorf("weights = %+v, want prior %v, co-engagement %v", got, tc.want, co)
			}
			// The user's popularity coordinate weighs the calibrated weight
			// in the similarity, and 1 when the request says so; the
			// generation's vector stays as it is.
			if got := eng.PopularityWeight(); got != *c.PopularityWeight {
				t.Errorf("popularity weight %v, want the calibrated %v", got, *c.PopularityWeight)
			}
			ref := graph.Ref{Type: graph.NodeUser, ID: "u3"}
			raw, _, err := eng.Vector(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			raw = slices.Clone(raw)
			axis := m.PopularityAxis()
			for _, pw := range []*float32{nil, new(float32(1))} {
				w := float32(1)
				if pw == nil {
					w = *c.PopularityWeight
				}
				zero := float32(0)
				res, err := eng.Retrieve(ctx, Request{User: &ref, K: 5, Weights: WeightOverrides{&zero, &zero, &zero}, Popularity: pw, Exhaustive: true})
				if err != nil {
					t.Fatal(err)
				}
				q := slices.Clone(raw)
				q[axis] *= w
				for _, cand := range res.Candidates {
					ad, _ := s.gen.Embeddings[graph.NodeAd].Vector(cand.Ad)
					var dot float32
					for j := range q {
						dot += q[j] * ad[j]
					}
					if math.Abs(float64(cand.Parts.Similarity-dot)) > 1e-4 {
						t.Fatalf("popularity weight %v: ad %d similarity %v, want %v", w, cand.Ad, cand.Parts.Similarity, dot)
					}
				}
			}
			if again, _, _ := eng.Vector(ctx, ref); !slices.Equal(again, raw) {
				t.Error("the generation's user vector changed")
			}
		})
	}
}

// TestCalibrateNothingHeldOut checks that a cut after every event leaves
// the version uncalibrated.
func TestCalibrateNothingHeldOut(t *testing.T) {
	store, _ := trendingStore(t)
	dir, _ := tinyTrained(t, store)
	c, err := CalibrateVersion(context.Background(), dir, store.MaxTS()+1, store, CalibrateOptions{Rank: rank.DefaultOptions(), Recent: -1})
	if err != nil || c != nil {
		t.Fatalf("CalibrateVersion = %+v, %v; want nil, nil", c, err)
	}
	if _, err := os.Stat(filepath.Join(dir, model.FileCalibration)); !os.IsNotExist(err) {
		t.Errorf("calibration file written without a calibration: %v", err)
	}
}

// launchStore returns a world whose engagement after cut goes to new ads:
// six campaigns of six ads, each clicked before cut by the campaign's six
// users (three ads each), and one ad per campaign without engagement
// before cut, which its campaign's users all click after it.
func launchStore(t *testing.T) (*graph.Store, int64) {
	t.Helper()
	store := graph.NewStore(graph.Options{})
	const camps, ads, users = 6, 6, 6
	ad := func(c, j int) string { return fmt.Sprintf("a%d-%d", c, j) } // j = ads: the new ad
	for c := range camps {
		for j := range ads + 1 {
			if _, err := store.UpsertEntity(graph.Entity{Type: graph.NodeAd, ID: ad(c, j), Text: fmt.Sprintf("item%d", c*10+j),
				Attrs: map[string]string{"campaign": fmt.Sprintf("c%d", c)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const minute = 60_000
	cut := calT0 + 10*24*60*minute
	click := func(u int, a string, ts int64) {
		t.Helper()
		ev := graph.Event{Src: graph.Ref{Type: graph.NodeUser, ID: fmt.Sprintf("u%d", u)},
			Dst: graph.Ref{Type: graph.NodeAd, ID: a}, Type: graph.EdgeClick, TS: ts, Weight: 1}
		if _, err := store.AddEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	for c := range camps {
		for i := range users {
			u := c*users + i
			for j := range 3 {
				click(u, ad(c, (i+j)%ads), calT0+int64(u*10+j)*minute)
			}
			click(u, ad(c, ads), cut+int64(u)*minute) // held out: the launch
		}
	}
	return store, cut
}

// TestCalibrateNewAds checks that the calibration chooses a new-ad scale
// above 1 where the held-out engagement goes to new ads of the users'
// campaigns, scoring the embeddings alone, and that the version loads
// with it.
func TestCalibrateNewAds(t *testing.T) {
	ctx := context.Background()
	store, cut := launchStore(t)
	dir, _ := tinyTrained(t, store)
	opts := CalibrateOptions{Rank: rank.DefaultOptions(), PriorWeights: []float32{0}, Recent: -1, K: 3, Seed: 1}
	c, err := CalibrateVersion(ctx, dir, cut, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	scales := DefaultCalibrateNewAdScales()
	if c == nil || len(c.NewAdPoints) != len(scales) {
		t.Fatalf("calibration = %+v, want a point per new-ad scale %v", c, scales)
	}
	for i, p := range c.NewAdPoints {
		if p.NewAdScale != scales[i] || p.PriorWeight != 0 {
			t.Errorf("new-ad point %d = %+v, want scale %v at prior weight 0", i, p, scales[i])
		}
	}
	// The first of the best scores wins; the launches rank first from
	// scale 2 up.
	score := func(p model.CalibrationPoint) float64 { return p.Recall + p.NDCG }
	if c.NewAdScale != 2 || score(c.NewAdPoints[1]) != 2 || !(score(c.NewAdPoints[0]) < 2) {
		t.Errorf("chose new-ad scale %v (points %+v); the launches are held out, want 2, the first to rank them all first",
			c.NewAdScale, c.NewAdPoints)
	}
	m := mustLoad(t, dir)
	if got := m.NewAdScale(); got != c.NewAdScale {
		t.Errorf("loaded version's new-ad scale %v, want the calibrated %v", got, c.NewAdScale)
	}
	s, err := Build(ctx, m, store, store.MaxTS(), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.gen.Metrics["new_ad_scale"]; got != float64(c.NewAdScale) {
		t.Errorf("generation metric new_ad_scale = %v, want %v", got, c.NewAdScale)
	}
}

func mustLoad(t *testing.T, dir string) *model.Model {
	t.Helper()
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestChoose checks the calibration's choice among candidates: the best by
// recall + NDCG + new-ad recall, unless the default is within the
// bootstrap interval of the difference.
func TestChoose(t *testing.T) {
	const n = 200
	// scores builds per-user scores: recall r(i), NDCG 0, new-ad recall
	// cold(i) for every fourth user (NaN elsewhere).
	scores := func(r, cold func(i int) float64) userScores {
		s := userScores{recall: make([]float64, n), ndcg: make([]float64, n), cold: make([]float64, n)}
		for i := range n {
			s.recall[i], s.cold[i] = r(i), math.NaN()
			if i%4 == 0 {
				s.cold[i] = cold(i)
			}
		}
		return s
	}
	zero := func(int) float64 { return 0 }
	half := func(int) float64 { return 0.5 }
	// noisy(0) and noisy(0.01) are 0.5 and 0.51 on average, and differ by
	// -1, 0 or 1 by user: a mean gain of 0.01 well inside the users'
	// sampling error.
	noisy := func(shift float64) func(int) float64 {
		if shift == 0 {
			return func(i int) float64 { return float64(i % 2) }
		}
		return func(i int) float64 { return float64(i/2%2) + shift }
	}
	boots := bootstrap(n, calibrateResamples, 1)
	for _, tc := range []struct {
		name   string
		scores []userScores
		def    int
		want   int
	}{
		{"a clear gain leaves the default", []userScores{scores(half, zero), scores(func(int) float64 { return 0.7 }, zero)}, 0, 1},
		{"a gain within the noise keeps the default", []userScores{scores(noisy(0), zero), scores(noisy(0.01), zero)}, 0, 0},
		{"without a default, the best", []userScores{scores(noisy(0), zero), scores(noisy(0.01), zero)}, -1, 1},
		{"new ads count", []userScores{scores(half, zero), scores(half, func(int) float64 { return 0.8 })}, 0, 1},
		{"the default when it is best", []userScores{scores(half, zero), scores(zero, zero)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, points := choose(tc.scores, tc.def, boots)
			if got != tc.want {
				t.Errorf("chose %d, want %d; points %v", got, tc.want, points)
			}
			for c, p := range points {
				if !(p.Low <= p.Score && p.Score <= p.High) {
					t.Errorf("candidate %d: score %v outside its interval [%v, %v]", c, p.Score, p.Low, p.High)
				}
				if p.ColdUsers != n/4 {
					t.Errorf("candidate %d: %d users with new ads, want %d", c, p.ColdUsers, n/4)
				}
				if want := p.Recall + p.NDCG + p.ColdRecall; math.Abs(p.Score-want) > 1e-12 {
					t.Errorf("candidate %d: score %v, want recall + NDCG + new-ad recall %v", c, p.Score, want)
				}
				if c == tc.def && (p.DiffLow != 0 || p.DiffHigh != 0) {
					t.Errorf("the default's difference interval [%v, %v], want zero", p.DiffLow, p.DiffHigh)
				}
			}
		})
	}
}
