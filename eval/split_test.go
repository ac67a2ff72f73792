package eval

import (
	"errors"
	"testing"

	"github.com/hir-ads/hir/graph"
)

func ins(ts ...int64) []Interaction {
	out := make([]Interaction, len(ts))
	for i, t := range ts {
		out[i] = Interaction{User: int32(i % 3), Item: int32(i), TS: t, Type: graph.EdgeClick}
	}
	return out
}

func TestChronoWindows(t *testing.T) {
	tests := []struct {
		name      string
		ts        []int64
		test, val float64
		wantTest  Window
		wantVal   Window
		wantErr   error
	}{
		{
			name: "ten distinct", ts: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, test: 0.2, val: 0.25,
			wantTest: Window{Name: "test", AsOf: 8, TrainEnd: 8, EvalEnd: 10},
			wantVal:  Window{Name: "validation", AsOf: 6, TrainEnd: 6, EvalEnd: 8},
		},
		{
			// The cut falls inside a run of equal times: the run stays in training.
			name: "ties at the cut", ts: []int64{1, 2, 3, 4, 5, 5, 5, 8, 9, 10}, test: 0.5, val: 0.4,
			wantTest: Window{Name: "test", AsOf: 5, TrainEnd: 7, EvalEnd: 10},
			wantVal:  Window{Name: "validation", AsOf: 4, TrainEnd: 4, EvalEnd: 7},
		},
		{name: "all equal", ts: []int64{3, 3, 3, 3}, test: 0.5, val: 0.5, wantErr: ErrNoQueries},
		{name: "fraction one", ts: []int64{1, 2, 3}, test: 1, val: 0.5, wantErr: ErrBadConfig},
		{name: "too few events", ts: []int64{1}, test: 0.2, val: 0.5, wantErr: ErrNoQueries},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			test, val, err := ChronoWindows(ins(tc.ts...), tc.test, tc.val)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ChronoWindows error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if test != tc.wantTest || val != tc.wantVal {
				t.Errorf("ChronoWindows = %+v, %+v, want %+v, %+v", test, val, tc.wantTest, tc.wantVal)
			}
		})
	}
}

// TestViewHidesFuture checks that a training view holds exactly the events at
// or before the cut, for both windows of a real-shaped data set.
func TestViewHidesFuture(t *testing.T) {
	d := makeSynth(1, 120, 10, 6).data(t)
	test, val, err := ChronoWindows(d.Interactions, 0.2, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []Window{test, val} {
		t.Run(w.Name, func(t *testing.T) {
			v := d.View(w)
			if len(v.Interactions) != w.TrainEnd {
				t.Errorf("view has %d interactions, want %d", len(v.Interactions), w.TrainEnd)
			}
			for _, in := range v.Interactions {
				if in.TS > v.AsOf {
					t.Fatalf("view interaction at %d after AsOf %d", in.TS, v.AsOf)
				}
			}
			for _, ev := range v.Structure {
				if ev.TS > v.AsOf {
					t.Fatalf("view structure event at %d after AsOf %d", ev.TS, v.AsOf)
				}
			}
			for _, in := range d.Interactions[w.TrainEnd:w.EvalEnd] {
				if in.TS <= w.AsOf {
					t.Fatalf("window event at %d not after AsOf %d", in.TS, w.AsOf)
				}
			}
			// Appending to the view must not write into the data.
			_ = append(v.Interactions, Interaction{TS: -1})
			if d.Interactions[w.TrainEnd].TS == -1 {
				t.Fatal("view aliases the window")
			}
		})
	}
	if val.EvalEnd != test.TrainEnd {
		t.Errorf("validation ends at %d, want the test cut %d", val.EvalEnd, test.TrainEnd)
	}
}

func TestCollector(t *testing.T) {
	ad := graph.Ref{Type: graph.NodeAd, ID: "a1"}
	user := graph.Ref{Type: graph.NodeUser, ID: "u1"}
	var c Collector
	for _, e := range []graph.Entity{{Type: graph.NodeAd, ID: "a0", Text: "never engaged"}, {Type: graph.NodeAd, ID: "a1", Text: "ad one"}} {
		if err := c.Entity(&e); err != nil {
			t.Fatal(err)
		}
	}
	evs := []graph.Event{
		{ID: "x", Src: user, Dst: ad, Type: graph.EdgeClick, TS: 20, Weight: 1},
		{ID: "x", Src: user, Dst: ad, Type: graph.EdgeClick, TS: 20, Weight: 1}, // duplicate id
		{Src: user, Dst: ad, Type: graph.EdgeImpression, TS: 10, Weight: 1},
		{Src: ad, Dst: graph.Ref{Type: graph.NodeCategory, ID: "c"}, Type: graph.EdgeInCategory, TS: 5, Weight: 1},
	}
	for i := range evs {
		if err := c.Event(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Event(&graph.Event{Src: user, Dst: ad, Type: graph.EdgeClick, TS: -1}); err == nil {
		t.Error("Event with a negative time: got nil error")
	}
	d, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Catalog.NumItems(); got != 2 {
		t.Errorf("NumItems = %d, want 2 (the unengaged ad is a candidate)", got)
	}
	if len(d.Interactions) != 2 || d.Interactions[0].TS != 10 || d.Interactions[1].TS != 20 {
		t.Errorf("Interactions = %+v, want the impression at 10 then one click at 20", d.Interactions)
	}
	if len(d.Structure) != 1 {
		t.Errorf("Structure = %+v, want the category edge", d.Structure)
	}
	if i, ok := d.Catalog.Item("a1"); !ok || d.Catalog.ItemText[i] != "ad one" {
		t.Errorf("Item(a1) = %d, %v with text %q", i, ok, d.Catalog.ItemText[i])
	}
	var empty Collector
	if _, err := empty.Data(); !errors.Is(err, ErrNoData) {
		t.Errorf("empty Data error = %v, want ErrNoData", err)
	}
}
