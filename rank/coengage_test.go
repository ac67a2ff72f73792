package rank

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hir-ads/hir/graph"
)

// coEvent is one engagement of a co-engagement test: user u with ad a at
// time ts.
type coEvent struct {
	u, a string
	ts   int64
	typ  graph.EdgeType
}

func coStore(t *testing.T, evs []coEvent) *graph.Store {
	t.Helper()
	store := graph.NewStore(graph.Options{})
	for _, ev := range evs {
		if _, err := store.AddEvent(coGraphEvent(ev)); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

func coGraphEvent(ev coEvent) graph.Event {
	typ := ev.typ
	if typ == 0 {
		typ = graph.EdgeClick
	}
	return graph.Event{Src: graph.Ref{Type: graph.NodeUser, ID: ev.u}, Dst: graph.Ref{Type: graph.NodeAd, ID: ev.a},
		Type: typ, TS: worldT0 + ev.ts, Weight: 1}
}

// coCounts renders the counts by ad name: users per ad and pair counts
// ("A|B" with A < B).
func coCounts(store *graph.Store, c *CoEngagement) (users, pairs map[string]float32) {
	name := func(i uint32) string { return store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: i}).ID }
	users, pairs = map[string]float32{}, map[string]float32{}
	for a, n := range c.users {
		if n != 0 {
			users[name(uint32(a))] = n
		}
	}
	count := func(a, b uint32) float32 {
		row := c.rows[a]
		if i, ok := slices.BinarySearch(row.ads, b); ok {
			return row.n[i]
		}
		return 0
	}
	for a, row := range c.rows {
		if !slices.IsSorted(row.ads) {
			panic(fmt.Sprintf("row of %s not sorted", name(uint32(a))))
		}
		for k, b := range row.ads {
			n := row.n[k]
			if name(uint32(a)) < name(b) {
				pairs[name(uint32(a))+"|"+name(b)] = n
			}
			if count(b, uint32(a)) != n {
				panic(fmt.Sprintf("asymmetric pair %s %s", name(uint32(a)), name(b)))
			}
		}
	}
	return users, pairs
}

// TestCoEngagementCounts checks what counts as co-engaged: clicks or
// deeper by the same user, each ad once per user (at its first
// engagement), within the window; and that counting the newer events
// through observe gives the counts of a recount from scratch.
func TestCoEngagementCounts(t *testing.T) {
	tests := []struct {
		name   string
		window int
		evs    []coEvent
		users  map[string]float32
		pairs  map[string]float32
	}{
		{
			name: "pairs within a user", window: 20,
			evs:   []coEvent{{u: "u1", a: "A", ts: 1}, {u: "u1", a: "B", ts: 2}, {u: "u1", a: "C", ts: 3}, {u: "u2", a: "A", ts: 4}, {u: "u2", a: "B", ts: 5}},
			users: map[string]float32{"A": 2, "B": 2, "C": 1},
			pairs: map[string]float32{"A|B": 2, "A|C": 1, "B|C": 1},
		},
		{
			name: "window of 1: neighbours in the sequence only", window: 1,
			evs:   []coEvent{{u: "u1", a: "A", ts: 1}, {u: "u1", a: "B", ts: 2}, {u: "u1", a: "C", ts: 3}},
			users: map[string]float32{"A": 1, "B": 1, "C": 1},
			pairs: map[string]float32{"A|B": 1, "B|C": 1},
		},
		{
			name: "a repeat engagement counts once, at its first", window: 1,
			evs:   []coEvent{{u: "u1", a: "A", ts: 1}, {u: "u1", a: "B", ts: 2}, {u: "u1", a: "A", ts: 3}, {u: "u1", a: "C", ts: 4}},
			users: map[string]float32{"A": 1, "B": 1, "C": 1},
			pairs: map[string]float32{"A|B": 1, "B|C": 1},
		},
		{
			name: "impressions and not_interested do not count", window: 20,
			evs: []coEvent{{u: "u1", a: "A", ts: 1}, {u: "u1", a: "B", ts: 2, typ: graph.EdgeImpression},
				{u: "u1", a: "C", ts: 3, typ: graph.EdgeNotInterested}, {u: "u1", a: "D", ts: 4, typ: graph.EdgePurchase}},
			users: map[string]float32{"A": 1, "D": 1},
			pairs: map[string]float32{"A|D": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.CoEngage.WindowAds = tc.window
			full := coStore(t, tc.evs)
			users, pairs := coCounts(full, NewCoEngagement(full, math.MaxInt64, opts))
			if !maps.Equal(users, tc.users) || !maps.Equal(pairs, tc.pairs) {
				t.Errorf("counted users %v pairs %v, want %v %v", users, pairs, tc.users, tc.pairs)
			}
			// Count the first events, then observe the rest one by one.
			for cut := range len(tc.evs) {
				store := coStore(t, tc.evs[:cut])
				c := NewCoEngagement(store, math.MaxInt64, opts)
				for _, ev := range tc.evs[cut:] {
					gev := coGraphEvent(ev)
					if _, err := store.AddEvent(gev); err != nil {
						t.Fatal(err)
					}
					c.Observe(store, []graph.Event{gev})
				}
				if u, p := coCounts(store, c); !maps.Equal(u, tc.users) || !maps.Equal(p, tc.pairs) {
					t.Errorf("observed after %d events: users %v pairs %v, want %v %v", cut, u, p, tc.users, tc.pairs)
				}
			}
		})
	}
	if c := NewCoEngagement(graph.NewStore(graph.Options{}), 0, Options{CoEngage: CoEngageOptions{WindowAds: -1}}); c != nil {
		t.Errorf("window -1: counts kept, want the term off")
	}
}

