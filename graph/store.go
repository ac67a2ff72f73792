package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Store errors.
var (
	// ErrTooManyNodes is returned when a node type already holds MaxNodesPerType nodes.
	ErrTooManyNodes = errors.New("too many nodes of one type")
)

// MaxNodesPerType bounds the number of nodes of one type; VirtualIdx is
// never a real node index.
const MaxNodesPerType = VirtualIdx

// NoDecay as a per-edge-type Tau disables time decay for that type.
const NoDecay time.Duration = -1

// DefaultEngagementTau is the default decay time constant of engagement edges.
const DefaultEngagementTau = 14 * 24 * time.Hour

// Options configures a Store. The zero value is usable: defaults are applied
// by NewStore.
type Options struct {
	// Tau is the decay time constant per edge type: a weight w of age d reads
	// as w*exp(-d/Tau). Zero selects the default (DefaultEngagementTau for
	// engagement types, NoDecay for structure types); NoDecay (or any
	// negative value) disables decay.
	Tau [NumEdgeTypes]time.Duration
	// Logger receives debug messages; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the options NewStore applies to a zero Options.
func DefaultOptions() Options {
	var o Options
	o.applyDefaults()
	return o
}

func (o *Options) applyDefaults() {
	for t := EdgeType(1); t < numEdgeTypes; t++ {
		if o.Tau[t] != 0 {
			continue
		}
		if t.IsStructure() {
			o.Tau[t] = NoDecay
		} else {
			o.Tau[t] = DefaultEngagementTau
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is the temporal heterogeneous graph: a string<->dense-id registry per
// node type, entity content per node, and per-node adjacency in both
// directions sorted by time. Every read takes asOf (unix ms); edges with
// ts > asOf are invisible to it.
//
// Safe for concurrent use: appends and reads may run at the same time. Each
// node type has its own RWMutex; readers hold it only to copy a slice header
// and iterate without locks, because published records are never modified
// (in-order appends write past every published length, out-of-order inserts
// and compaction copy to new arrays).
type Store struct {
	opts     Options
	logger   *slog.Logger
	invTauMS [NumEdgeTypes]float64 // 1/tau in 1/ms; 0 = no decay

	tables [NumNodeTypes]typeTable

	seenMu sync.Mutex
	seen   map[string]struct{} // idempotency ids; seenMu must be held

	numEvents atomic.Int64
	minTS     atomic.Int64
	maxTS     atomic.Int64
	// until is the time a store made by Until is complete to: no event it
	// lacks lies at or before it. 0 for other stores.
	until int64
}

type typeTable struct {
	mu   sync.RWMutex
	ids  map[string]uint32 // mu must be held
	refs []string          // mu must be held
	ents []*Entity         // mu must be held; entries are immutable
	adj  [][]edgeRec       // mu must be held to read or replace a header
}

// NewStore returns an empty store.
func NewStore(opts Options) *Store {
	opts.applyDefaults()
	s := &Store{opts: opts, logger: opts.Logger.With("component", "graph"), seen: map[string]struct{}{}}
	for t, tau := range opts.Tau {
		if tau > 0 {
			s.invTauMS[t] = 1 / float64(tau.Milliseconds())
		}
	}
	for i := range s.tables {
		s.tables[i].ids = map[string]uint32{}
	}
	s.minTS.Store(math.MaxInt64)
	s.maxTS.Store(math.MinInt64)
	return s
}

// Options returns the options in effect (with defaults applied).
func (s *Store) Options() Options { return s.opts }

// intern returns the index of id, creating the node. t.mu must be held for writing.
func (t *typeTable) intern(id string) (uint32, error) {
	if i, ok := t.ids[id]; ok {
		return i, nil
	}
	n := len(t.refs)
	if n >= int(MaxNodesPerType) {
		return 0, ErrTooManyNodes
	}
	t.ids[id] = uint32(n)
	t.refs = append(t.refs, id)
	t.ents = append(t.ents, nil)
	t.adj = append(t.adj, nil)
	return uint32(n), nil
}

// Intern returns the id of ref, creating the node if it does not exist.
func (s *Store) Intern(ref Ref) (NodeID, error) {
	if err := ref.Validate(); err != nil {
		return NodeID{}, fmt.Errorf("intern node: %w", err)
	}
	t := &s.tables[ref.Type]
	t.mu.Lock()
	i, err := t.intern(ref.ID)
	t.mu.Unlock()
	if err != nil {
		return NodeID{}, fmt.Errorf("intern node %s: %w", ref, err)
	}
	return NodeID{Type: ref.Type, Idx: i}, nil
}

// UpsertEntity stores e's content on its node, creating the node if needed,
// and replaces any earlier content. e is copied; the caller keeps ownership.
func (s *Store) UpsertEntity(e Entity) (NodeID, error) {
	if err := e.Validate(); err != nil {
		return NodeID{}, fmt.Errorf("upsert entity: %w", err)
	}
	c := e
	if e.Attrs != nil {
		c.Attrs = make(map[string]string, len(e.Attrs))
		for k, v := range e.Attrs {
			c.Attrs[k] = v
		}
	}
	c.Vector = slices.Clone(e.Vector)
	t := &s.tables[e.Type]
	t.mu.Lock()
	defer t.mu.Unlock()
	i, err := t.intern(e.ID)
	if err != nil {
		return NodeID{}, fmt.Errorf("upsert entity %s: %w", e.Ref(), err)
	}
	t.ents[i] = &c
	return NodeID{Type: e.Type, Idx: i}, nil
}

// Entity returns the content stored on id, or nil if none was upserted. The
// returned entity is shared and must not be modified.
func (s *Store) Entity(id NodeID) *Entity {
	if !id.Type.Valid() {
		return nil
	}
	t := &s.tables[id.Type]
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int64(id.Idx) >= int64(len(t.ents)) {
		return nil
	}
	return t.ents[id.Idx]
}

// Lookup returns the id of ref if the node exists.
func (s *Store) Lookup(ref Ref) (NodeID, bool) {
	if !ref.Type.Valid() {
		return NodeID{}, false
	}
	t := &s.tables[ref.Type]
	t.mu.RLock()
	i, ok := t.ids[ref.ID]
	t.mu.RUnlock()
	return NodeID{Type: ref.Type, Idx: i}, ok
}

// Ref returns the external reference of id, or a Ref with an empty ID if id
// does not exist.
func (s *Store) Ref(id NodeID) Ref {
	r := Ref{Type: id.Type}
	if !id.Type.Valid() {
		return r
	}
	t := &s.tables[id.Type]
	t.mu.RLock()
	if int64(id.Idx) < int64(len(t.refs)) {
		r.ID = t.refs[id.Idx]
	}
	t.mu.RUnlock()
	return r
}

// NumNodes returns the number of nodes of type t (valid indices are 0..n-1).
func (s *Store) NumNodes(t NodeType) int {
	if !t.Valid() {
		return 0
	}
	tt := &s.tables[t]
	tt.mu.RLock()
	defer tt.mu.RUnlock()
	return len(tt.refs)
}

// NumEvents returns the number of stored events (each is two edge directions).
func (s *Store) NumEvents() int64 { return s.numEvents.Load() }

// MinTS returns the smallest event timestamp stored, or 0 if the store is empty.
func (s *Store) MinTS() int64 {
	if s.numEvents.Load() == 0 {
		return 0
	}
	return s.minTS.Load()
}

// MaxTS returns the largest event timestamp stored, or 0 if the store is empty.
func (s *Store) MaxTS() int64 {
	if s.numEvents.Load() == 0 {
		return 0
	}
	return s.maxTS.Load()
}

// AddEvent validates ev and stores it as two edge directions, creating its
// endpoints if needed. Events may arrive in any time order. It returns false
// without error if an event with the same non-empty ID was stored before.
func (s *Store) AddEvent(ev Event) (bool, error) {
	if err := ev.Validate(); err != nil {
		return false, fmt.Errorf("add event: %w", err)
	}
	if ev.ID != "" {
		s.seenMu.Lock()
		_, dup := s.seen[ev.ID]
		if !dup {
			s.seen[ev.ID] = struct{}{}
		}
		s.seenMu.Unlock()
		if dup {
			return false, nil
		}
	}
	ta, tb := &s.tables[ev.Src.Type], &s.tables[ev.Dst.Type]
	switch {
	case ta == tb:
		ta.mu.Lock()
		defer ta.mu.Unlock()
	case ev.Src.Type < ev.Dst.Type:
		ta.mu.Lock()
		tb.mu.Lock()
		defer ta.mu.Unlock()
		defer tb.mu.Unlock()
	default:
		tb.mu.Lock()
		ta.mu.Lock()
		defer tb.mu.Unlock()
		defer ta.mu.Unlock()
	}
	a, err := ta.intern(ev.Src.ID)
	if err != nil {
		return false, fmt.Errorf("add event: src %s: %w", ev.Src, err)
	}
	b, err := tb.intern(ev.Dst.ID)
	if err != nil {
		return false, fmt.Errorf("add event: dst %s: %w", ev.Dst, err)
	}
	src, dst := NodeID{Type: ev.Src.Type, Idx: a}, NodeID{Type: ev.Dst.Type, Idx: b}
	ta.adj[a] = insertRec(ta.adj[a], makeRec(dst, ev.Type, true, ev.TS, ev.Weight))
	tb.adj[b] = insertRec(tb.adj[b], makeRec(src, ev.Type, false, ev.TS, ev.Weight))
	s.numEvents.Add(1)
	for cur := s.minTS.Load(); ev.TS < cur && !s.minTS.CompareAndSwap(cur, ev.TS); cur = s.minTS.Load() {
	}
	for cur := s.maxTS.Load(); ev.TS > cur && !s.maxTS.CompareAndSwap(cur, ev.TS); cur = s.maxTS.Load() {
	}
	return true, nil
}

// AddEvents adds evs in order and returns how many were stored (duplicates
// are skipped). It stops at the first invalid event.
func (s *Store) AddEvents(evs []Event) (int, error) {
	n := 0
	for i := range evs {
		ok, err := s.AddEvent(evs[i])
		if err != nil {
			return n, fmt.Errorf("add events: event %d: %w", i, err)
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// list returns the full time-sorted adjacency of id (never modified after
// publication), or nil.
func (s *Store) list(id NodeID) []edgeRec {
	if !id.Type.Valid() {
		return nil
	}
	t := &s.tables[id.Type]
	t.mu.RLock()
	var l []edgeRec
	if int64(id.Idx) < int64(len(t.adj)) {
		l = t.adj[id.Idx]
	}
	t.mu.RUnlock()
	return l
}

// visible returns id's edges with ts <= asOf, oldest first.
func (s *Store) visible(id NodeID, asOf int64) []edgeRec {
	return visiblePrefix(s.list(id), asOf)
}

// Neighbors calls fn for each edge of id with ts <= asOf, newest first, until
// fn returns false. Both directions are visited (see Edge.Out). No lock is
// held while fn runs, so fn may call other Store methods.
func (s *Store) Neighbors(id NodeID, asOf int64, fn func(Edge) bool) {
	l := s.visible(id, asOf)
	for i := len(l) - 1; i >= 0; i-- {
		if !fn(l[i].edge()) {
			return
		}
	}
}

// Degree returns the number of edges of id (both directions) with ts <= asOf.
func (s *Store) Degree(id NodeID, asOf int64) int { return len(s.visible(id, asOf)) }

// forEachChunk is the number of adjacency headers ForEachEdge copies per lock.
const forEachChunk = 1024

// ForEachEdge calls fn(src, e) once for every stored event with
// fromTS <= ts < toTS, as its out direction (e.Out is true, e.Nbr is the
// destination), until fn returns false. Events are visited by source node
// (node type, then index) and by time within a source node, not in global
// time order. No lock is held while fn runs.
func (s *Store) ForEachEdge(fromTS, toTS int64, fn func(src NodeID, e Edge) bool) {
	fromTS = max(fromTS, 0)
	if fromTS >= toTS {
		return
	}
	lo := keyBound(fromTS - 1)
	var buf [][]edgeRec
	for nt := NodeType(1); nt < numNodeTypes; nt++ {
		t := &s.tables[nt]
		for start := 0; ; start += forEachChunk {
			t.mu.RLock()
			end := min(start+forEachChunk, len(t.adj))
			if start < end {
				buf = append(buf[:0], t.adj[start:end]...)
			}
			t.mu.RUnlock()
			if start >= end {
				break
			}
			for k, l := range buf {
				l = visiblePrefix(l, toTS-1)
				i, _ := slices.BinarySearchFunc(l, lo, func(r edgeRec, b uint64) int {
					if r.key < b {
						return -1
					}
					return 1
				})
				src := NodeID{Type: nt, Idx: uint32(start + k)}
				for _, r := range l[i:] {
					if r.out() && !fn(src, r.edge()) {
						return
					}
				}
			}
		}
	}
}

// DecayedWeight returns e's weight as of asOf: Weight*exp(-(asOf-TS)/tau) for
// the edge type's tau, or Weight for types without decay.
func (s *Store) DecayedWeight(e Edge, asOf int64) float32 {
	return s.decayed(e.Type, e.Weight, asOf-e.TS)
}

func (s *Store) decayed(t EdgeType, w float32, ageMS int64) float32 {
	inv := s.invTauMS[t&typeMask]
	if inv == 0 || ageMS <= 0 {
		return w
	}
	return w * float32(math.Exp(-float64(ageMS)*inv))
}

// compactChunk is the number of nodes packed into one CSR array by Compact.
const compactChunk = 4096

// Compact packs the adjacency lists of every chunk of nodes that has grown
// since the last compaction into one exact-size array per chunk (CSR), which
// removes the growth slack. Lists appended to after compaction move out of
// the packed array again (copy on write), so readers are never disturbed.
// Safe for concurrent use; it locks one chunk of one node type at a time.
func (s *Store) Compact() {
	var packed, chunks int
	for nt := NodeType(1); nt < numNodeTypes; nt++ {
		t := &s.tables[nt]
		for start := 0; ; start += compactChunk {
			t.mu.Lock()
			end := min(start+compactChunk, len(t.adj))
			if start >= end {
				t.mu.Unlock()
				break
			}
			lists := t.adj[start:end]
			total, loose := 0, false
			for _, l := range lists {
				total += len(l)
				loose = loose || cap(l) != len(l)
			}
			if loose && total > 0 {
				arr := make([]edgeRec, total)
				off := 0
				for i, l := range lists {
					n := copy(arr[off:], l)
					lists[i] = arr[off : off+n : off+n]
					off += n
				}
				packed += total
				chunks++
			}
			t.mu.Unlock()
		}
	}
	s.logger.Debug("compacted adjacency", "chunks", chunks, "edge_dirs", packed)
}

// RunCompactor calls Compact every interval until ctx is done, then returns
// ctx.Err(). It is meant to run in its own goroutine.
func (s *Store) RunCompactor(ctx context.Context, interval time.Duration) error {
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tk.C:
			s.Compact()
		}
	}
}

// Until returns a new store that holds every node of s, with the same
// indices and content, and the events of s with ts <= asOf: the graph as it
// was at asOf, for fitting and scoring as of then without seeing later
// events (the re-rank's calibration, retrieval.Calibrate). Content is
// shared with s (entities are immutable once stored); edge lists are
// copied. The copy keeps no idempotency ids, so it is for reading: an
// event added to it later is not checked against the events of s.
func (s *Store) Until(asOf int64) *Store {
	c := NewStore(s.opts)
	var n int64
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for nt := range s.tables {
		t, ct := &s.tables[nt], &c.tables[nt]
		t.mu.RLock()
		ct.refs = slices.Clone(t.refs)
		ct.ents = slices.Clone(t.ents)
		ct.ids = make(map[string]uint32, len(t.ids))
		for id, i := range t.ids {
			ct.ids[id] = i
		}
		adj := slices.Clone(t.adj)
		t.mu.RUnlock()
		ct.adj = make([][]edgeRec, len(adj))
		for i, l := range adj {
			l = visiblePrefix(l, asOf)
			if len(l) == 0 {
				continue
			}
			ct.adj[i] = slices.Clone(l)
			lo, hi = min(lo, l[0].ts()), max(hi, l[len(l)-1].ts())
			for _, r := range l {
				if r.out() {
					n++
				}
			}
		}
	}
	c.numEvents.Store(n)
	if n > 0 {
		c.minTS.Store(lo)
		c.maxTS.Store(hi)
	}
	c.until = asOf
	return c
}

// horizon returns the time up to which s holds every event: its newest
// event's, or for a store made by Until, its time when that is later.
func (s *Store) horizon() int64 { return max(s.MaxTS(), s.until) }
