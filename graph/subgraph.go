package graph

import "fmt"

// NodeID is a dense node id: the node's type and its index among the nodes of
// that type (0, 1, 2, ... in order of first appearance).
type NodeID struct {
	Type NodeType
	Idx  uint32
}

// View selects a sampling view (DESIGN §4).
type View uint8

// Views.
const (
	// ViewTeacher is the broad view: more nodes, more hops.
	ViewTeacher View = iota
	// ViewStudent is the narrow view: fewer nodes, one hop, feature dropout.
	ViewStudent
)

// String returns "teacher" or "student".
func (v View) String() string {
	if v == ViewStudent {
		return "student"
	}
	return "teacher"
}

// SPD values: distances 0..SPDMax are exact, SPDFar means farther or unreachable
// inside the sampled subgraph, and SPDPad marks a pair involving padding.
const (
	SPDMax = 5
	SPDFar = SPDMax + 1
	SPDPad = SPDFar + 1
	// NumSPD is the size of an attention-bias table indexed by SPD value.
	NumSPD = SPDPad + 1
)

// NumTimeBuckets is the number of time-delta buckets a token's reaching edge
// is put in (bucket 0 is the anchor / no edge).
const NumTimeBuckets = 16

// Subgraph is one sampled view around an anchor, padded to a fixed size N
// (the view's MaxNodes). Token 0 is the anchor. Tokens [0, Len) are real;
// tokens [Len, N) are padding with Mask false and zero values.
type Subgraph struct {
	Anchor NodeID
	AsOf   int64 // unix ms; no token was reached by an edge later than AsOf
	View   View
	N      int // fixed token count (padded)
	Len    int // real tokens

	Nodes      []NodeID   // [N]
	Mask       []bool     // [N] true for real tokens
	Hop        []uint8    // [N] hop distance from the anchor (0 for the anchor)
	EdgeType   []EdgeType // [N] type of the edge that first reached the token (EdgeNone for the anchor)
	TimeBucket []uint8    // [N] log time-delta bucket of that edge relative to AsOf, 1..NumTimeBuckets-1; 0 for the anchor
	EdgeWeight []float32  // [N] decayed weight of that edge
	EdgeTS     []int64    // [N] timestamp of that edge (0 for the anchor)
	WalkFreq   []float32  // [N] random-walk visit frequency in [0,1]
	DropFeat   []bool     // [N] student feature dropout: content features of this token are hidden
	SPD        []uint8    // [N*N] row-major shortest-path distance inside the subgraph
	// Activity is the anchor's log1p of its positive engagements weighted
	// by recency (SamplerOptions.ActivityHalfLife) and log1p of its visible
	// edges, both as of AsOf (a virtual anchor counts its context edges).
	Activity [2]float32
	// History is the anchor's newest engaged neighbours as of AsOf, newest
	// first, at most MaxHistory: the destinations (or sources) of its
	// positive engagements and impressions, read for the anchor's
	// propagated content (a virtual anchor's come from its context edges;
	// an anchor-only view has none). HistoryW holds each one's weight, the
	// sampler's importance score of the edge (type prior times decayed
	// weight).
	History  []NodeID
	HistoryW []float32
}

// MaxHistory bounds Subgraph.History.
const MaxHistory = 64

// Padded returns a copy of g padded to n tokens instead of g.N; n must be
// at least g.Len (and at least 1). The real tokens, their SPD entries and
// the anchor's activity and history are the same: an encoder whose padding
// tokens are masked out gives the same anchor embedding for both. A view
// of the anchor alone (Len 1) is encoded most cheaply at n = 1.
func (g *Subgraph) Padded(n int) (*Subgraph, error) {
	if n < max(g.Len, 1) {
		return nil, fmt.Errorf("pad subgraph of %d real tokens to %d: too few", g.Len, n)
	}
	p := newSubgraph(g.Anchor, g.AsOf, g.View, n)
	p.Len = g.Len
	k := min(n, g.N)
	copy(p.Nodes, g.Nodes[:k])
	copy(p.Mask, g.Mask[:k])
	copy(p.Hop, g.Hop[:k])
	copy(p.EdgeType, g.EdgeType[:k])
	copy(p.TimeBucket, g.TimeBucket[:k])
	copy(p.EdgeWeight, g.EdgeWeight[:k])
	copy(p.EdgeTS, g.EdgeTS[:k])
	copy(p.WalkFreq, g.WalkFreq[:k])
	copy(p.DropFeat, g.DropFeat[:k])
	for i := range p.SPD {
		p.SPD[i] = SPDPad
	}
	for i := range k {
		copy(p.SPD[i*n:i*n+k], g.SPD[i*g.N:i*g.N+k])
	}
	p.Activity = g.Activity
	p.History = append(p.History, g.History...)
	p.HistoryW = append(p.HistoryW, g.HistoryW...)
	return p, nil
}
