package serving

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
)

// Limits of read requests, as in openapi.yaml.
const (
	MaxK                = 1000
	MaxPriorWeight      = 100.0
	MaxCoEngageWeight   = 1000.0
	DefaultRetrieveK    = 100
	DefaultSimilarK     = 20
	MaxContextEvents    = 1000
	maxUserContextEdges = 256
	sampleMembers       = 10
	keywordHitLimit     = 10000
)

// anonymousID is the id a context-only (anonymous) retrieve request's user
// takes in the events it sends.
const anonymousID = "_anonymous"

// retrieveRequest mirrors api.RetrieveRequest, with the parts the project's
// own decoders validate kept raw.
type retrieveRequest struct {
	User           json.RawMessage   `json:"user"`
	K              *int              `json:"k"`
	ExcludeSeen    *bool             `json:"exclude_seen"`
	Filter         json.RawMessage   `json:"filter"`
	Query          *string           `json:"query"`
	ContextEvents  []json.RawMessage `json:"context_events"`
	Explain        *bool             `json:"explain"`
	PriorWeight    *float64          `json:"prior_weight"`
	CoEngageWeight *float64          `json:"coengagement_weight"`
}

// retrieveParams is a decoded, validated retrieve request.
type retrieveParams struct {
	user        *graph.Ref
	k           int
	excludeSeen bool
	filter      *index.Filter
	query       string
	ctxEvents   []graph.Event
	explain     bool
	priorWeight *float32 // nil: the server's default
	coWeight    *float32 // nil: the server's default
}

func decodeRetrieve(body []byte) (*retrieveParams, error) {
	var req retrieveRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	p := &retrieveParams{k: DefaultRetrieveK, excludeSeen: true}
	if len(req.User) > 0 && string(req.User) != "null" {
		if _, err := objectFields(req.User, refFields); err != nil {
			return nil, fmt.Errorf("user: %w", err)
		}
		var ref graph.Ref
		if err := json.Unmarshal(req.User, &ref); err != nil {
			return nil, fmt.Errorf("user: %w", err)
		}
		p.user = &ref
	}
	if req.K != nil {
		if *req.K < 1 || *req.K > MaxK {
			return nil, badRequestf("k: %d is out of range 1..%d", *req.K, MaxK)
		}
		p.k = *req.K
	}
	if req.ExcludeSeen != nil {
		p.excludeSeen = *req.ExcludeSeen
	}
	if req.Explain != nil {
		p.explain = *req.Explain
	}
	if w := req.PriorWeight; w != nil {
		if !(*w >= 0 && *w <= MaxPriorWeight) {
			return nil, badRequestf("prior_weight: %v is out of range 0..%v", *w, MaxPriorWeight)
		}
		pw := float32(*w)
		p.priorWeight = &pw
	}
	if w := req.CoEngageWeight; w != nil {
		if !(*w >= 0 && *w <= MaxCoEngageWeight) {
			return nil, badRequestf("coengagement_weight: %v is out of range 0..%v", *w, MaxCoEngageWeight)
		}
		cw := float32(*w)
		p.coWeight = &cw
	}
	if req.Query != nil {
		p.query = *req.Query
	}
	if err := checkQuery(p.query); err != nil {
		return nil, err
	}
	if len(req.Filter) > 0 && string(req.Filter) != "null" {
		f, err := index.ParseFilter(req.Filter)
		if err != nil {
			return nil, badRequestf("filter: %v", err)
		}
		p.filter = f
	}
	if len(req.ContextEvents) > MaxContextEvents {
		return nil, badRequestf("context_events: %d events exceed the limit of %d", len(req.ContextEvents), MaxContextEvents)
	}
	anchor := graph.Ref{Type: graph.NodeUser, ID: anonymousID}
	if p.user != nil {
		anchor = *p.user
	}
	for i, raw := range req.ContextEvents {
		ev, err := decodeEvent(raw, &anchor)
		if err != nil {
			return nil, &ItemError{Field: "context_events", Index: i, Err: err}
		}
		if ev.Src != anchor {
			return nil, &ItemError{Field: "context_events", Index: i,
				Err: badRequestf("src: %s must be omitted or equal the request's user %s", ev.Src, anchor)}
		}
		p.ctxEvents = append(p.ctxEvents, ev)
	}
	if p.user == nil && len(p.ctxEvents) == 0 && p.query == "" {
		return nil, badRequestf("give a user, context_events or a query")
	}
	return p, nil
}

