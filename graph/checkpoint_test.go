package graph

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkpointStore is a store with every kind of state a checkpoint holds:
// events in and out of time order (some with ids), entities with text,
// attributes and vectors, and a node without content.
func checkpointStore(t testing.TB) (*Store, []Event) {
	t.Helper()
	evs := randomEvents(7, graphSpec{users: 30, ads: 40, campaigns: 6, advertisers: 3, products: 10, events: 400, t0: 1_700_000_000_000, span: 1e9})
	for i := range evs {
		if i%3 == 0 {
			evs[i].ID = "e" + strconv.Itoa(i)
		}
	}
	s := buildStore(t, Options{}, evs)
	for i, e := range []Entity{
		{Type: NodeAd, ID: "a1", Text: "red running shoes", Attrs: map[string]string{"brand": "acme", "price": "12.5"}},
		{Type: NodeUser, ID: "u2", Vector: []float32{0.5, -1, 3}},
		{Type: NodeAd, ID: "a-new", Text: "a new ad"},
	} {
		if _, err := s.UpsertEntity(e); err != nil {
			t.Fatalf("entity %d: %v", i, err)
		}
	}
	return s, evs
}

// storeState is what a reader can see of s, for comparison.
func storeState(s *Store) map[string]any {
	out := map[string]any{"events": s.NumEvents(), "min": s.MinTS(), "max": s.MaxTS(), "horizon": s.horizon()}
	for nt := NodeType(1); nt < numNodeTypes; nt++ {
		for i := range s.NumNodes(nt) {
			id := NodeID{Type: nt, Idx: uint32(i)}
			var edges []Edge
			s.Neighbors(id, 1<<42, func(e Edge) bool { edges = append(edges, e); return true })
			out[s.Ref(id).String()] = map[string]any{"entity": s.Entity(id), "edges": edges}
		}
	}
	return out
}

func TestCheckpointRoundTrip(t *testing.T) {
	s, evs := checkpointStore(t)
	until := s.Until(1_700_000_500_000)
	for name, st := range map[string]*Store{"whole": s, "until": until, "empty": NewStore(Options{})} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := st.WriteCheckpoint(&buf); err != nil {
				t.Fatal(err)
			}
			got, err := ReadCheckpoint(bytes.NewReader(buf.Bytes()), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(storeState(st), storeState(got)); diff != "" {
				t.Fatalf("read store differs (-written +read):\n%s", diff)
			}
			var again bytes.Buffer
			if err := got.WriteCheckpoint(&again); err != nil {
				t.Fatal(err)
			}
			if name != "whole" && !bytes.Equal(buf.Bytes(), again.Bytes()) {
				// Without ids (whose map order varies) the form is canonical.
				t.Fatal("a read checkpoint writes other bytes")
			}
		})
	}

	got := func() *Store {
		var buf bytes.Buffer
		if err := s.WriteCheckpoint(&buf); err != nil {
			t.Fatal(err)
		}
		g, err := ReadCheckpoint(&buf, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}()
	// The ids stay: a stored event is a duplicate, and new events go on
	// both stores alike, in and out of time order.
	if ok, err := got.AddEvent(evs[0]); ok || err != nil {
		t.Fatalf("re-adding stored event %s: stored %v, err %v; want a duplicate", evs[0].ID, ok, err)
	}
	more := []Event{
		{ID: "n1", Src: Ref{Type: NodeUser, ID: "u1"}, Dst: Ref{Type: NodeAd, ID: "a2"}, Type: EdgeClick, TS: 1_700_000_000_001, Weight: 1},
		{ID: "n2", Src: Ref{Type: NodeUser, ID: "u-new"}, Dst: Ref{Type: NodeAd, ID: "a1"}, Type: EdgeClick, TS: 1_800_000_000_000, Weight: 2},
	}
	for _, st := range []*Store{s, got} {
		if _, err := st.AddEvents(more); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(storeState(s), storeState(got)); diff != "" {
		t.Fatalf("after more events (-original +read):\n%s", diff)
	}
}

func TestReadCheckpointDamaged(t *testing.T) {
	s, _ := checkpointStore(t)
	var buf bytes.Buffer
	if err := s.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	for cut := 0; cut < len(data); cut += max(1, len(data)/200) {
		if _, err := ReadCheckpoint(bytes.NewReader(data[:cut]), Options{}); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("cut at %d of %d: err %v, want ErrBadCheckpoint", cut, len(data), err)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(b []byte)
	}{
		{"magic", func(b []byte) { b[0] = 'X' }},
		{"version", func(b []byte) { b[8] = 9 }},
		{"node types", func(b []byte) { b[12] = 3 }},
	} {
		b := bytes.Clone(data)
		tc.edit(b)
		if _, err := ReadCheckpoint(bytes.NewReader(b), Options{}); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%s: err %v, want ErrBadCheckpoint", tc.name, err)
		}
	}
}

func FuzzReadCheckpoint(f *testing.F) {
	s, _ := checkpointStore(f)
	var buf bytes.Buffer
	if err := s.WriteCheckpoint(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	var empty bytes.Buffer
	if err := NewStore(Options{}).WriteCheckpoint(&empty); err != nil {
		f.Fatal(err)
	}
	f.Add(empty.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ReadCheckpoint(bytes.NewReader(b), Options{})
		if err != nil {
			return
		}
		// A store that reads must be usable: every read of every node.
		_ = storeState(st)
		var out bytes.Buffer
		if err := st.WriteCheckpoint(&out); err != nil {
			t.Fatal(err)
		}
	})
}
