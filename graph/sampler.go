package graph

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// VirtualIdx is the Idx of the anchor token of a subgraph sampled by
// [Sampler.SampleVirtual]: an anchor that is not a stored node. No stored
// node has this index.
const VirtualIdx uint32 = math.MaxUint32

// ViewOptions configures one sampling view. Zero fields select the view's
// default (see DefaultSamplerOptions); a negative RestartProb or
// FeatureDropout means 0.
type ViewOptions struct {
	// MaxNodes is the fixed token count N of the subgraph, anchor included.
	MaxNodes int
	// Hops bounds the hop distance of sampled nodes from the anchor.
	Hops int
	// FanOut is the number of distinct neighbours drawn by importance from
	// each expanded node (the anchor at hop 1, those picks at hop 2, ...).
	FanOut int
	// Walks is the number of random walks with restart from the anchor.
	Walks int
	// WalkLen is the number of steps of each walk.
	WalkLen int
	// RestartProb is the probability of jumping back to the anchor at each step.
	RestartProb float64
	// FeatureDropout is the probability that a non-anchor token's content
	// features are hidden (Subgraph.DropFeat).
	FeatureDropout float64
	// AnchorOnly is the probability that the view is the anchor alone, its
	// neighbourhood dropped and its activity counts zero, as for an entity
	// that has no edges yet: it trains the model to place new users and ads
	// from their content (cold-start simulation). The draw does not disturb the rest of the
	// sample: a view that keeps its neighbourhood is the one it would be
	// with AnchorOnly 0.
	AnchorOnly float64
}

// SamplerOptions configures a Sampler. Defaults are applied by NewSampler.
type SamplerOptions struct {
	Teacher ViewOptions
	Student ViewOptions
	// EdgePrior multiplies an edge's decayed weight to give its importance
	// score, per edge type. Zero selects the default; a negative value
	// excludes the edge type from sampling (its edges still count for SPD).
	EdgePrior [NumEdgeTypes]float32
	// MaxScan is the number of newest visible edges of a node considered
	// when drawing its neighbours.
	MaxScan int
	// SPDScan is the number of newest visible edges of each sampled node
	// scanned for edges between sampled nodes when computing SPD. An edge
	// between two nodes that both have more visible edges than SPDScan, and
	// is older than the newest SPDScan of both, is not seen (unless it is the
	// edge through which one of them was reached).
	SPDScan int
	// ImportanceShare is the fraction of the non-anchor token budget filled
	// first with importance draws (in hop order); walk-visited nodes, by
	// visit count, fill the rest, then any remaining importance draws.
	ImportanceShare float64
	// ActivityHalfLife is the half-life of the anchor's recent-activity
	// count (Subgraph.Activity). Zero selects 14 days.
	ActivityHalfLife time.Duration
}

// DefaultSamplerOptions returns the options NewSampler applies to a zero
// SamplerOptions: teacher 32 nodes / 2 hops, student 16 nodes / 1 hop with
// feature dropout 0.2.
func DefaultSamplerOptions() SamplerOptions {
	var o SamplerOptions
	o.applyDefaults()
	return o
}

var defaultPrior = [NumEdgeTypes]float32{
	EdgeImpression:    0.2,
	EdgeClick:         1,
	EdgeAddToCart:     1.5,
	EdgePurchase:      2,
	EdgeConversion:    2,
	EdgeInterested:    1.5,
	EdgeNotInterested: 0.5,
	EdgeInCampaign:    1,
	EdgeOfAdvertiser:  1,
	EdgePromotes:      1,
	EdgeInCategory:    0.5,
	EdgeOfBrand:       0.5,
	EdgeFires:         1,
}

