package graphtest

import (
	"slices"
	"testing"

	"github.com/hir-ads/hir/graph"
)

func TestEdges(t *testing.T) {
	s := graph.NewStore(graph.Options{})
	for i, ts := range []int64{20, 10} {
		ev := graph.Event{ID: string(rune('a' + i)), Src: graph.Ref{Type: graph.NodeUser, ID: "u"},
			Dst: graph.Ref{Type: graph.NodeAd, ID: "ad"}, Type: graph.EdgeClick, TS: ts, Weight: 1}
		if _, err := s.AddEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	got := Edges(s)
	if len(got) != 2 || !slices.IsSorted(got) || got[0] == got[1] {
		t.Errorf("Edges = %q, want the two clicks, sorted", got)
	}
	if got := Edges(graph.NewStore(graph.Options{})); len(got) != 0 {
		t.Errorf("Edges of an empty store = %q, want none", got)
	}
}
