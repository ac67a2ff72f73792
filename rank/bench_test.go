package rank

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// BenchmarkTrend measures counting every ad's engagement from the graph
// (what each snapshot build and load does), with and without the new-user
// channel, on 20,000 users x 20 events over 5,000 ads: the ratio of the two
// is the cost of the new-user priors.
// clickStore is the store of the prior benchmarks: 400k clicks of 20k
// users (20 each) on 5k ads over 30 days.
func clickStore(b *testing.B) *graph.Store {
	store := graph.NewStore(graph.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	const users, perUser, ads = 20_000, 20, 5_000
	t0 := worldT0
	for u := range users {
		src := graph.Ref{Type: graph.NodeUser, ID: "u" + strconv.Itoa(u)}
		for e := range perUser {
			ev := graph.Event{Src: src, Dst: graph.Ref{Type: graph.NodeAd, ID: "a" + strconv.Itoa(rng.IntN(ads))},
				Type: graph.EdgeClick, TS: t0 + int64(rng.IntN(30*24*3600*1000)), Weight: 1, ID: src.ID + "-" + strconv.Itoa(e)}
			if _, err := store.AddEvent(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	store.Compact()
	return store
}

func BenchmarkTrend(b *testing.B) {
	store := clickStore(b)
	until := store.MaxTS()
	for _, bc := range []struct {
		name          string
		newUserEvents int
	}{{"everyone", 0}, {"new-users", DefaultNewUserEvents}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := DefaultOptions()
			opts.NewUser = NewUser(bc.newUserEvents)
			b.ReportAllocs()
			for b.Loop() {
				NewPriors(store, until, until, opts)
			}
		})
	}
}

// BenchmarkCoEngagement measures the co-engagement term on the store of
// BenchmarkTrend: counting it from the graph (each snapshot build and
// load), and one retrieval's term for a user with 50 recent ads.
func BenchmarkCoEngagement(b *testing.B) {
	store := clickStore(b)
	until := store.MaxTS()
	opts := DefaultOptions()
	b.Run("count", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewCoEngagement(store, until, opts)
		}
	})
	c := NewCoEngagement(store, until, opts)
	recent := make([]RecentAd, 50)
	for i := range recent {
		recent[i] = RecentAd{Ad: uint32(i * 97), TS: until - int64(i)*60_000}
	}
	b.Run("boost", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Boost(recent, until, 1)
		}
	})
}