// loadSnapshot returns the serving snapshot or ErrNoSnapshot.
func (s *Server) loadSnapshot() (*Snapshot, error) {
	snap := s.snap.Load()
	if snap == nil || snap.Index == nil {
		return nil, ErrNoSnapshot
	}
	return snap, nil
}

// lookup resolves ref in the graph or fails with a 404 error.
func (s *Server) lookup(ref graph.Ref) (graph.NodeID, error) {
	id, ok := s.store.Lookup(ref)
	if !ok {
		return graph.NodeID{}, notFoundf("unknown entity %s", ref)
	}
	return id, nil
}

// entityVector returns the embedding of a stored node: the ad index's for an
// indexed ad, the snapshot's for a node it embedded (a user only when it
// has at least MinUserEvents events and none since the snapshot was taken,
// so that a user's new events change their embedding before retraining),
// else one computed now with the snapshot's model (cached per model version
// and node degree).
func (s *Server) entityVector(ctx context.Context, snap *Snapshot, id graph.NodeID) ([]float32, bool, error) {
	if id.Type == graph.NodeAd {
		if v, ok := snap.Index.Snapshot().Embedding(id.Idx); ok {
			return v, false, nil
		}
	}
	asOf := serveTime(s.store)
	deg := s.store.Degree(id, asOf)
	current := id.Type != graph.NodeUser || (deg >= s.opts.MinUserEvents && deg == s.store.Degree(id, snap.AsOf))
	if m := snap.Embeddings[id.Type]; m != nil && current {
		if v, ok := m.Vector(id.Idx); ok {
			return v, false, nil
		}
	}
	if snap.Model == nil {
		return nil, false, fmt.Errorf("embed %s: %w: %w", s.store.Ref(id), ErrNoSnapshot, errNoModel)
	}
	key := embedKey{version: snap.Version, node: id, degree: deg}
	if v, ok := s.cache.get(key); ok {
		return v, true, nil
	}
	vecs, err := snap.Model.Embed(ctx, s.store, []graph.NodeID{id}, asOf)
	if err != nil {
		return nil, false, fmt.Errorf("embed %s: %w", s.store.Ref(id), err)
	}
	s.cache.put(key, vecs[0])
	return vecs[0], true, nil
}

// contextVector embeds an anchor known by its context events (and, for a
// stored user, its newest stored edges) with the snapshot's model.
func (s *Server) contextVector(ctx context.Context, snap *Snapshot, anchor graph.Ref, known bool, uid graph.NodeID, evs []graph.Event) ([]float32, error) {
	if snap.Model == nil {
		return nil, fmt.Errorf("embed context: %w: %w", ErrNoSnapshot, errNoModel)
	}
	asOf := serveTime(s.store)
	var edges []graph.Edge
	for _, ev := range evs {
		nbr, ok := s.store.Lookup(ev.Dst)
		if !ok {
			continue // the sampler could not use it either
		}
		asOf = max(asOf, ev.TS)
		edges = append(edges, graph.Edge{Nbr: nbr, Type: ev.Type, Out: true, TS: ev.TS, Weight: ev.Weight})
	}
	if known {
		s.store.Neighbors(uid, asOf, func(e graph.Edge) bool {
			edges = append(edges, e)
			return len(edges) < maxUserContextEdges+len(evs)
		})
	}
	sm := graph.NewSampler(s.store, snap.Model.SamplerOptions())
	sg := sm.SampleVirtual(anchor.Type, edges, asOf, graph.ViewTeacher, 1)
	vecs, err := snap.Model.EmbedSubgraphs(ctx, s.store, []*graph.Subgraph{sg})
	if err != nil {
		return nil, fmt.Errorf("embed context: %w", err)
	}
	return vecs[0], nil
}

// seenAds returns the ads the user interacted with (stored edges and
// context events).
func (s *Server) seenAds(known bool, uid graph.NodeID, evs []graph.Event) *roaring.Bitmap {
	seen := roaring.New()
	if known {
		s.store.Neighbors(uid, serveTime(s.store), func(e graph.Edge) bool {
			if e.Nbr.Type == graph.NodeAd {
				seen.Add(e.Nbr.Idx)
			}
			return true
		})
	}
	for _, ev := range evs {
		if ev.Dst.Type != graph.NodeAd {
			continue
		}
		if id, ok := s.store.Lookup(ev.Dst); ok {
			seen.Add(id.Idx)
		}
	}
	return seen
}

