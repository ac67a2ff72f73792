// Package graph is HIR's temporal heterogeneous graph: the domain types of
// entities and events, a concurrent in-memory [Store] with time-cutoff reads,
// and the teacher/student [Sampler] that turns a node's neighbourhood into a
// fixed-size [Subgraph] for the model (DESIGN §4).
//
// Nodes have a [NodeType] and a dense uint32 index per type ([NodeID]),
// assigned in order of first appearance; the store keeps the string<->index
// registry ([Store.Lookup], [Store.Ref]) and each node's [Entity] content.
// Every [Event] is stored twice, once in each endpoint's adjacency list, as a
// 16-byte record kept sorted by time. Reads take asOf (unix ms) and never see
// an edge with ts > asOf, which keeps training and evaluation free of future
// leakage. Weights decay as w*exp(-(asOf-ts)/tau) with a per-edge-type tau
// ([Options.Tau], [Store.DecayedWeight]).
//
// # Example
//
//	s := graph.NewStore(graph.Options{})
//	_, err := s.AddEvent(graph.Event{
//		Src: graph.Ref{Type: graph.NodeUser, ID: "u1"},
//		Dst: graph.Ref{Type: graph.NodeAd, ID: "a1"},
//		Type: graph.EdgeClick, TS: 1700000000000, Weight: 1,
//	})
//	if err != nil { ... }
//	u, _ := s.Lookup(graph.Ref{Type: graph.NodeUser, ID: "u1"})
//	sm := graph.NewSampler(s, graph.SamplerOptions{})
//	teacher := sm.Sample(u, 1700000000000, graph.ViewTeacher, 42)
//	student := sm.Sample(u, 1700000000000, graph.ViewStudent, 42)
//
// # Sections
//
// Store: [NewStore], [Store.AddEvent], [Store.UpsertEntity],
// [Store.Neighbors], [Store.Degree], [Store.ForEachEdge], [Store.Compact].
// Appends and reads run concurrently; readers copy a slice header under a
// per-node-type read lock and iterate without locks because published
// records are never modified. Adjacency lists grow by 1.25x (appends are O(1)
// amortised when events arrive in time order; an out-of-order event costs a
// copy of its two lists), and [Store.Compact] / [Store.RunCompactor] pack them
// into exact-size CSR arrays in the background.
//
// Sampling: [NewSampler], [Sampler.Sample], [Sampler.SampleVirtual] (cold
// start: an anchor known only by context edges, token id [VirtualIdx]).
// Neighbours are drawn by importance (decayed weight x [SamplerOptions].EdgePrior,
// without replacement, hop by hop) and by random walks with restart; each
// token records its hop, reaching edge type, time bucket ([TimeBucket]),
// decayed weight and timestamp, walk visit frequency and, in the student
// view, feature dropout. SPD is the capped BFS distance inside the subgraph.
// Results are deterministic for (seed, anchor, asOf, view).
//
// Checkpoint: [Store.WriteCheckpoint] writes the whole store (ids,
// content, adjacency, idempotency ids) in a binary form and
// [ReadCheckpoint] reads it back, checking every record, with each node
// type's lists packed as [Store.Compact] packs them. The event log keeps
// it as its checkpoint's state (eventlog's FORMAT.md), so a start does not
// replay the whole log.
//
// Time windows: [SplitByTime] and [Window] split train/validation/test by
// time; [ShuffleInBlocks] shuffles only within fixed time blocks.
package graph
