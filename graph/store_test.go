package graph

import (
	"cmp"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	gocmp "github.com/google/go-cmp/cmp"
)

const day = int64(24 * time.Hour / time.Millisecond)

func TestEdgeRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(edgeRec{}); got != 16 {
		t.Errorf("unsafe.Sizeof(edgeRec{}) = %d, want 16", got)
	}
}

func TestEdgeRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		e    Edge
	}{
		{"zero ts in", Edge{Nbr: NodeID{NodeUser, 0}, Type: EdgeImpression, TS: 0, Weight: 0}},
		{"out max types", Edge{Nbr: NodeID{NodePixel, math.MaxUint32 - 1}, Type: EdgeFires, Out: true, TS: maxTS, Weight: 3.5}},
		{"typical", Edge{Nbr: NodeID{NodeAd, 12345}, Type: EdgeNotInterested, Out: true, TS: 1700000000123, Weight: 0.25}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := makeRec(tc.e.Nbr, tc.e.Type, tc.e.Out, tc.e.TS, tc.e.Weight).edge()
			if diff := gocmp.Diff(tc.e, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddEventRegistry(t *testing.T) {
	u1, u2 := Ref{Type: NodeUser, ID: "u1"}, Ref{Type: NodeUser, ID: "u2"}
	a1 := Ref{Type: NodeAd, ID: "a1"}
	s := NewStore(Options{})
	tests := []struct {
		name    string
		ev      Event
		wantOK  bool
		wantErr error
	}{
		{"first", Event{ID: "e1", Src: u1, Dst: a1, Type: EdgeClick, TS: 10, Weight: 1}, true, nil},
		{"duplicate id", Event{ID: "e1", Src: u2, Dst: a1, Type: EdgeClick, TS: 11, Weight: 1}, false, nil},
		{"no id twice is two events", Event{Src: u1, Dst: a1, Type: EdgeClick, TS: 10, Weight: 1}, true, nil},
		{"second user", Event{ID: "e2", Src: u2, Dst: a1, Type: EdgeImpression, TS: 5, Weight: 1}, true, nil},
		{"bad edge type", Event{Src: u1, Dst: a1, Type: EdgeType(200), TS: 5, Weight: 1}, false, ErrUnknownEdgeType},
		{"bad node type", Event{Src: Ref{Type: 99, ID: "x"}, Dst: a1, Type: EdgeClick, TS: 5, Weight: 1}, false, ErrUnknownNodeType},
		{"missing id", Event{Src: Ref{Type: NodeUser}, Dst: a1, Type: EdgeClick, TS: 5, Weight: 1}, false, ErrMissingID},
		{"negative ts", Event{Src: u1, Dst: a1, Type: EdgeClick, TS: -1, Weight: 1}, false, ErrBadTimestamp},
		{"nan weight", Event{Src: u1, Dst: a1, Type: EdgeClick, TS: 1, Weight: float32(math.NaN())}, false, ErrBadValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := s.AddEvent(tc.ev)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("AddEvent(%v) error = %v, want %v", tc.ev, err, tc.wantErr)
			}
			if ok != tc.wantOK {
				t.Errorf("AddEvent(%v) = %v, want %v", tc.ev, ok, tc.wantOK)
			}
		})
	}
	if got := s.NumEvents(); got != 3 {
		t.Errorf("NumEvents() = %d, want 3", got)
	}
	if got := s.NumNodes(NodeUser); got != 2 {
		t.Errorf("NumNodes(user) = %d, want 2", got)
	}
	if got := s.NumNodes(NodeAd); got != 1 {
		t.Errorf("NumNodes(ad) = %d, want 1", got)
	}
	for i, r := range []Ref{u1, u2} {
		id, ok := s.Lookup(r)
		if !ok || id != (NodeID{NodeUser, uint32(i)}) {
			t.Errorf("Lookup(%v) = %v, %v, want user %d", r, id, ok, i)
		}
		if got := s.Ref(id); got != r {
			t.Errorf("Ref(%v) = %v, want %v", id, got, r)
		}
	}
	if _, ok := s.Lookup(Ref{Type: NodeAd, ID: "u1"}); ok {
		t.Errorf("Lookup(ad:u1) found a node; ids are per type")
	}
	if got := s.Ref(NodeID{NodeAd, 7}); got.ID != "" {
		t.Errorf("Ref(missing) = %v, want empty id", got)
	}
	if got, want := s.MinTS(), int64(5); got != want {
		t.Errorf("MinTS() = %d, want %d", got, want)
	}
	if got, want := s.MaxTS(), int64(10); got != want {
		t.Errorf("MaxTS() = %d, want %d", got, want)
	}
	a, _ := s.Lookup(a1)
	if got := s.Degree(a, 100); got != 3 {
		t.Errorf("Degree(a1) = %d, want 3", got)
	}
	if got := s.Degree(a, 9); got != 1 {
		t.Errorf("Degree(a1, asOf 9) = %d, want 1", got)
	}
}

func TestUpsertEntity(t *testing.T) {
	s := NewStore(Options{})
	e := Entity{Type: NodeAd, ID: "a1", Text: "red shoes", Attrs: map[string]string{"brand": "acme"}, Vector: []float32{1, 2}}
	id, err := s.UpsertEntity(e)
	if err != nil {
		t.Fatalf("UpsertEntity: %v", err)
	}
	e.Attrs["brand"] = "changed"
	e.Vector[0] = 9
	want := Entity{Type: NodeAd, ID: "a1", Text: "red shoes", Attrs: map[string]string{"brand": "acme"}, Vector: []float32{1, 2}}
	if diff := gocmp.Diff(&want, s.Entity(id)); diff != "" {
		t.Errorf("Entity after caller mutation (-want +got):\n%s", diff)
	}
	// Events naming the node reuse its id; a second upsert replaces content.
	if _, err := s.AddEvent(Event{Src: Ref{Type: NodeUser, ID: "u"}, Dst: Ref{Type: NodeAd, ID: "a1"}, Type: EdgeClick, TS: 1, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	if got := s.NumNodes(NodeAd); got != 1 {
		t.Errorf("NumNodes(ad) = %d, want 1", got)
	}
	if _, err := s.UpsertEntity(Entity{Type: NodeAd, ID: "a1", Text: "blue"}); err != nil {
		t.Fatal(err)
	}
	if got := s.Entity(id); got == nil || got.Text != "blue" || got.Attrs != nil {
		t.Errorf("Entity after replace = %+v, want text blue and no attrs", got)
	}
	u, _ := s.Lookup(Ref{Type: NodeUser, ID: "u"})
	if got := s.Entity(u); got != nil {
		t.Errorf("Entity(user without content) = %+v, want nil", got)
	}
	if _, err := s.UpsertEntity(Entity{Type: NodeAd}); !errors.Is(err, ErrMissingID) {
		t.Errorf("UpsertEntity(no id) error = %v, want ErrMissingID", err)
	}
}

func collect(s *Store, id NodeID, asOf int64) []Edge {
	var out []Edge
	s.Neighbors(id, asOf, func(e Edge) bool { out = append(out, e); return true })
	return out
}

func TestOutOfOrderInsertKeepsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewStore(Options{})
	u := Ref{Type: NodeUser, ID: "u"}
	var want []int64
	for i := range 500 {
		ts := int64(rng.IntN(1000)) * 1000
		if i%3 == 0 { // mostly in order, some jumps back
			ts = int64(i) * 2000
		}
		want = append(want, ts)
		ev := Event{Src: u, Dst: Ref{Type: NodeAd, ID: "a" + string(rune('A'+i%20))}, Type: EdgeClick, TS: ts, Weight: 1}
		if _, err := s.AddEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	slices.Reverse(want)
	id, _ := s.Lookup(u)
	var got []int64
	for _, e := range collect(s, id, math.MaxInt64) {
		got = append(got, e.TS)
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("Neighbors timestamps not newest first (-want +got):\n%s", diff)
	}
}

func edgeLess(a, b Edge) int {
	return cmp.Or(cmp.Compare(a.TS, b.TS), cmp.Compare(a.Nbr.Type, b.Nbr.Type), cmp.Compare(a.Nbr.Idx, b.Nbr.Idx),
		cmp.Compare(a.Type, b.Type), cmp.Compare(boolInt(a.Out), boolInt(b.Out)), cmp.Compare(a.Weight, b.Weight))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestAsOfProperty checks on random graphs and random asOf that Neighbors,
// Degree and ForEachEdge return exactly the edges with ts <= asOf (or in the
// window), and nothing later.
func TestAsOfProperty(t *testing.T) {
	for seed := range uint64(8) {
		evs := randomEvents(seed, graphSpec{users: 30, ads: 25, campaigns: 5, advertisers: 3, products: 10, events: 600, t0: 1000 * day, span: 30 * day, ordered: seed%2 == 0})
		s := buildStore(t, Options{}, evs)
		adj := naiveAdjacency(t, s, evs)
		rng := rand.New(rand.NewPCG(seed, 99))
		for range 20 {
			asOf := 1000*day + rng.Int64N(32*day) - day
			for id, all := range adj {
				var want []Edge
				for _, e := range all {
					if e.TS <= asOf {
						want = append(want, e)
					}
				}
				got := collect(s, id, asOf)
				for i, e := range got {
					if e.TS > asOf {
						t.Fatalf("seed %d: Neighbors(%v, %d)[%d].TS = %d > asOf", seed, id, asOf, i, e.TS)
					}
					if i > 0 && got[i-1].TS < e.TS {
						t.Fatalf("seed %d: Neighbors(%v) not newest first at %d", seed, id, i)
					}
				}
				if d := s.Degree(id, asOf); d != len(want) {
					t.Fatalf("seed %d: Degree(%v, %d) = %d, want %d", seed, id, asOf, d, len(want))
				}
				slices.SortFunc(want, edgeLess)
				slices.SortFunc(got, edgeLess)
				if diff := gocmp.Diff(want, got); diff != "" {
					t.Fatalf("seed %d: Neighbors(%v, %d) (-want +got):\n%s", seed, id, asOf, diff)
				}
			}
			// ForEachEdge over a random window.
			from := asOf - rng.Int64N(10*day)
			var want, got []string
			for _, ev := range evs {
				if ev.TS >= from && ev.TS < asOf {
					want = append(want, ev.Src.String()+">"+ev.Dst.String()+"@"+ev.Type.String()+itoa(ev.TS))
				}
			}
			s.ForEachEdge(from, asOf, func(src NodeID, e Edge) bool {
				if !e.Out || e.TS < from || e.TS >= asOf {
					t.Fatalf("ForEachEdge(%d, %d) visited %+v", from, asOf, e)
				}
				got = append(got, s.Ref(src).String()+">"+s.Ref(e.Nbr).String()+"@"+e.Type.String()+itoa(e.TS))
				return true
			})
			slices.Sort(want)
			slices.Sort(got)
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Fatalf("seed %d: ForEachEdge(%d, %d) (-want +got):\n%s", seed, from, asOf, diff)
			}
		}
	}
}

func itoa(v int64) string { return "@" + strconv.FormatInt(v, 10) }

func TestForEachEdgeStops(t *testing.T) {
	evs := randomEvents(3, graphSpec{users: 5, ads: 5, campaigns: 2, advertisers: 1, events: 50, t0: 0, span: day})
	s := buildStore(t, Options{}, evs)
	n := 0
	s.ForEachEdge(0, day, func(NodeID, Edge) bool { n++; return n < 7 })
	if n != 7 {
		t.Errorf("ForEachEdge visited %d events after fn returned false at 7", n)
	}
	n = 0
	s.ForEachEdge(day, 0, func(NodeID, Edge) bool { n++; return true })
	if n != 0 {
		t.Errorf("ForEachEdge(empty window) visited %d", n)
	}
}

func TestDecayedWeight(t *testing.T) {
	var o Options
	o.Tau[EdgeImpression] = NoDecay
	o.Tau[EdgePurchase] = time.Hour
	s := NewStore(o)
	tau := float64(DefaultEngagementTau.Milliseconds())
	tests := []struct {
		name string
		e    Edge
		asOf int64
		want float64
	}{
		{"click one tau old", Edge{Type: EdgeClick, TS: 0, Weight: 2}, int64(tau), 2 / math.E},
		{"click age zero", Edge{Type: EdgeClick, TS: 5, Weight: 2}, 5, 2},
		{"structure no decay", Edge{Type: EdgeInCampaign, TS: 0, Weight: 1}, 1000 * day, 1},
		{"impression NoDecay", Edge{Type: EdgeImpression, TS: 0, Weight: 3}, 1000 * day, 3},
		{"purchase custom tau", Edge{Type: EdgePurchase, TS: 0, Weight: 1}, 2 * 3600 * 1000, math.Exp(-2)},
		{"not_interested decays", Edge{Type: EdgeNotInterested, TS: 0, Weight: 1}, 14 * day, 1 / math.E},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := float64(s.DecayedWeight(tc.e, tc.asOf))
			if math.Abs(got-tc.want) > 1e-5*math.Max(1, tc.want) {
				t.Errorf("DecayedWeight(%+v, %d) = %v, want %v", tc.e, tc.asOf, got, tc.want)
			}
		})
	}
}

func TestCompactPreservesLists(t *testing.T) {
	evs := randomEvents(5, graphSpec{users: 40, ads: 30, campaigns: 5, advertisers: 2, products: 8, events: 2000, t0: 0, span: 10 * day})
	s := buildStore(t, Options{}, evs)
	snapshot := func() map[NodeID][]Edge {
		m := map[NodeID][]Edge{}
		for nt := NodeType(1); nt < numNodeTypes; nt++ {
			for i := range s.NumNodes(nt) {
				id := NodeID{nt, uint32(i)}
				m[id] = collect(s, id, math.MaxInt64)
			}
		}
		return m
	}
	before := snapshot()
	u0, _ := s.Lookup(Ref{Type: NodeUser, ID: "u0"})
	held := collect(s, u0, math.MaxInt64)
	s.Compact()
	if diff := gocmp.Diff(before, snapshot()); diff != "" {
		t.Fatalf("Compact changed adjacency (-before +after):\n%s", diff)
	}
	for nt := NodeType(1); nt < numNodeTypes; nt++ {
		for i, l := range s.tables[nt].adj {
			if cap(l) != len(l) {
				t.Fatalf("after Compact %v %d: cap %d != len %d", nt, i, cap(l), len(l))
			}
		}
	}
	// Appends after compaction (in order and out of order) must not clobber
	// the neighbouring lists packed in the same array.
	for i, ts := range []int64{20 * day, 1} {
		ev := Event{Src: Ref{Type: NodeUser, ID: "u0"}, Dst: Ref{Type: NodeAd, ID: "a0"}, Type: EdgeClick, TS: ts, Weight: float32(i)}
		if _, err := s.AddEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	after := snapshot()
	a0, _ := s.Lookup(Ref{Type: NodeAd, ID: "a0"})
	for id, l := range before {
		extra := 0
		if id == u0 || id == a0 {
			extra = 2
		}
		if len(after[id]) != len(l)+extra {
			t.Errorf("after appends, %v has %d edges, want %d", id, len(after[id]), len(l)+extra)
		}
		if extra == 0 {
			if diff := gocmp.Diff(l, after[id]); diff != "" {
				t.Errorf("append clobbered %v (-want +got):\n%s", id, diff)
			}
		}
	}
	if diff := gocmp.Diff(held, before[u0]); diff != "" {
		t.Errorf("edges read before compaction changed (-want +got):\n%s", diff)
	}
}

// TestConcurrentAppendAndSample runs writers and readers at once; with -race
// it checks that readers never see torn data, and it checks asOf on the way.
func TestConcurrentAppendAndSample(t *testing.T) {
	evs := randomEvents(11, graphSpec{users: 50, ads: 40, campaigns: 6, advertisers: 3, products: 10, events: 4000, t0: 0, span: 20 * day})
	s := buildStore(t, Options{}, evs[:1000])
	sm := NewSampler(s, SamplerOptions{})
	var wg sync.WaitGroup
	const writers = 2
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1000 + w; i < len(evs); i += writers {
				if _, err := s.AddEvent(evs[i]); err != nil {
					t.Error(err)
					return
				}
				if i%997 == 0 {
					s.Compact()
				}
			}
		}()
	}
	errs := make(chan string, 16)
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for range 300 {
				asOf := rng.Int64N(20 * day)
				id := NodeID{NodeUser, uint32(rng.IntN(max(1, s.NumNodes(NodeUser))))}
				prev := int64(math.MaxInt64)
				s.Neighbors(id, asOf, func(e Edge) bool {
					if e.TS > asOf || e.TS > prev || !e.Type.Valid() || !e.Nbr.Type.Valid() {
						errs <- "bad edge " + e.Type.String()
						return false
					}
					prev = e.TS
					return true
				})
				g := sm.Sample(id, asOf, View(rng.IntN(2)), rng.Uint64())
				for i := 1; i < g.Len; i++ {
					if g.EdgeTS[i] > asOf {
						errs <- "future edge in sample"
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got, want := s.NumEvents(), int64(len(evs)); got != want {
		t.Errorf("NumEvents() = %d, want %d", got, want)
	}
}

func TestRunCompactorStops(t *testing.T) {
	s := buildStore(t, Options{}, randomEvents(1, graphSpec{users: 5, ads: 5, campaigns: 1, advertisers: 1, events: 100, span: day}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.RunCompactor(ctx, time.Millisecond) }()
	time.Sleep(5 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("RunCompactor() = %v, want context.Canceled", err)
	}
}

// TestUntil checks that Until keeps every node, index and content of the
// store and exactly the events up to its time, and that the copy is
// independent of later writes to the original.
func TestUntil(t *testing.T) {
	evs := randomEvents(5, graphSpec{users: 20, ads: 30, campaigns: 4, advertisers: 2, events: 400, t0: 0, span: 10 * day})
	s := buildStore(t, Options{}, evs)
	ad := Entity{Type: NodeAd, ID: "a0", Text: "red shoes"}
	if _, err := s.UpsertEntity(ad); err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int64{-1, 0, 3 * day, 10 * day} {
		t.Run(itoa(cut), func(t *testing.T) {
			c := s.Until(cut)
			var want int64
			s.ForEachEdge(0, cut+1, func(NodeID, Edge) bool { want++; return true })
			if got := c.NumEvents(); got != want {
				t.Errorf("NumEvents = %d, want %d", got, want)
			}
			if want > 0 && (c.MaxTS() > cut || c.MinTS() != s.MinTS()) {
				t.Errorf("MinTS, MaxTS = %d, %d; want %d, <= %d", c.MinTS(), c.MaxTS(), s.MinTS(), cut)
			}
			for nt := NodeType(1); nt < numNodeTypes; nt++ {
				if c.NumNodes(nt) != s.NumNodes(nt) {
					t.Fatalf("NumNodes(%v) = %d, want %d", nt, c.NumNodes(nt), s.NumNodes(nt))
				}
				for i := range s.NumNodes(nt) {
					id := NodeID{Type: nt, Idx: uint32(i)}
					if c.Ref(id) != s.Ref(id) || c.Entity(id) != s.Entity(id) {
						t.Fatalf("node %v: ref %v / %v, entity %v / %v", id, c.Ref(id), s.Ref(id), c.Entity(id), s.Entity(id))
					}
					var got, want []Edge
					c.Neighbors(id, math.MaxInt64, func(e Edge) bool { got = append(got, e); return true })
					s.Neighbors(id, cut, func(e Edge) bool { want = append(want, e); return true })
					if diff := gocmp.Diff(want, got); diff != "" {
						t.Fatalf("neighbours of %v (-as of the cut in s +c):\n%s", id, diff)
					}
				}
			}
			added := Ref{Type: NodeAd, ID: "added" + itoa(cut)}
			if _, err := s.AddEvent(Event{Src: Ref{Type: NodeUser, ID: "u0"}, Dst: added, Type: EdgeClick, TS: 0, Weight: 1}); err != nil {
				t.Fatal(err)
			}
			if _, ok := c.Lookup(added); ok || c.NumEvents() != want {
				t.Errorf("a write to the original reached the copy")
			}
		})
	}
}
