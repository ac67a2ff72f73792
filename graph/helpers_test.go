package graph

import (
	"cmp"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sharedData returns the shared data directory or skips the test.
func sharedData(t testing.TB, sub string) string {
	t.Helper()
	dir := os.Getenv("HIR_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	p := filepath.Join(dir, sub)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data %s not available: %v", p, err)
	}
	return p
}

type graphSpec struct {
	users, ads, campaigns, advertisers, products int
	events                                       int   // engagement events
	t0, span                                     int64 // ts range [t0, t0+span)
	ordered                                      bool  // insert in time order
}

// randomEvents returns a random heterogeneous event set in insertion order.
func randomEvents(seed uint64, sp graphSpec) []Event {
	rng := rand.New(rand.NewPCG(seed, seed^0xabcdef))
	ref := func(t NodeType, p string, n int) Ref { return Ref{Type: t, ID: p + strconv.Itoa(rng.IntN(n))} }
	ts := func() int64 { return sp.t0 + rng.Int64N(sp.span) }
	var evs []Event
	for a := range sp.ads {
		ad := Ref{Type: NodeAd, ID: "a" + strconv.Itoa(a)}
		evs = append(evs, Event{Src: ad, Dst: ref(NodeCampaign, "c", sp.campaigns), Type: EdgeInCampaign, TS: ts(), Weight: 1})
		if sp.products > 0 && rng.IntN(2) == 0 {
			evs = append(evs, Event{Src: ad, Dst: ref(NodeProduct, "p", sp.products), Type: EdgePromotes, TS: ts(), Weight: 1})
		}
	}
	for c := range sp.campaigns {
		evs = append(evs, Event{Src: Ref{Type: NodeCampaign, ID: "c" + strconv.Itoa(c)}, Dst: ref(NodeAdvertiser, "v", sp.advertisers), Type: EdgeOfAdvertiser, TS: ts(), Weight: 1})
	}
	for range sp.events {
		et := EdgeType(1 + rng.IntN(int(EdgeNotInterested)))
		evs = append(evs, Event{Src: ref(NodeUser, "u", sp.users), Dst: ref(NodeAd, "a", sp.ads), Type: et, TS: ts(), Weight: float32(rng.IntN(4)) * 0.5})
	}
	if sp.ordered {
		slicesSortByTS(evs)
	} else {
		rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	}
	return evs
}

func slicesSortByTS(evs []Event) {
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.TS, b.TS) })
}

func buildStore(t testing.TB, opts Options, evs []Event) *Store {
	t.Helper()
	s := NewStore(opts)
	if _, err := s.AddEvents(evs); err != nil {
		t.Fatalf("AddEvents: %v", err)
	}
	return s
}

// naiveAdjacency maps every node to its edges (both directions) from evs.
func naiveAdjacency(t testing.TB, s *Store, evs []Event) map[NodeID][]Edge {
	t.Helper()
	adj := map[NodeID][]Edge{}
	for _, ev := range evs {
		a, ok1 := s.Lookup(ev.Src)
		b, ok2 := s.Lookup(ev.Dst)
		if !ok1 || !ok2 {
			t.Fatalf("event %v: endpoints not in store", ev)
		}
		adj[a] = append(adj[a], Edge{Nbr: b, Type: ev.Type, Out: true, TS: ev.TS, Weight: ev.Weight})
		adj[b] = append(adj[b], Edge{Nbr: a, Type: ev.Type, Out: false, TS: ev.TS, Weight: ev.Weight})
	}
	return adj
}