func (v *ViewOptions) applyDefaults(d ViewOptions) {
	def := func(p *int, dv, hi int) {
		if *p <= 0 {
			*p = dv
		}
		*p = min(*p, hi)
	}
	def(&v.MaxNodes, d.MaxNodes, 1024)
	def(&v.Hops, d.Hops, 16)
	def(&v.FanOut, d.FanOut, 1<<16)
	def(&v.Walks, d.Walks, 1<<16)
	def(&v.WalkLen, d.WalkLen, 1<<10)
	fdef := func(p *float64, dv float64) {
		switch {
		case *p == 0 || math.IsNaN(*p):
			*p = dv
		case *p < 0:
			*p = 0
		case *p > 1:
			*p = 1
		}
	}
	fdef(&v.RestartProb, d.RestartProb)
	fdef(&v.FeatureDropout, d.FeatureDropout)
	fdef(&v.AnchorOnly, d.AnchorOnly)
}

func (o *SamplerOptions) applyDefaults() {
	o.Teacher.applyDefaults(ViewOptions{MaxNodes: 32, Hops: 2, FanOut: 8, Walks: 16, WalkLen: 4, RestartProb: 0.3})
	o.Student.applyDefaults(ViewOptions{MaxNodes: 16, Hops: 1, FanOut: 12, Walks: 16, WalkLen: 3, RestartProb: 0.3, FeatureDropout: 0.2, AnchorOnly: 0.25})
	for t := range o.EdgePrior {
		switch p := o.EdgePrior[t]; {
		case p == 0 || p != p:
			o.EdgePrior[t] = defaultPrior[t]
		case p < 0:
			o.EdgePrior[t] = -1
		}
	}
	if o.MaxScan <= 0 {
		o.MaxScan = 256
	}
	if o.SPDScan <= 0 {
		o.SPDScan = 1024
	}
	if o.ImportanceShare <= 0 || o.ImportanceShare > 1 || math.IsNaN(o.ImportanceShare) {
		o.ImportanceShare = 0.5
	}
	if o.ActivityHalfLife <= 0 {
		o.ActivityHalfLife = DefaultActivityHalfLife
	}
}

// Sampler draws fixed-size subgraphs around anchors from a Store (DESIGN §4).
// Results are deterministic given (seed, anchor, asOf, view) and the store's
// edges visible at asOf. Safe for concurrent use.
type Sampler struct {
	s     *Store
	opts  SamplerOptions
	prior [NumEdgeTypes]float32 // effective priors, >= 0
	pool  sync.Pool             // *sampleState
}

// NewSampler returns a sampler over s. The store is retained.
func NewSampler(s *Store, opts SamplerOptions) *Sampler {
	opts.applyDefaults()
	sm := &Sampler{s: s, opts: opts}
	for t, p := range opts.EdgePrior {
		sm.prior[t] = max(p, 0)
	}
	sm.prior[EdgeNone] = 0
	sm.pool.New = func() any { return &sampleState{index: map[NodeID]int32{}, pos: map[NodeID]int32{}} }
	return sm
}

// Options returns the options in effect (with defaults applied).
func (sm *Sampler) Options() SamplerOptions { return sm.opts }

// ViewOptions returns the options of view.
func (sm *Sampler) ViewOptions(view View) ViewOptions {
	if view == ViewStudent {
		return sm.opts.Student
	}
	return sm.opts.Teacher
}

// cand is a node discovered while sampling.
type cand struct {
	id     NodeID
	parent int32 // cand index of the node it was reached from; -1 for the anchor
	hop    uint8
	et     EdgeType // reaching edge
	ts     int64
	w      float32 // decayed weight of the reaching edge
	visits int32
	imp    bool  // drawn by importance
	list   int32 // index into sampleState.lists, -1 until fetched
	tok    int32 // token index once selected, -1 before
}

type nbrList struct {
	edges []Edge    // newest first, score > 0 only
	cum   []float64 // cumulative scores
}

// sampleState is per-call scratch, pooled.
type sampleState struct {
	cands  []cand
	index  map[NodeID]int32 // node -> cand
	lists  []nbrList
	keys   []keyed
	offs   []int32 // per frontier node: start of its keys
	cursor []int32 // per frontier node: next key to try
	spare  []keyed // the anchor's importance order, for filling up the budget
	sel    []int32
	order  []int32
	pos    map[NodeID]int32 // node -> token (SPD)
	adj    []bool
	queue  []int32
	dist   []int32
	ctx    []Edge // visible context edges of a virtual anchor, newest first
}

