package graph

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

// checkSubgraph verifies the invariants of a sampled subgraph against the
// store (and the context edges of a virtual anchor): fixed shapes, mask,
// zeroed padding, the anchor first, hops within the view, every reaching
// edge visible at asOf, and SPD equal to a naive BFS over all visible edges
// between the sampled nodes.
func checkSubgraph(t testing.TB, s *Store, g *Subgraph, vo ViewOptions, ctx []Edge) {
	t.Helper()
	N := vo.MaxNodes
	if g.N != N || len(g.Nodes) != N || len(g.Mask) != N || len(g.Hop) != N || len(g.EdgeType) != N ||
		len(g.TimeBucket) != N || len(g.EdgeWeight) != N || len(g.EdgeTS) != N || len(g.WalkFreq) != N ||
		len(g.DropFeat) != N || len(g.SPD) != N*N {
		t.Fatalf("shapes: N=%d, want all [%d] and SPD [%d]", g.N, N, N*N)
	}
	if g.Len < 1 || g.Len > N {
		t.Fatalf("Len = %d, want 1..%d", g.Len, N)
	}
	if g.Nodes[0] != g.Anchor || g.Hop[0] != 0 || g.EdgeType[0] != EdgeNone || g.TimeBucket[0] != 0 ||
		g.EdgeTS[0] != 0 || g.EdgeWeight[0] != 0 || g.DropFeat[0] {
		t.Fatalf("anchor token = {%v hop %d %v tb %d ts %d w %v drop %v}, want the anchor with zero edge fields",
			g.Nodes[0], g.Hop[0], g.EdgeType[0], g.TimeBucket[0], g.EdgeTS[0], g.EdgeWeight[0], g.DropFeat[0])
	}
	seen := map[NodeID]int{}
	for i := range N {
		if g.Mask[i] != (i < g.Len) {
			t.Fatalf("Mask[%d] = %v with Len %d", i, g.Mask[i], g.Len)
		}
		if i >= g.Len {
			if g.Nodes[i] != (NodeID{}) || g.Hop[i] != 0 || g.EdgeType[i] != 0 || g.TimeBucket[i] != 0 ||
				g.EdgeWeight[i] != 0 || g.EdgeTS[i] != 0 || g.WalkFreq[i] != 0 || g.DropFeat[i] {
				t.Fatalf("padding token %d not zeroed", i)
			}
			continue
		}
		if j, dup := seen[g.Nodes[i]]; dup {
			t.Fatalf("node %v at tokens %d and %d", g.Nodes[i], j, i)
		}
		seen[g.Nodes[i]] = i
		if f := g.WalkFreq[i]; f < 0 || f > 1 || math.IsNaN(float64(f)) {
			t.Fatalf("WalkFreq[%d] = %v", i, f)
		}
		if i == 0 {
			continue
		}
		if int(g.Hop[i]) < 1 || int(g.Hop[i]) > vo.Hops {
			t.Fatalf("Hop[%d] = %d, want 1..%d", i, g.Hop[i], vo.Hops)
		}
		if g.EdgeTS[i] > g.AsOf {
			t.Fatalf("token %d reached by an edge at %d > asOf %d", i, g.EdgeTS[i], g.AsOf)
		}
		if !g.EdgeType[i].Valid() || g.TimeBucket[i] < 1 || int(g.TimeBucket[i]) >= NumTimeBuckets {
			t.Fatalf("token %d: edge type %v, time bucket %d", i, g.EdgeType[i], g.TimeBucket[i])
		}
		if g.TimeBucket[i] != TimeBucket(g.AsOf-g.EdgeTS[i]) {
			t.Fatalf("TimeBucket[%d] = %d, want %d", i, g.TimeBucket[i], TimeBucket(g.AsOf-g.EdgeTS[i]))
		}
	}
	// Naive adjacency among tokens over visible edges.
	n := g.Len
	adj := make([][]bool, n)
	for i := range adj {
		adj[i] = make([]bool, n)
	}
	edgesOf := func(i int) []Edge {
		if i == 0 && g.Anchor.Idx == VirtualIdx {
			var out []Edge
			for _, e := range ctx {
				if e.TS <= g.AsOf {
					out = append(out, e)
				}
			}
			return out
		}
		return collect(s, g.Nodes[i], g.AsOf)
	}
	for i := range n {
		for _, e := range edgesOf(i) {
			if j, ok := seen[e.Nbr]; ok && j != i {
				adj[i][j], adj[j][i] = true, true
			}
		}
	}
	// Each non-anchor token was reached from a token one hop closer by a
	// visible edge of the recorded type, time and decayed weight.
	for i := 1; i < n; i++ {
		found := false
		for j := range n {
			if int(g.Hop[j]) != int(g.Hop[i])-1 {
				continue
			}
			for _, e := range edgesOf(j) {
				if e.Nbr == g.Nodes[i] && e.Type == g.EdgeType[i] && e.TS == g.EdgeTS[i] && s.DecayedWeight(e, g.AsOf) == g.EdgeWeight[i] {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("token %d (%v, hop %d) has no visible reaching edge %v@%d", i, g.Nodes[i], g.Hop[i], g.EdgeType[i], g.EdgeTS[i])
		}
	}
	for a := range N {
		for b := range N {
			got := g.SPD[a*N+b]
			if a >= n || b >= n {
				if got != SPDPad {
					t.Fatalf("SPD[%d][%d] = %d on padding, want SPDPad", a, b, got)
				}
				continue
			}
			if got != g.SPD[b*N+a] {
				t.Fatalf("SPD not symmetric at %d,%d", a, b)
			}
		}
		if a < n {
			dist := bfs(adj, a)
			for b := range n {
				want := uint8(SPDFar)
				if dist[b] >= 0 && dist[b] <= SPDMax {
					want = uint8(dist[b])
				}
				if got := g.SPD[a*N+b]; got != want {
					t.Fatalf("SPD[%d][%d] = %d, want %d", a, b, got, want)
				}
			}
			if g.SPD[a] > g.Hop[a] {
				t.Fatalf("SPD[0][%d] = %d > Hop %d", a, g.SPD[a], g.Hop[a])
			}
		}
	}
}

func bfs(adj [][]bool, s int) []int {
	d := make([]int, len(adj))
	for i := range d {
		d[i] = -1
	}
	d[s] = 0
	q := []int{s}
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		for v, ok := range adj[u] {
			if ok && d[v] < 0 {
				d[v] = d[u] + 1
				q = append(q, v)
			}
		}
	}
	return d
}

var fuzzSpec = graphSpec{users: 20, ads: 15, campaigns: 4, advertisers: 2, products: 6, events: 250, t0: 100 * day, span: 40 * day}

func FuzzSamplerInvariants(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint16(0), uint16(30000), false, false, uint8(31))
	f.Add(uint64(7), uint64(9), uint16(5), uint16(65535), true, false, uint8(15))
	f.Add(uint64(3), uint64(4), uint16(40), uint16(100), false, true, uint8(0))
	f.Add(uint64(8), uint64(1), uint16(2), uint16(50000), true, true, uint8(3))
	f.Fuzz(func(t *testing.T, graphSeed, seed uint64, pick, asOfFrac uint16, student, virtual bool, maxNodes uint8) {
		evs := randomEvents(graphSeed, fuzzSpec)
		s := buildStore(t, Options{}, evs)
		view := ViewTeacher
		if student {
			view = ViewStudent
		}
		var o SamplerOptions
		o.Teacher.MaxNodes = 1 + int(maxNodes)%48
		o.Student.MaxNodes = 1 + int(maxNodes)%24
		sm := NewSampler(s, o)
		vo := sm.ViewOptions(view)
		asOf := fuzzSpec.t0 - day + int64(asOfFrac)*(fuzzSpec.span+2*day)/65535
		var g *Subgraph
		var ctx []Edge
		if virtual {
			rng := rand.New(rand.NewPCG(graphSeed, seed))
			for range int(pick % 8) {
				ctx = append(ctx, Edge{Nbr: NodeID{NodeAd, uint32(rng.IntN(fuzzSpec.ads))}, Type: EdgeClick, Out: true,
					TS: fuzzSpec.t0 + rng.Int64N(fuzzSpec.span), Weight: 1})
			}
			g = sm.SampleVirtual(NodeUser, ctx, asOf, view, seed)
			if g.Anchor != (NodeID{NodeUser, VirtualIdx}) {
				t.Fatalf("virtual anchor = %v", g.Anchor)
			}
		} else {
			nt := []NodeType{NodeUser, NodeAd, NodeCampaign, NodeAdvertiser, NodeProduct}[pick%5]
			id := NodeID{nt, uint32(int(pick/5) % max(1, s.NumNodes(nt)))}
			g = sm.Sample(id, asOf, view, seed)
		}
		checkSubgraph(t, s, g, vo, ctx)
		if !student && g.DropFeat[1%g.N] {
			t.Errorf("teacher view has feature dropout")
		}
	})
}