// recentAds returns the user's recent distinct engaged ads for the
// co-engagement term, most recent first: those of the context events (by
// time), then the stored ones.
func (s *Server) recentAds(snap *Snapshot, known bool, uid graph.NodeID, evs []graph.Event) []uint32 {
	var ctxAds []graph.Event
	for _, ev := range evs {
		if ev.Dst.Type == graph.NodeAd && ev.Type.IsPositive() {
			ctxAds = append(ctxAds, ev)
		}
	}
	slices.SortStableFunc(ctxAds, func(a, b graph.Event) int { return cmp.Compare(b.TS, a.TS) })
	var out []uint32
	seen := map[uint32]bool{}
	for _, ev := range ctxAds {
		if id, ok := s.store.Lookup(ev.Dst); ok && !seen[id.Idx] {
			seen[id.Idx] = true
			out = append(out, id.Idx)
		}
	}
	if known {
		for _, ad := range snap.RecentAds(s.store, uid, serveTime(s.store)) {
			if !seen[ad] {
				seen[ad] = true
				out = append(out, ad)
			}
		}
	}
	return out
}

// RetrieveCandidates answers candidate ads for a known, fresh or anonymous
// user: embedding -> BoM query bag -> token index with filter and
// exclusions (keywords restrict to matching ads) -> exact re-rank -> top-K.
func (s *Server) RetrieveCandidates(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := readJSONBody(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	p, err := s.checkRetrieve(decodeRetrieve(body))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	snap, err := s.loadSnapshot()
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.retrieve(ctx, snap, p)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) stage(ctx context.Context, name string, start time.Time) {
	s.stageDuration(ctx, name, time.Since(start))
}

// stageDuration records the latency of one retrieval stage.
func (s *Server) stageDuration(ctx context.Context, name string, d time.Duration) {
	s.tel.stageTime.Record(context.WithoutCancel(ctx), d.Seconds(),
		metric.WithAttributes(attribute.String("stage", name)))
}

func (s *Server) retrieve(ctx context.Context, snap *Snapshot, p *retrieveParams) (*api.RetrieveResponse, error) {
	idx := snap.Index.Snapshot()
	var uid graph.NodeID
	known := false
	if p.user != nil {
		uid, known = s.store.Lookup(*p.user)
		if !known && len(p.ctxEvents) == 0 {
			return nil, notFoundf("unknown user %s: post its events, or send context_events", *p.user)
		}
	}

	// Stage 1: keywords (optional).
	var keyword *roaring.Bitmap
	if p.query != "" {
		kctx, span := s.tel.tracer.Start(ctx, "keywords")
		start := time.Now()
		hits, err := s.text.Search(kctx, p.query, keywordHitLimit)
		span.End()
		if err != nil {
			return nil, keywordError(err)
		}
		s.stage(ctx, "keywords", start)
		keyword = hits
	}

	// Stage 2: the query embedding.
	ectx, span := s.tel.tracer.Start(ctx, "embed")
	start := time.Now()
	var vec []float32
	fresh := false
	var err error
	switch {
	case len(p.ctxEvents) > 0:
		anchor := graph.Ref{Type: graph.NodeUser, ID: anonymousID}
		if p.user != nil {
			anchor = *p.user
		}
		vec, err = s.contextVector(ectx, snap, anchor, known, uid, p.ctxEvents)
		fresh = true
	case known:
		vec, fresh, err = s.entityVector(ectx, snap, uid)
	default:
		vec = keywordCentroid(idx, keyword)
	}
	span.SetAttributes(attribute.Bool("hir.fresh", fresh))
	span.End()
	if err != nil {
		return nil, err
	}
	s.stage(ctx, "embed", start)
	out := &api.RetrieveResponse{ModelVersion: snap.Version, FreshUser: &fresh, Candidates: []api.Candidate{}}
	if vec == nil { // keywords only, and none matched
		return out, nil
	}

	// Stages 3 and 4: candidates from the token index, then the exact
	// re-rank. The index does both in one call and reports how long each
	// took, so their spans carry those timestamps.
	start = time.Now()
	var seen *roaring.Bitmap
	if p.excludeSeen && (known || len(p.ctxEvents) > 0) {
		seen = s.seenAds(known, uid, p.ctxEvents)
	}
	priorW := s.opts.PriorWeight
	if p.priorWeight != nil {
		priorW = *p.priorWeight
	}
	events := len(p.ctxEvents)
	if known {
		events += s.store.Degree(uid, serveTime(s.store))
	}
	co := CoTerm{Weight: s.opts.CoEngageWeight}
	if p.coWeight != nil {
		co.Weight = *p.coWeight
	}
	if co.Weight != 0 {
		co.Recent = s.recentAds(snap, known, uid, p.ctxEvents)
	}
	q := snap.UserQuery(idx, vec, p.k, p.filter, seen, PriorTerm{Weight: priorW, NewUser: snap.NewUser(events)}, co)
	if keyword != nil {
		q = index.Hybrid(q, keyword, index.HybridAnd)
	}
	searchStart := time.Now()
	res, err := idx.Search(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	rerankStart := searchStart.Add(res.CandidatesTime)
	_, cspan := s.tel.tracer.Start(ctx, "candidates", trace.WithTimestamp(start))
	cspan.SetAttributes(attribute.Int("hir.candidates", res.Candidates), attribute.Int("hir.allowed", res.Allowed),
		attribute.String("hir.stage", string(res.Stage)), attribute.Int("hir.level", res.Level))
	cspan.End(trace.WithTimestamp(rerankStart))
	_, rspan := s.tel.tracer.Start(ctx, "rerank", trace.WithTimestamp(rerankStart))
	rspan.SetAttributes(attribute.Int("hir.hits", len(res.Hits)))
	rspan.End(trace.WithTimestamp(rerankStart.Add(res.RerankTime)))
	s.stageDuration(ctx, "candidates", rerankStart.Sub(start))
	s.stageDuration(ctx, "rerank", res.RerankTime)
	s.tel.candidates.Record(context.WithoutCancel(ctx), int64(res.Candidates))

	weights := make(map[index.Token]float32, len(q.Bag))
	for _, wt := range q.Bag {
		weights[wt.Token] = wt.Weight
	}
	for _, h := range res.Hits {
		ref := s.store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: h.ID})
		c := api.Candidate{Type: api.NodeType(ref.Type.String()), Id: ref.ID, Score: h.Score}
		if p.explain {
			toks := make([]api.TokenRef, 0, len(h.Tokens))
			for _, t := range h.Tokens {
				toks = append(toks, s.tokenRef(snap, t, weights[t]))
			}
			c.Tokens = &toks
		}
		out.Candidates = append(out.Candidates, c)
	}
	return out, nil
}

