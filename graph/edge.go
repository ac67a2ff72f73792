package graph

import (
	"math"
	"math/bits"
)

// Edge is one direction of a stored event as seen from a node: the node at
// the other end, the event type, whether the event points away from the node
// (Out), its timestamp (unix ms) and its raw weight. Use [Store.DecayedWeight]
// for the weight as of a read time.
type Edge struct {
	Nbr    NodeID
	Type   EdgeType
	Out    bool
	TS     int64
	Weight float32
}

// edgeRec is the stored form of one edge direction: 16 bytes.
//
// key packs the timestamp and the metadata so that ordering records by key
// orders them by time:
//
//	bits 63..20  ts (unix ms, < 2^44, i.e. before year 2527)
//	bit  8       out
//	bits 7..4    neighbour node type
//	bits 3..0    edge type
type edgeRec struct {
	key uint64
	nbr uint32
	w   float32
}

const (
	tsShift  = 20
	tsLimit  = int64(1) << (64 - tsShift) // exclusive upper bound of storable ts
	outBit   = 1 << 8
	typeMask = 0xf
)

func makeRec(nbr NodeID, t EdgeType, out bool, ts int64, w float32) edgeRec {
	k := uint64(ts)<<tsShift | uint64(nbr.Type&typeMask)<<4 | uint64(t&typeMask)
	if out {
		k |= outBit
	}
	return edgeRec{key: k, nbr: nbr.Idx, w: w}
}

func (r edgeRec) ts() int64          { return int64(r.key >> tsShift) }
func (r edgeRec) edgeType() EdgeType { return EdgeType(r.key & typeMask) }
func (r edgeRec) nbrID() NodeID      { return NodeID{Type: NodeType(r.key >> 4 & typeMask), Idx: r.nbr} }
func (r edgeRec) out() bool          { return r.key&outBit != 0 }

func (r edgeRec) edge() Edge {
	return Edge{Nbr: r.nbrID(), Type: r.edgeType(), Out: r.out(), TS: r.ts(), Weight: r.w}
}

// keyBound returns the smallest key of a record with ts > asOf: records with
// key < keyBound(asOf) are visible at asOf.
func keyBound(asOf int64) uint64 {
	switch {
	case asOf < 0:
		return 0
	case asOf >= tsLimit-1:
		return math.MaxUint64
	}
	return uint64(asOf+1) << tsShift
}

// visiblePrefix returns the records of the time-sorted list l with ts <= asOf.
func visiblePrefix(l []edgeRec, asOf int64) []edgeRec {
	b := keyBound(asOf)
	n := len(l)
	if n == 0 || l[n-1].key < b {
		return l // common case: everything is visible
	}
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l[m].key < b {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return l[:lo]
}

// insertRec returns l with r inserted in key order. Records already visible to
// readers through an earlier slice header are never modified: an in-order
// append writes beyond every published length, and an out-of-order insert
// copies into a new array.
func insertRec(l []edgeRec, r edgeRec) []edgeRec {
	n := len(l)
	if n == 0 || l[n-1].key <= r.key {
		if n < cap(l) {
			l = l[:n+1]
			l[n] = r
			return l
		}
		nl := allocRecs(n + 1)
		copy(nl, l)
		nl[n] = r
		return nl
	}
	// Upper bound: first record with key > r.key keeps equal keys in arrival order.
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l[m].key <= r.key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	nl := allocRecs(n + 1)
	copy(nl, l[:lo])
	nl[lo] = r
	copy(nl[lo+1:], l[lo:])
	return nl
}

// allocRecs returns a slice of length n whose capacity grows geometrically by
// 1.25x (bounding slack to 25%, ~12% on average), rounded up to the
// allocator's size class so that no allocated byte is wasted.
func allocRecs(n int) []edgeRec {
	c := n + n/4
	if c < 2 {
		c = 2
	}
	// Appending to a nil slice rounds the capacity up to the size class.
	s := append([]edgeRec(nil), make([]edgeRec, c)...)
	return s[:n]
}

// TimeBucketUnitMS is the unit of [TimeBucket]: 15 minutes.
const TimeBucketUnitMS = 15 * 60 * 1000

// TimeBucket maps the age of an edge, deltaMS = asOf - ts, to a log2 bucket in
// 1..NumTimeBuckets-1: bucket 1 holds ages under 15 minutes, bucket b in
// 2..NumTimeBuckets-2 holds ages in [15min·2^(b-2), 15min·2^(b-1)), and the
// last bucket holds everything older (from about 85 days). Negative ages
// (which a correct read never produces) map to bucket 1.
func TimeBucket(deltaMS int64) uint8 {
	if deltaMS < 0 {
		deltaMS = 0
	}
	b := 1 + bits.Len64(uint64(deltaMS/TimeBucketUnitMS))
	if b > NumTimeBuckets-1 {
		b = NumTimeBuckets - 1
	}
	return uint8(b)
}
