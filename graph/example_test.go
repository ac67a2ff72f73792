package graph_test

import (
	"fmt"

	"github.com/hir-ads/hir/graph"
)

func Example() {
	s := graph.NewStore(graph.Options{})
	user := graph.Ref{Type: graph.NodeUser, ID: "u1"}
	events := []graph.Event{
		{Src: graph.Ref{Type: graph.NodeAd, ID: "a1"}, Dst: graph.Ref{Type: graph.NodeCampaign, ID: "c1"}, Type: graph.EdgeInCampaign, TS: 1000, Weight: 1},
		{Src: user, Dst: graph.Ref{Type: graph.NodeAd, ID: "a1"}, Type: graph.EdgeClick, TS: 2000, Weight: 1},
		{Src: user, Dst: graph.Ref{Type: graph.NodeAd, ID: "a2"}, Type: graph.EdgeNotInterested, TS: 9000, Weight: 1},
	}
	if _, err := s.AddEvents(events); err != nil {
		fmt.Println(err)
		return
	}
	u, _ := s.Lookup(user)
	// At asOf 5000 the not_interested event has not happened yet.
	s.Neighbors(u, 5000, func(e graph.Edge) bool {
		fmt.Println(s.Ref(e.Nbr), e.Type, e.TS)
		return true
	})
	g := graph.NewSampler(s, graph.SamplerOptions{}).Sample(u, 5000, graph.ViewTeacher, 1)
	for i := range g.Len {
		fmt.Println(i, s.Ref(g.Nodes[i]), "hop", g.Hop[i], "via", g.EdgeType[i], "spd", g.SPD[i])
	}
	// Output:
	// ad:a1 click 2000
	// 0 user:u1 hop 0 via none spd 0
	// 1 ad:a1 hop 1 via click spd 1
	// 2 campaign:c1 hop 2 via in_campaign spd 2
}