// keywordCentroid is the normalised mean embedding of the keyword hits that
// are indexed ads, nil when there are none.
func keywordCentroid(idx *index.Snapshot, keyword *roaring.Bitmap) []float32 {
	if keyword == nil {
		return nil
	}
	var sum []float32
	it := keyword.Iterator()
	for n := 0; it.HasNext() && n < 256; {
		v, ok := idx.Embedding(it.Next())
		if !ok {
			continue
		}
		if sum == nil {
			sum = make([]float32, len(v))
		}
		for i := range v {
			sum[i] += v[i]
		}
		n++
	}
	if sum == nil {
		return nil
	}
	var norm float32
	for _, x := range sum {
		norm += x * x
	}
	if norm == 0 {
		return nil
	}
	inv := 1 / float32(math.Sqrt(float64(norm)))
	for i := range sum {
		sum[i] *= inv
	}
	return sum
}

func (s *Server) tokenRef(snap *Snapshot, t index.Token, weight float32) api.TokenRef {
	tr := api.TokenRef{Token: formatToken(t), Level: t.Level()}
	if snap.Catalogue != nil {
		if info, ok := snap.Catalogue.Get(t); ok && info.Label != "" {
			l := info.Label
			tr.Label = &l
		}
	}
	if weight != 0 {
		w := weight
		tr.Weight = &w
	}
	return tr
}

// parseEntityParams validates the path parameters of an entity endpoint.
func parseEntityParams(pType api.EntityType, id api.EntityID) (graph.Ref, error) {
	t, err := graph.ParseNodeType(string(pType))
	if err != nil {
		return graph.Ref{}, badRequestf("type: %v", err)
	}
	ref := graph.Ref{Type: t, ID: id}
	if err := ref.Validate(); err != nil {
		return graph.Ref{}, badRequestf("id: %v", err)
	}
	return ref, nil
}