// TestCoEngagementBoost checks the term: recency-weighted cosine of each
// ad with the user's recent ads.
func TestCoEngagementBoost(t *testing.T) {
	// A and B are co-engaged by two users, A and C by one; D is alone.
	store := coStore(t, []coEvent{
		{u: "u1", a: "A", ts: 1}, {u: "u1", a: "B", ts: 2},
		{u: "u2", a: "A", ts: 3}, {u: "u2", a: "B", ts: 4}, {u: "u2", a: "C", ts: 5},
		{u: "u3", a: "D", ts: 6}, {u: "u4", a: "C", ts: 7},
	})
	id := func(name string) uint32 {
		n, ok := store.Lookup(graph.Ref{Type: graph.NodeAd, ID: name})
		if !ok {
			t.Fatalf("no ad %s", name)
		}
		return n.Idx
	}
	opts := DefaultOptions()
	opts.CoEngage.HalfLifeAds, opts.CoEngage.HalfLife = 1, -1 // no time decay
	c := NewCoEngagement(store, math.MaxInt64, opts)
	near := func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-5 }
	// users: A 2, B 2, C 2, D 1; pairs: AB 2, AC 1, BC 1.
	const hour = int64(time.Hour / time.Millisecond)
	aged := opts
	aged.CoEngage.HalfLife = time.Hour
	cAged := NewCoEngagement(store, math.MaxInt64, aged)
	tests := []struct {
		name   string
		c      *CoEngagement
		recent []string
		ages   []int64 // ms before the retrieval, by recent ad; nil: all 0
		weight float32
		want   map[string]float32
	}{
		{"one recent ad", c, []string{"A"}, nil, 1, map[string]float32{"B": 2 / 2.0, "C": 1 / 2.0}},
		{"weight scales", c, []string{"A"}, nil, 3, map[string]float32{"B": 3, "C": 1.5}},
		{"older ads weigh less", c, []string{"C", "A"}, nil, 1, map[string]float32{"A": 0.5, "B": 0.5 + 0.5*1, "C": 0.5 * 0.5}},
		{"an ad without co-engagement", c, []string{"D"}, nil, 1, map[string]float32{}},
		{"no recent ads", c, nil, nil, 1, nil},
		{"weight 0", c, []string{"A"}, nil, 0, nil},
		{"no time decay without a half-life", c, []string{"A"}, []int64{5 * hour}, 1, map[string]float32{"B": 1, "C": 0.5}},
		{"an engagement one half-life ago weighs half", cAged, []string{"A"}, []int64{hour}, 1, map[string]float32{"B": 0.5, "C": 0.25}},
		{"time and position decay multiply", cAged, []string{"C", "A"}, []int64{0, 2 * hour}, 1,
			map[string]float32{"A": 0.5, "B": 0.5 + 0.5*0.25, "C": 0.5 * 0.5 * 0.25}},
		{"an engagement after the retrieval time weighs as one at it", cAged, []string{"A"}, []int64{-hour}, 1, map[string]float32{"B": 1, "C": 0.5}},
	}
	const asOf = 100 * hour
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recent := make([]RecentAd, len(tc.recent))
			for i, n := range tc.recent {
				recent[i] = RecentAd{Ad: id(n), TS: asOf}
				if tc.ages != nil {
					recent[i].TS -= tc.ages[i]
				}
			}
			got := tc.c.Boost(recent, asOf, tc.weight)
			if (got == nil) != (tc.want == nil) || len(got) != len(tc.want) {
				t.Fatalf("boost = %v, want %v", got, tc.want)
			}
			for name, w := range tc.want {
				if !near(got[id(name)], w) {
					t.Errorf("boost of %s = %v, want %v", name, got[id(name)], w)
				}
			}
		})
	}
}
