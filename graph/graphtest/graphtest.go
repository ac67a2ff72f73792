// Package graphtest holds helpers for tests that compare graph stores, as
// net/http/httptest does for HTTP: what two stores hold, in a form a test
// can compare and print.
package graphtest

import (
	"fmt"
	"math"
	"slices"

	"github.com/hir-ads/hir/graph"
)

// Edges lists every event of s as "src>dst@ts" (the entities' types and
// ids), sorted, so that two stores holding the same events list the same.
func Edges(s *graph.Store) []string {
	var out []string
	s.ForEachEdge(0, math.MaxInt64, func(src graph.NodeID, e graph.Edge) bool {
		out = append(out, fmt.Sprintf("%s>%s@%d", s.Ref(src), s.Ref(e.Nbr), e.TS))
		return true
	})
	slices.Sort(out)
	return out
}