// GetInterests returns an entity's Bag-of-Meaning tokens with labels.
func (s *Server) GetInterests(w http.ResponseWriter, r *http.Request, pType api.EntityType, id api.EntityID) {
	ref, err := parseEntityParams(pType, id)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	snap, err := s.loadSnapshot()
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	nid, err := s.lookup(ref)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	vec, _, err := s.entityVector(r.Context(), snap, nid)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	bag := snap.Index.Quantizer().Bag(vec)
	out := api.InterestsResponse{Entity: api.Ref{Type: api.NodeType(ref.Type.String()), Id: ref.ID},
		ModelVersion: snap.Version, Tokens: make([]api.TokenRef, 0, len(bag))}
	for _, wt := range bag {
		out.Tokens = append(out.Tokens, s.tokenRef(snap, wt.Token, wt.Weight))
	}
	writeJSON(w, http.StatusOK, out)
}

// GetSimilar returns the nearest entities of a target type: exact top-k
// over the snapshot's embedding matrix of that type, or over the live ad
// index for ads (fresh ads included).
func (s *Server) GetSimilar(w http.ResponseWriter, r *http.Request, pType api.EntityType, id api.EntityID, params api.GetSimilarParams) {
	ctx := r.Context()
	ref, err := parseEntityParams(pType, id)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	target := ref.Type
	if params.TargetType != nil {
		if target, err = graph.ParseNodeType(string(*params.TargetType)); err != nil {
			s.writeProblem(w, r, badRequestf("target_type: %v", err))
			return
		}
	}
	k := DefaultSimilarK
	if params.K != nil {
		if *params.K < 1 || *params.K > MaxK {
			s.writeProblem(w, r, badRequestf("k: %d is out of range 1..%d", *params.K, MaxK))
			return
		}
		k = *params.K
	}
	snap, err := s.loadSnapshot()
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	nid, err := s.lookup(ref)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	vec, _, err := s.entityVector(ctx, snap, nid)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.SimilarResponse{Entity: api.Ref{Type: api.NodeType(ref.Type.String()), Id: ref.ID},
		ModelVersion: snap.Version, Items: []api.SimilarItem{}}
	tname := api.NodeType(target.String())
	if target == graph.NodeAd {
		q := index.Query{Vector: vec, K: k, Exhaustive: true}
		if nid.Type == graph.NodeAd {
			q.Exclude = roaring.BitmapOf(nid.Idx)
		}
		res, err := snap.Index.Snapshot().Search(ctx, q)
		if err != nil {
			s.writeProblem(w, r, fmt.Errorf("search index: %w", err))
			return
		}
		for _, h := range res.Hits {
			out.Items = append(out.Items, api.SimilarItem{Type: tname,
				Id: s.store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: h.ID}).ID, Score: h.Score})
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	m := snap.Embeddings[target]
	if m != nil {
		top, err := m.topK(ctx, vec, k, nid.Idx, nid.Type == target)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		for _, sc := range top {
			out.Items = append(out.Items, api.SimilarItem{Type: tname,
				Id: s.store.Ref(graph.NodeID{Type: target, Idx: sc.idx}).ID, Score: sc.score})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// GetToken describes one interest token: label, level, parent, children,
// live size and sample member ads.
func (s *Server) GetToken(w http.ResponseWriter, r *http.Request, token string) {
	t, err := parseToken(token)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	snap, err := s.loadSnapshot()
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var info index.TokenInfo
	ok := false
	if snap.Catalogue != nil {
		info, ok = snap.Catalogue.Get(t)
	}
	if !ok {
		s.writeProblem(w, r, notFoundf("unknown token %s in model %s", token, snap.Version))
		return
	}
	idx := snap.Index.Snapshot()
	post := idx.Postings(t)
	out := api.TokenInfo{Token: formatToken(t), Level: t.Level(), Size: int(post.GetCardinality())}
	if info.Label != "" {
		l := info.Label
		out.Label = &l
	}
	if info.Parent != nil {
		p := formatToken(*info.Parent)
		out.Parent = &p
	}
	children := make([]string, 0, len(info.Children))
	for _, c := range info.Children {
		children = append(children, formatToken(c))
	}
	out.Children = &children
	members := []api.Ref{}
	it := post.Iterator()
	for it.HasNext() && len(members) < sampleMembers {
		ref := s.store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: it.Next()})
		members = append(members, api.Ref{Type: api.NodeType(ref.Type.String()), Id: ref.ID})
	}
	out.SampleMembers = &members
	writeJSON(w, http.StatusOK, out)
}