type keyed struct {
	k float64
	i int32
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// sampleHash seeds the draws of one sample. Its time is asOf, or, when
// asOf lies beyond every event the store holds (Store.horizon) and the
// visible context's, the newest of those: a request embedded as of the
// wall clock draws the same sample each time until an event arrives, so
// the same request gets the same answer. A store cut by Until samples as
// the whole store does as of the same time.
func sampleHash(seed uint64, anchor NodeID, asOf int64, view View) uint64 {
	h := splitmix(seed)
	h = splitmix(h ^ uint64(anchor.Type)<<32 ^ uint64(anchor.Idx))
	h = splitmix(h ^ uint64(asOf))
	return splitmix(h ^ uint64(view))
}

// Sample draws the view's subgraph around anchor as of asOf. An anchor that
// is not a stored node yields a subgraph holding only the anchor token.
func (sm *Sampler) Sample(anchor NodeID, asOf int64, view View, seed uint64) *Subgraph {
	h := sampleHash(seed, anchor, min(asOf, sm.s.horizon()), view)
	return sm.sample(anchor, nil, false, asOf, view, h)
}

// SampleVirtual draws a subgraph around an anchor that is not (or not fully)
// in the store, such as an anonymous user known by a few context events or a
// new ad known by its structure edges. ctx are the anchor's edges (Out
// relative to the anchor; those with TS > asOf are ignored; neighbours that
// are not stored nodes are ignored); the rest of the neighbourhood comes from
// the store. The anchor token is NodeID{Type: anchorType, Idx: VirtualIdx}.
// ctx is not retained.
func (sm *Sampler) SampleVirtual(anchorType NodeType, ctx []Edge, asOf int64, view View, seed uint64) *Subgraph {
	anchor := NodeID{Type: anchorType, Idx: VirtualIdx}
	horizon := min(asOf, sm.s.horizon())
	for _, e := range ctx {
		if e.TS <= asOf {
			horizon = max(horizon, e.TS)
		}
	}
	h := sampleHash(seed, anchor, horizon, view)
	for _, e := range ctx {
		h = splitmix(h ^ uint64(e.Nbr.Type)<<40 ^ uint64(e.Nbr.Idx)<<8 ^ uint64(e.Type))
		h = splitmix(h ^ uint64(e.TS) ^ uint64(math.Float32bits(e.Weight))<<1)
		if e.Out {
			h = splitmix(h)
		}
	}
	return sm.sample(anchor, ctx, true, asOf, view, h)
}

func (sm *Sampler) sample(anchor NodeID, ctx []Edge, virtual bool, asOf int64, view View, h uint64) *Subgraph {
	vo := sm.ViewOptions(view)
	if view != ViewStudent {
		view = ViewTeacher
	}
	st := sm.pool.Get().(*sampleState)
	defer sm.release(st)
	rng := rand.New(rand.NewPCG(h, splitmix(h^0x5851f42d4c957f2d)))

	st.ctx = st.ctx[:0]
	if virtual {
		for _, e := range ctx {
			if e.TS <= asOf && e.Type.Valid() && e.Nbr.Type.Valid() && int64(e.Nbr.Idx) < int64(sm.s.NumNodes(e.Nbr.Type)) {
				st.ctx = append(st.ctx, e)
			}
		}
		// Newest first; ties keep the caller's order.
		slices.SortStableFunc(st.ctx, func(a, b Edge) int { return cmp.Compare(b.TS, a.TS) })
	}
	exists := virtual || (anchor.Type.Valid() && int(anchor.Idx) < sm.s.NumNodes(anchor.Type))

	st.cands = append(st.cands[:0], cand{id: anchor, parent: -1, list: -1, tok: -1})
	st.index[anchor] = 0
	// The anchor-only draw has its own hash, so that the main stream of
	// random numbers is the same either way.
	alone := vo.AnchorOnly > 0 && float64(splitmix(h^0x2545f4914f6cdd1d)>>11)/(1<<53) < vo.AnchorOnly
	if exists && !alone {
		sm.drawImportance(st, vo, asOf, rng)
		sm.walk(st, vo, asOf, rng)
	}
	sm.selectTokens(st, vo, asOf)

	g := newSubgraph(anchor, asOf, view, vo.MaxNodes)
	g.Len = len(st.sel)
	maxVisits := int32(0)
	for _, ci := range st.sel {
		maxVisits = max(maxVisits, st.cands[ci].visits)
	}
	for t, ci := range st.sel {
		c := &st.cands[ci]
		g.Nodes[t] = c.id
		g.Mask[t] = true
		g.Hop[t] = c.hop
		if maxVisits > 0 {
			g.WalkFreq[t] = float32(c.visits) / float32(maxVisits)
		}
		if t == 0 {
			continue
		}
		g.EdgeType[t] = c.et
		g.EdgeTS[t] = c.ts
		g.EdgeWeight[t] = c.w
		g.TimeBucket[t] = TimeBucket(asOf - c.ts)
	}
	// An anchor-only view stands for an entity with no edges yet, so it
	// has no activity either: what the model learns from it is what it
	// meets at serving time for a new user or ad (zero counts, no
	// neighbours), not an established entity with its neighbours hidden.
	var recent, total float64
	switch {
	case alone:
	case virtual:
		recent, total = sm.ctxActivity(g, st.ctx, asOf)
	default:
		recent, total = sm.activity(g, anchor, asOf)
	}
	g.Activity = [2]float32{float32(math.Log1p(recent)), float32(math.Log1p(total))}
	if vo.FeatureDropout > 0 {
		for t := 1; t < g.Len; t++ {
			g.DropFeat[t] = rng.Float64() < vo.FeatureDropout
		}
	}
	sm.fillSPD(st, g, asOf)
	return g
}

func (sm *Sampler) release(st *sampleState) {
	st.spare = st.spare[:0]
	clear(st.index)
	clear(st.pos)
	for i := range st.lists {
		st.lists[i].edges = st.lists[i].edges[:0]
		st.lists[i].cum = st.lists[i].cum[:0]
	}
	st.lists = st.lists[:0]
	sm.pool.Put(st)
}

func newSubgraph(anchor NodeID, asOf int64, view View, n int) *Subgraph {
	g := &Subgraph{
		Anchor: anchor, AsOf: asOf, View: view, N: n,
		Nodes:      make([]NodeID, n),
		Mask:       make([]bool, n),
		Hop:        make([]uint8, n),
		EdgeType:   make([]EdgeType, n),
		TimeBucket: make([]uint8, n),
		EdgeWeight: make([]float32, n),
		EdgeTS:     make([]int64, n),
		WalkFreq:   make([]float32, n),
		DropFeat:   make([]bool, n),
		History:    make([]NodeID, 0, MaxHistory),
		HistoryW:   make([]float32, 0, MaxHistory),
		SPD:        make([]uint8, n*n),
	}
	return g
}

// DefaultActivityHalfLife is the default SamplerOptions.ActivityHalfLife:
// the half-life of the service's engagement prior.
const DefaultActivityHalfLife = 14 * 24 * time.Hour

// activityScan bounds the edges of one node that the activity counts scan
// (the newest ones); older edges add to the total only.
const activityScan = 1024

// activityWeight is a positive engagement's weight in the recent count.
func (sm *Sampler) activityWeight(t EdgeType, ageMS int64) float64 {
	if !t.IsPositive() {
		return 0
	}
	return math.Exp2(-float64(max(ageMS, 0)) / float64(sm.opts.ActivityHalfLife.Milliseconds()))
}

// activity returns the stored node id's engagement counts as of asOf: its
// positive engagement edges (either direction) weighted 2^(-age/half-life),
// of the newest activityScan edges, and the number of its visible edges of
// every kind. It fills g's history from the same newest edges.
func (sm *Sampler) activity(g *Subgraph, id NodeID, asOf int64) (recent, total float64) {
	l := sm.s.visible(id, asOf)
	scan := l[max(0, len(l)-activityScan):]
	for _, r := range scan {
		recent += sm.activityWeight(r.edgeType(), asOf-r.ts())
	}
	for i := len(scan) - 1; i >= 0; i-- { // newest first
		if !sm.history(g, scan[i].edge(), asOf) {
			break
		}
	}
	return recent, float64(len(l))
}

// history appends e's neighbour to g.History when e is a positive
// engagement or an impression that the sampler reads (its type prior is
// positive), and reports whether g.History has room for more.
func (sm *Sampler) history(g *Subgraph, e Edge, asOf int64) bool {
	if len(g.History) >= MaxHistory {
		return false
	}
	if p := sm.HistoryPrior(e.Type); p > 0 {
		g.History = append(g.History, e.Nbr)
		g.HistoryW = append(g.HistoryW, p*max(sm.s.DecayedWeight(e, asOf), 1e-6))
	}
	return len(g.History) < MaxHistory
}

// HistoryPrior is the type prior of an edge type that enters an anchor's
// history (Subgraph.History): a positive engagement or an impression the
// sampler reads. It is 0 for every other type.
func (sm *Sampler) HistoryPrior(t EdgeType) float32 {
	if int(t) >= len(sm.prior) || !(t.IsPositive() || t == EdgeImpression) {
		return 0
	}
	return sm.prior[t]
}

// ctxActivity is activity for a virtual anchor known by its context edges
// (newest first).
func (sm *Sampler) ctxActivity(g *Subgraph, ctx []Edge, asOf int64) (recent, total float64) {
	room := true
	for _, e := range ctx[:min(len(ctx), activityScan)] {
		recent += sm.activityWeight(e.Type, asOf-e.TS)
		room = room && sm.history(g, e, asOf)
	}
	return recent, float64(len(ctx))
}

// neighbours returns the scored neighbour list of cand ci, fetching it once.
func (sm *Sampler) neighbours(st *sampleState, ci int32, asOf int64) *nbrList {
	c := &st.cands[ci]
	if c.list >= 0 {
		return &st.lists[c.list]
	}
	c.list = int32(len(st.lists))
	if cap(st.lists) > len(st.lists) {
		st.lists = st.lists[:len(st.lists)+1]
	} else {
		st.lists = append(st.lists, nbrList{})
	}
	nl := &st.lists[c.list]
	total := 0.0
	add := func(e Edge) {
		p := sm.prior[e.Type]
		if p <= 0 {
			return
		}
		w := float64(sm.s.DecayedWeight(e, asOf))
		total += float64(p) * max(w, 1e-6)
		nl.edges = append(nl.edges, e)
		nl.cum = append(nl.cum, total)
	}
	if ci == 0 && c.id.Idx == VirtualIdx {
		for _, e := range st.ctx[:min(len(st.ctx), sm.opts.MaxScan)] {
			add(e)
		}
		return nl
	}
	l := sm.s.visible(c.id, asOf)
	for i := len(l) - 1; i >= max(0, len(l)-sm.opts.MaxScan); i-- {
		add(l[i].edge())
	}
	return nl
}

// addCand records a newly discovered node reached from parent by e.
func (sm *Sampler) addCand(st *sampleState, parent int32, e Edge, asOf int64, imp bool) int32 {
	i := int32(len(st.cands))
	st.cands = append(st.cands, cand{
		id: e.Nbr, parent: parent, hop: st.cands[parent].hop + 1,
		et: e.Type, ts: e.TS, w: sm.s.DecayedWeight(e, asOf),
		imp: imp, list: -1, tok: -1,
	})
	st.index[e.Nbr] = i
	return i
}

// drawImportance expands hop by hop, drawing up to FanOut distinct new
// neighbours of each frontier node without replacement, proportionally to
// their scores (Efraimidis-Spirakis keys). Within a hop, picks are taken
// round-robin over the frontier (every node's best pick, then every node's
// second, ...) so that a truncated budget stays spread over the frontier.
func (sm *Sampler) drawImportance(st *sampleState, vo ViewOptions, asOf int64, rng *rand.Rand) {
	lo, hi := 0, 1 // frontier: cands[lo:hi]
	for hop := 1; hop <= vo.Hops && lo < hi; hop++ {
		st.keys = st.keys[:0]
		st.offs = st.offs[:0]
		for f := lo; f < hi; f++ {
			nl := sm.neighbours(st, int32(f), asOf)
			start := len(st.keys)
			st.offs = append(st.offs, int32(start))
			prev := 0.0
			for i, c := range nl.cum {
				s := c - prev
				prev = c
				u := rng.Float64()
				st.keys = append(st.keys, keyed{k: math.Log(max(u, 1e-300)) / s, i: int32(i)})
			}
			slices.SortFunc(st.keys[start:], func(a, b keyed) int {
				if c := cmp.Compare(b.k, a.k); c != 0 {
					return c
				}
				return cmp.Compare(a.i, b.i)
			})
			if f == 0 {
				st.spare = append(st.spare[:0], st.keys[start:]...)
			}
		}
		st.offs = append(st.offs, int32(len(st.keys)))
		st.cursor = append(st.cursor[:0], st.offs[:hi-lo]...)
		for round := 0; round < vo.FanOut; round++ {
			progress := false
			for k := range hi - lo {
				f := int32(lo + k)
				edges := st.lists[st.cands[f].list].edges
				for st.cursor[k] < st.offs[k+1] {
					e := edges[st.keys[st.cursor[k]].i]
					st.cursor[k]++
					if _, ok := st.index[e.Nbr]; ok {
						continue
					}
					sm.addCand(st, f, e, asOf, true)
					progress = true
					break
				}
			}
			if !progress {
				break
			}
		}
		lo, hi = hi, len(st.cands)
	}
}

// walk runs random walks with restart from the anchor, counting visits. A
// walk restarts when it would leave the hop limit or reaches a dead end.
func (sm *Sampler) walk(st *sampleState, vo ViewOptions, asOf int64, rng *rand.Rand) {
	for range vo.Walks {
		cur := int32(0)
		st.cands[0].visits++
		for range vo.WalkLen {
			if rng.Float64() < vo.RestartProb || int(st.cands[cur].hop) >= vo.Hops {
				cur = 0
				st.cands[0].visits++
				continue
			}
			nl := sm.neighbours(st, cur, asOf)
			if len(nl.edges) == 0 {
				cur = 0
				st.cands[0].visits++
				continue
			}
			total := nl.cum[len(nl.cum)-1]
			r := rng.Float64() * total
			j, _ := slices.BinarySearch(nl.cum, r)
			j = min(j, len(nl.edges)-1)
			for j < len(nl.edges)-1 && nl.cum[j] <= r { // skip zero-width entries
				j++
			}
			e := nl.edges[j]
			next, ok := st.index[e.Nbr]
			if !ok {
				next = sm.addCand(st, cur, e, asOf, false)
			}
			cur = next
			st.cands[cur].visits++
		}
	}
}

// selectTokens chooses at most MaxNodes candidates (anchor first), always
// together with the chain of nodes through which each was reached.
func (sm *Sampler) selectTokens(st *sampleState, vo ViewOptions, asOf int64) {
	st.sel = append(st.sel[:0], 0)
	st.cands[0].tok = 0
	budget := vo.MaxNodes
	take := func(ci int32) {
		// Collect the unselected chain ci, parent(ci), ...
		st.queue = st.queue[:0]
		for c := ci; c >= 0 && st.cands[c].tok < 0; c = st.cands[c].parent {
			st.queue = append(st.queue, c)
		}
		if len(st.sel)+len(st.queue) > budget {
			return
		}
		for k := len(st.queue) - 1; k >= 0; k-- {
			c := st.queue[k]
			st.cands[c].tok = int32(len(st.sel))
			st.sel = append(st.sel, c)
		}
	}
	impQuota := 1 + int(math.Round(float64(budget-1)*sm.opts.ImportanceShare))
	for ci := int32(1); ci < int32(len(st.cands)) && len(st.sel) < impQuota; ci++ {
		if st.cands[ci].imp {
			take(ci)
		}
	}
	st.order = st.order[:0]
	for ci := int32(1); ci < int32(len(st.cands)); ci++ {
		if st.cands[ci].visits > 0 && st.cands[ci].tok < 0 {
			st.order = append(st.order, ci)
		}
	}
	slices.SortFunc(st.order, func(a, b int32) int {
		if c := cmp.Compare(st.cands[b].visits, st.cands[a].visits); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, ci := range st.order {
		if len(st.sel) >= budget {
			return
		}
		take(ci)
	}
	for ci := int32(1); ci < int32(len(st.cands)) && len(st.sel) < budget; ci++ {
		if st.cands[ci].tok < 0 {
			take(ci)
		}
	}
	// Still room: more of the anchor's neighbours, in importance order.
	if len(st.sel) < budget && len(st.spare) > 0 && vo.Hops > 0 {
		nl := &st.lists[st.cands[0].list]
		for _, k := range st.spare {
			if len(st.sel) >= budget {
				break
			}
			e := nl.edges[k.i]
			if _, ok := st.index[e.Nbr]; !ok {
				take(sm.addCand(st, 0, e, asOf, true))
			}
		}
	}
}

// fillSPD computes the capped shortest-path distances between the sampled
// tokens over the edges among them that are visible at asOf.
func (sm *Sampler) fillSPD(st *sampleState, g *Subgraph, asOf int64) {
	n, N := g.Len, g.N
	for i := range g.SPD {
		g.SPD[i] = SPDPad
	}
	var filter [64]uint64 // 4096-bit membership prefilter
	fbit := func(id NodeID) uint64 { return splitmix(uint64(id.Type)<<32|uint64(id.Idx)) & 4095 }
	for t := range n {
		id := g.Nodes[t]
		st.pos[id] = int32(t)
		b := fbit(id)
		filter[b>>6] |= 1 << (b & 63)
	}
	st.adj = slices.Grow(st.adj[:0], n*n)[:n*n]
	clear(st.adj)
	link := func(i, j int) {
		if i != j {
			st.adj[i*n+j] = true
			st.adj[j*n+i] = true
		}
	}
	check := func(i int, nbr NodeID) {
		b := fbit(nbr)
		if filter[b>>6]&(1<<(b&63)) == 0 {
			return
		}
		if j, ok := st.pos[nbr]; ok {
			link(i, int(j))
		}
	}
	for t := range n {
		if t > 0 {
			link(t, int(st.cands[st.cands[st.sel[t]].parent].tok))
		}
		id := g.Nodes[t]
		if id.Idx == VirtualIdx && t == 0 {
			for _, e := range st.ctx {
				check(t, e.Nbr)
			}
			continue
		}
		l := sm.s.visible(id, asOf)
		for k := len(l) - 1; k >= max(0, len(l)-sm.opts.SPDScan); k-- {
			check(t, l[k].nbrID())
		}
	}
	st.dist = slices.Grow(st.dist[:0], n)[:n]
	for s := range n {
		for i := range st.dist {
			st.dist[i] = -1
		}
		st.dist[s] = 0
		st.queue = append(st.queue[:0], int32(s))
		for q := 0; q < len(st.queue); q++ {
			u := int(st.queue[q])
			if st.dist[u] >= SPDMax {
				continue
			}
			row := st.adj[u*n : u*n+n]
			for v, ok := range row {
				if ok && st.dist[v] < 0 {
					st.dist[v] = st.dist[u] + 1
					st.queue = append(st.queue, int32(v))
				}
			}
		}
		for v := range n {
			d := uint8(SPDFar)
			if st.dist[v] >= 0 {
				d = uint8(st.dist[v])
			}
			g.SPD[s*N+v] = d
		}
	}
}