func TestSamplerDeterminism(t *testing.T) {
	evs := randomEvents(21, graphSpec{users: 60, ads: 50, campaigns: 8, advertisers: 3, products: 10, events: 3000, t0: 0, span: 60 * day})
	s := buildStore(t, Options{}, evs)
	// A second store with the same events in another order must sample the same.
	shuffled := append([]Event(nil), evs...)
	rand.New(rand.NewPCG(5, 5)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	sm1 := NewSampler(s, SamplerOptions{})
	for _, view := range []View{ViewTeacher, ViewStudent} {
		t.Run(view.String(), func(t *testing.T) {
			differs := 0
			const anchors = 30
			for i := range anchors {
				id := NodeID{NodeUser, uint32(i)}
				asOf := int64(30+i) * day
				a := sm1.Sample(id, asOf, view, 42)
				b := NewSampler(s, SamplerOptions{}).Sample(id, asOf, view, 42)
				if diff := gocmp.Diff(a, b); diff != "" {
					t.Fatalf("Sample(%v) twice differs (-first +second):\n%s", id, diff)
				}
				c := sm1.Sample(id, asOf, view, 43)
				if gocmp.Diff(a, c) != "" {
					differs++
				}
				checkSubgraph(t, s, a, sm1.ViewOptions(view), nil)
			}
			if differs < anchors/2 {
				t.Errorf("seed 42 vs 43 differ for %d of %d anchors, want most", differs, anchors)
			}
		})
	}
}

func TestSamplerViews(t *testing.T) {
	evs := randomEvents(31, graphSpec{users: 80, ads: 60, campaigns: 8, advertisers: 3, products: 10, events: 5000, t0: 0, span: 60 * day})
	s := buildStore(t, Options{}, evs)
	sm := NewSampler(s, SamplerOptions{})
	tests := []struct {
		view        View
		n, hops     int
		minDrop     float64
		maxDrop     float64
		wantMaxHops int
		minAlone    int // anchor-only views of 80
		maxAlone    int
	}{
		{ViewTeacher, 32, 2, 0, 0, 2, 0, 0},
		{ViewStudent, 16, 1, 0.15, 0.25, 1, 10, 32}, // AnchorOnly 0.25
	}
	for _, tc := range tests {
		t.Run(tc.view.String(), func(t *testing.T) {
			vo := sm.ViewOptions(tc.view)
			if vo.MaxNodes != tc.n || vo.Hops != tc.hops {
				t.Fatalf("ViewOptions(%v) = %+v, want MaxNodes %d Hops %d", tc.view, vo, tc.n, tc.hops)
			}
			drops, real, full, alone, maxHop := 0, 0, 0, 0, 0
			for i := range 80 {
				g := sm.Sample(NodeID{NodeUser, uint32(i)}, 61*day, tc.view, uint64(i))
				checkSubgraph(t, s, g, vo, nil)
				switch g.Len {
				case g.N:
					full++
				case 1:
					alone++
				}
				for k := 1; k < g.Len; k++ {
					real++
					if g.DropFeat[k] {
						drops++
					}
					maxHop = max(maxHop, int(g.Hop[k]))
				}
			}
			rate := float64(drops) / float64(real)
			if rate < tc.minDrop || rate > tc.maxDrop {
				t.Errorf("feature dropout rate = %.3f, want in [%v, %v]", rate, tc.minDrop, tc.maxDrop)
			}
			if full+alone < 70 {
				t.Errorf("%d of 80 subgraphs full and %d the anchor alone, want the rest few (dense graph)", full, alone)
			}
			if alone < tc.minAlone || alone > tc.maxAlone {
				t.Errorf("%d of 80 subgraphs the anchor alone, want %d..%d", alone, tc.minAlone, tc.maxAlone)
			}
			if maxHop != tc.wantMaxHops {
				t.Errorf("max hop = %d, want %d", maxHop, tc.wantMaxHops)
			}
		})
	}
}

// TestAnchorOnly checks that AnchorOnly drops a view's neighbourhood and
// its activity counts, and that a view it keeps is exactly the view sampled
// without it.
func TestAnchorOnly(t *testing.T) {
	evs := randomEvents(31, graphSpec{users: 80, ads: 60, campaigns: 8, advertisers: 3, products: 10, events: 5000, t0: 0, span: 60 * day})
	s := buildStore(t, Options{}, evs)
	var with, without SamplerOptions
	with.Student.AnchorOnly = 0.5
	without.Student.AnchorOnly = -1
	a, b := NewSampler(s, with), NewSampler(s, without)
	alone := 0
	for i := range 80 {
		id := NodeID{NodeUser, uint32(i)}
		ga, gb := a.Sample(id, 61*day, ViewStudent, uint64(i)), b.Sample(id, 61*day, ViewStudent, uint64(i))
		if gb.Len < 2 {
			t.Fatalf("user %d: %d tokens without AnchorOnly, want a neighbourhood", i, gb.Len)
		}
		if ga.Len == 1 {
			alone++
			if ga.Nodes[0] != id || !ga.Mask[0] || ga.Mask[1] {
				t.Errorf("user %d: anchor-only view %v %v", i, ga.Nodes[:2], ga.Mask[:2])
			}
			// A new entity has no edges, so no counts either.
			if ga.Activity != [2]float32{} || gb.Activity == [2]float32{} {
				t.Errorf("user %d: activity %v anchor alone, %v with its neighbourhood; want zero, non-zero", i, ga.Activity, gb.Activity)
			}
			continue
		}
		if ga.Activity != gb.Activity {
			t.Errorf("user %d: kept view's activity %v, %v without AnchorOnly", i, ga.Activity, gb.Activity)
		}
		if !slices.Equal(ga.Nodes, gb.Nodes) || !slices.Equal(ga.DropFeat, gb.DropFeat) || !slices.Equal(ga.SPD, gb.SPD) {
			t.Errorf("user %d: kept view differs from the view sampled without AnchorOnly", i)
		}
	}
	if alone < 25 || alone > 55 {
		t.Errorf("%d of 80 views the anchor alone at AnchorOnly 0.5", alone)
	}
	if g := a.Sample(NodeID{NodeUser, 0}, 61*day, ViewTeacher, 1); g.Len < 2 {
		t.Errorf("teacher view dropped its neighbourhood")
	}
}

func TestSampleVirtual(t *testing.T) {
	s := NewStore(Options{})
	add := func(src, dst Ref, et EdgeType, ts int64) {
		t.Helper()
		if _, err := s.AddEvent(Event{Src: src, Dst: dst, Type: et, TS: ts, Weight: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ad := func(i string) Ref { return Ref{Type: NodeAd, ID: i} }
	add(ad("a1"), Ref{Type: NodeCampaign, ID: "c1"}, EdgeInCampaign, 10)
	add(ad("a2"), Ref{Type: NodeCampaign, ID: "c1"}, EdgeInCampaign, 10)
	add(ad("a3"), Ref{Type: NodeCampaign, ID: "c2"}, EdgeInCampaign, 10)
	add(Ref{Type: NodeUser, ID: "u1"}, ad("a1"), EdgeClick, 20)
	a1, _ := s.Lookup(ad("a1"))
	a3, _ := s.Lookup(ad("a3"))
	sm := NewSampler(s, SamplerOptions{})
	ctx := []Edge{
		{Nbr: a1, Type: EdgeClick, Out: true, TS: 50, Weight: 1},
		{Nbr: a3, Type: EdgeClick, Out: true, TS: 500, Weight: 1},                 // future at asOf 100
		{Nbr: NodeID{NodeAd, 999}, Type: EdgeClick, Out: true, TS: 50, Weight: 1}, // not stored
	}
	g := sm.SampleVirtual(NodeUser, ctx, 100, ViewTeacher, 1)
	checkSubgraph(t, s, g, sm.ViewOptions(ViewTeacher), ctx)
	c2, _ := s.Lookup(Ref{Type: NodeCampaign, ID: "c2"})
	got := map[NodeID]bool{}
	for _, id := range g.Nodes[:g.Len] {
		got[id] = true
	}
	if !got[a1] {
		t.Errorf("virtual sample %v lacks the context neighbour a1", g.Nodes[:g.Len])
	}
	if got[a3] || got[c2] || got[NodeID{NodeAd, 999}] {
		t.Errorf("virtual sample %v reaches a future or unknown context neighbour", g.Nodes[:g.Len])
	}
	if g.Len < 4 { // anchor, a1, and through a1 the store's c1 and u1
		t.Errorf("virtual sample has %d tokens, want >= 4 (store neighbourhood of a1)", g.Len)
	}
	if diff := gocmp.Diff(g, sm.SampleVirtual(NodeUser, ctx, 100, ViewTeacher, 1)); diff != "" {
		t.Errorf("SampleVirtual not deterministic (-first +second):\n%s", diff)
	}
	empty := sm.SampleVirtual(NodeAd, nil, 100, ViewStudent, 1)
	checkSubgraph(t, s, empty, sm.ViewOptions(ViewStudent), nil)
	if empty.Len != 1 {
		t.Errorf("SampleVirtual(no ctx).Len = %d, want 1", empty.Len)
	}
	unknown := sm.Sample(NodeID{NodeUser, 12345}, 100, ViewTeacher, 1)
	if unknown.Len != 1 || unknown.Nodes[0] != (NodeID{NodeUser, 12345}) {
		t.Errorf("Sample(unknown) = Len %d anchor %v, want only the anchor", unknown.Len, unknown.Nodes[0])
	}
}

func TestNotInterestedPrior(t *testing.T) {
	s := NewStore(Options{})
	u := Ref{Type: NodeUser, ID: "u"}
	for i := range 6 {
		et := EdgeClick
		if i%2 == 1 {
			et = EdgeNotInterested
		}
		if _, err := s.AddEvent(Event{Src: u, Dst: Ref{Type: NodeAd, ID: string(rune('a' + i))}, Type: et, TS: int64(i + 1), Weight: 1}); err != nil {
			t.Fatal(err)
		}
	}
	id, _ := s.Lookup(u)
	tests := []struct {
		name    string
		prior   float32
		wantNeg int
	}{
		{"default prior keeps not_interested", 0, 3},
		{"negative prior excludes it", -1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o SamplerOptions
			o.EdgePrior[EdgeNotInterested] = tc.prior
			g := NewSampler(s, o).Sample(id, 100, ViewTeacher, 3)
			neg := 0
			for i := 1; i < g.Len; i++ {
				if g.EdgeType[i] == EdgeNotInterested {
					neg++
				}
			}
			if neg != tc.wantNeg {
				t.Errorf("tokens reached by not_interested = %d, want %d (types %v)", neg, tc.wantNeg, g.EdgeType[:g.Len])
			}
		})
	}
}

func TestTimeBucket(t *testing.T) {
	const u = TimeBucketUnitMS
	tests := []struct {
		delta int64
		want  uint8
	}{
		{-5, 1}, {0, 1}, {u - 1, 1}, {u, 2}, {2*u - 1, 2}, {2 * u, 3}, {4 * u, 4},
		{u << 12, 14}, {u<<13 - 1, 14}, {u << 13, 15}, {1 << 62, 15},
	}
	for _, tc := range tests {
		if got := TimeBucket(tc.delta); got != tc.want {
			t.Errorf("TimeBucket(%d) = %d, want %d", tc.delta, got, tc.want)
		}
	}
}

func TestActivity(t *testing.T) {
	const day = int64(24 * 3600 * 1000)
	s := NewStore(Options{})
	ad := Ref{Type: NodeAd, ID: "a"}
	user := func(i int) Ref { return Ref{Type: NodeUser, ID: "u" + strconv.Itoa(i)} }
	add := func(ev Event) {
		t.Helper()
		if _, err := s.AddEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	add(Event{Src: ad, Dst: Ref{Type: NodeCampaign, ID: "c"}, Type: EdgeInCampaign, TS: 1, Weight: 1})
	// Clicks at days 0, 14 and 28, an impression and a not_interested at
	// day 28 (edges, not engagements), and a click after every asOf below.
	add(Event{Src: user(0), Dst: ad, Type: EdgeClick, TS: 0 * day, Weight: 1})
	add(Event{Src: user(1), Dst: ad, Type: EdgeClick, TS: 14 * day, Weight: 1})
	add(Event{Src: user(2), Dst: ad, Type: EdgePurchase, TS: 28 * day, Weight: 1})
	add(Event{Src: user(3), Dst: ad, Type: EdgeImpression, TS: 28 * day, Weight: 1})
	add(Event{Src: user(4), Dst: ad, Type: EdgeNotInterested, TS: 28 * day, Weight: 1})
	add(Event{Src: user(5), Dst: ad, Type: EdgeClick, TS: 100 * day, Weight: 1})
	adID, _ := s.Lookup(ad)
	u2, _ := s.Lookup(user(2))

	tests := []struct {
		name          string
		sample        func(sm *Sampler) *Subgraph
		halfLife      time.Duration
		recent, total float64 // of the anchor, before log1p
	}{
		{"ad at day 28, default half-life 14 days", func(sm *Sampler) *Subgraph { return sm.Sample(adID, 28*day, ViewTeacher, 1) }, 0, 1 + 0.5 + 0.25, 6},
		{"ad at day 14: later edges invisible", func(sm *Sampler) *Subgraph { return sm.Sample(adID, 14*day, ViewTeacher, 1) }, 0, 1 + 0.5, 3},
		{"half-life 28 days", func(sm *Sampler) *Subgraph { return sm.Sample(adID, 28*day, ViewTeacher, 1) }, 28 * 24 * time.Hour, 1 + math.Sqrt(0.5) + 0.5, 6},
		{"user: its own engagement", func(sm *Sampler) *Subgraph { return sm.Sample(u2, 42*day, ViewTeacher, 1) }, 0, 0.5, 1},
		{"virtual user: its context edges only", func(sm *Sampler) *Subgraph {
			ctx := []Edge{{Nbr: adID, Type: EdgeClick, Out: true, TS: 27 * day, Weight: 1}, {Nbr: adID, Type: EdgeImpression, Out: true, TS: 28 * day, Weight: 1}}
			return sm.SampleVirtual(NodeUser, ctx, 41*day, ViewTeacher, 1)
		}, 0, 0.5, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sm := NewSampler(s, SamplerOptions{ActivityHalfLife: tc.halfLife})
			g := tc.sample(sm)
			got := [2]float64{math.Expm1(float64(g.Activity[0])), math.Expm1(float64(g.Activity[1]))}
			if math.Abs(got[0]-tc.recent) > 1e-4 || math.Abs(got[1]-tc.total) > 1e-4 {
				t.Errorf("anchor activity (recent, total) = %.5f, %.5f; want %.5f, %.5f", got[0], got[1], tc.recent, tc.total)
			}
		})
	}
}

// TestPadded checks that Subgraph.Padded keeps the real tokens, their SPD
// entries, the activity and the history, pads with masked tokens of SPDPad
// distance, and refuses to drop real tokens.
func TestPadded(t *testing.T) {
	evs := randomEvents(31, graphSpec{users: 80, ads: 60, campaigns: 8, advertisers: 3, products: 10, events: 5000, t0: 0, span: 60 * day})
	s := buildStore(t, Options{}, evs)
	var alone SamplerOptions
	alone.Student.AnchorOnly = 1
	full := NewSampler(s, SamplerOptions{}).Sample(NodeID{NodeUser, 3}, 61*day, ViewTeacher, 7)
	one := NewSampler(s, alone).Sample(NodeID{NodeUser, 3}, 61*day, ViewStudent, 7)
	if full.Len < 4 || one.Len != 1 {
		t.Fatalf("fixture: teacher view of %d tokens, anchor-only view of %d", full.Len, one.Len)
	}
	tests := []struct {
		name    string
		g       *Subgraph
		n       int
		wantErr bool
	}{
		{"anchor alone to 1", one, 1, false},
		{"anchor alone to 4", one, 4, false},
		{"full to its length", full, full.Len, false},
		{"full wider", full, full.N + 3, false},
		{"full below its length", full, full.Len - 1, true},
		{"zero", one, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.g.Padded(tc.n)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Padded(%d) error = %v, want error %v", tc.n, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			g := tc.g
			if p.N != tc.n || p.Len != g.Len || p.Anchor != g.Anchor || p.AsOf != g.AsOf || p.View != g.View ||
				p.Activity != g.Activity || !slices.Equal(p.History, g.History) || !slices.Equal(p.HistoryW, g.HistoryW) {
				t.Fatalf("Padded(%d) header %+v, from %+v", tc.n, p, g)
			}
			if len(p.Nodes) != tc.n || len(p.SPD) != tc.n*tc.n || len(p.Mask) != tc.n || len(p.DropFeat) != tc.n {
				t.Fatalf("Padded(%d) slice lengths %d %d %d %d", tc.n, len(p.Nodes), len(p.SPD), len(p.Mask), len(p.DropFeat))
			}
			for i := range tc.n {
				real := i < g.Len
				if p.Mask[i] != real {
					t.Errorf("token %d mask %v, want %v", i, p.Mask[i], real)
				}
				if real && (p.Nodes[i] != g.Nodes[i] || p.Hop[i] != g.Hop[i] || p.EdgeType[i] != g.EdgeType[i] ||
					p.TimeBucket[i] != g.TimeBucket[i] || p.EdgeWeight[i] != g.EdgeWeight[i] || p.EdgeTS[i] != g.EdgeTS[i] ||
					p.WalkFreq[i] != g.WalkFreq[i] || p.DropFeat[i] != g.DropFeat[i]) {
					t.Errorf("token %d differs", i)
				}
				for j := range tc.n {
					want := uint8(SPDPad)
					if i < g.Len && j < g.Len {
						want = g.SPD[i*g.N+j]
					}
					if p.SPD[i*tc.n+j] != want {
						t.Errorf("SPD[%d,%d] = %d, want %d", i, j, p.SPD[i*tc.n+j], want)
					}
				}
			}
		})
	}
}

// TestSampleBeyondNewestEvent checks that samples as of two times past the
// store's newest event (requests embedded as of the wall clock, a second
// apart) draw the same nodes: the draws are seeded by what the sample can
// see, not by the clock; and that a store cut at a time (Store.Until)
// samples as the whole store as of that time.
func TestSampleBeyondNewestEvent(t *testing.T) {
	evs := randomEvents(23, graphSpec{users: 60, ads: 50, campaigns: 8, advertisers: 3, products: 10, events: 3000, t0: 0, span: 60 * day})
	s := buildStore(t, Options{}, evs)
	sm := NewSampler(s, SamplerOptions{})
	now, later := s.MaxTS()+1, s.MaxTS()+1000
	// The draws: which nodes, in which order, and the history (the
	// decayed weights move with the clock).
	drawn := func(g *Subgraph) [2][]NodeID { return [2][]NodeID{g.Nodes[:g.Len], g.History} }
	for _, view := range []View{ViewTeacher, ViewStudent} {
		for i := range 30 {
			id := NodeID{NodeUser, uint32(i)}
			if diff := gocmp.Diff(drawn(sm.Sample(id, now, view, 42)), drawn(sm.Sample(id, later, view, 42))); diff != "" {
				t.Fatalf("%v %v: Sample a millisecond and a second past the newest event differ (-ms +s):\n%s", view, id, diff)
			}
			// A store cut at a time samples as the whole store as of it.
			cut := s.MinTS() + int64(i+10)*day
			if diff := gocmp.Diff(drawn(NewSampler(s.Until(cut), SamplerOptions{}).Sample(id, cut, view, 42)), drawn(sm.Sample(id, cut, view, 42))); diff != "" {
				t.Fatalf("%v %v: Sample on the store cut at %d differs from the whole store's as of it (-cut +whole):\n%s", view, id, cut, diff)
			}
			ad, _ := s.Lookup(Ref{Type: NodeAd, ID: "a" + strconv.Itoa(i)})
			ctx := []Edge{{Nbr: ad, Type: EdgeClick, Out: true, TS: s.MaxTS() - day, Weight: 1}}
			if diff := gocmp.Diff(drawn(sm.SampleVirtual(NodeUser, ctx, now, view, 42)), drawn(sm.SampleVirtual(NodeUser, ctx, later, view, 42))); diff != "" {
				t.Fatalf("%v: SampleVirtual a millisecond and a second past the newest event differ (-ms +s):\n%s", view, diff)
			}
		}
	}
}
