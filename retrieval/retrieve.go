package retrieval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/rank"
)

// Limits of a retrieval request.
const (
	MaxK             = 1000
	MaxContextEvents = 1000
	// keywordHitLimit caps the ads a keyword query restricts to.
	keywordHitLimit = 10000
	// maxUserContextEdges caps the stored edges of a user that join a
	// request's context events in its embedding.
	maxUserContextEdges = 256
	// centroidHits caps the keyword hits averaged into a keyword-only
	// query's vector.
	centroidHits = 256
)

// anonymousID is the id that the user of a request without one takes.
const anonymousID = "_anonymous"

// Request is one retrieval: candidate ads for a user, known to the graph
// or not, with optional context events, inline content, filter and
// keywords.
type Request struct {
	// User names the user. It may be one the graph has never seen: a
	// never-seen user is embedded from Content and ContextEvents (or from
	// nothing but its type, and re-ranked as a new user). nil: anonymous,
	// with ContextEvents or Query.
	User *graph.Ref
	// Content is what the caller knows of the user at request time (text
	// such as page keywords, attributes such as geo, device or age bucket).
	// It is used for a user the graph does not hold, or one with context
	// events; a stored user's own content takes precedence.
	Content *graph.Entity
	// ContextEvents are events of the user not (yet) in the graph: the
	// current visit. Their Src is the user.
	ContextEvents []graph.Event
	// K is the number of candidates (1..MaxK).
	K int
	// Filter restricts the candidates (nil: none).
	Filter *index.Filter
	// Query restricts the candidates to ads whose text matches these
	// keywords; without a user or context events it also gives the query
	// vector (the mean of the matching ads).
	Query string
	// ExcludeSeen drops the ads the user has interacted with.
	ExcludeSeen bool
	// Weights overrides some of the re-rank weights for this request;
	// the others are the engine's for the generation that answers.
	Weights WeightOverrides
	// AsOf is the graph time of the request (unix ms); 0 is now. Offline
	// evaluation sets it to the query time; request-time embeddings are
	// then not cached.
	AsOf int64
	// Exhaustive re-ranks every ad that passes the filters instead of the
	// token candidates: the exact top-K, the reference of the token index.
	Exhaustive bool
	// Popularity overrides the weight of the user's popularity coordinate
	// (nil: the generation's, [Engine.PopularityWeight]); the calibration
	// sets it.
	Popularity *float32
}

// Response is the answer to a [Request].
type Response struct {
	// Version is the model version that answered.
	Version string
	// FreshUser is set when the user's embedding was computed for this
	// request (a new, changed or never-seen user, or context events)
	// rather than read from the generation.
	FreshUser bool
	// NewUser is set when the user counts as new (rank.NewUser): the
	// re-rank read the new-user priors.
	NewUser bool
	// Candidates are the ads, best first.
	Candidates []Candidate
	// Bag is the query bag of the user's vector (the tokens that
	// generated the candidates).
	Bag []index.WeightedToken
	// Stats describe how the candidates were found.
	Stats Stats
	// Catalogue labels the tokens of the generation that answered (nil:
	// none), for explanations.
	Catalogue *index.Catalogue
}

// Candidate is one retrieved ad.
type Candidate struct {
	// Ad is the ad's graph node index and Ref its external reference.
	Ad  uint32
	Ref graph.Ref
	// Score is the re-rank score: the sum of Parts.
	Score float32
	Parts index.Parts
	// Tokens are the query tokens whose postings hold the ad (empty when it
	// was reached otherwise: widening, co-engagement or Exhaustive).
	Tokens []index.Token
	// KeywordMatch is set when the request had a query (the candidates
	// then all match it).
	KeywordMatch bool
	// NewAd is set for a new ad placed by the request's new-ad share
	// (rank.Weights.NewAdShare) rather than by its score: candidates are
	// best first apart from these.
	NewAd bool
}

// Stats describe one retrieval's candidate generation and time per stage.
type Stats struct {
	Candidates, Allowed int
	// Exact is the number of docs scored exactly (index.Result.Exact).
	Exact           int
	Stage           index.Stage
	Level           int
	Start           time.Time
	Keywords, Embed time.Duration
	CandidatesTime  time.Duration
	RerankTime      time.Duration
}

// userContext is what a request needs of its user, computed once per
// request, as of one time, in one pass over the user's stored events.
type userContext struct {
	asOf   int64
	ref    graph.Ref
	id     graph.NodeID
	known  bool // the graph holds the user
	events int  // stored (as of asOf) plus context events
	// atGen is the number of stored events at the generation's AsOf: the
	// user changed since when events (without context) differ.
	atGen  int
	seen   *roaring.Bitmap // ads the user interacted with; nil unless ExcludeSeen
	recent []rank.RecentAd // distinct engaged ads, most recent first, context first
	edges  []graph.Edge    // context edges, then the newest stored ones (with context events)
}

// userContext computes the user's context for req as of asOf.
func (e *Engine) userContext(s *Served, req *Request, asOf int64) *userContext {
	uc := &userContext{asOf: asOf, ref: graph.Ref{Type: graph.NodeUser, ID: anonymousID}}
	if req.User != nil {
		uc.ref = *req.User
		uc.id, uc.known = e.store.Lookup(uc.ref)
	}
	if req.ExcludeSeen {
		uc.seen = roaring.New()
	}
	history := s.live.Co.HistoryAds()
	inRecent := map[uint32]bool{}
	// Context events first, most recent first.
	ctxEvents := slices.Clone(req.ContextEvents)
	slices.SortStableFunc(ctxEvents, func(a, b graph.Event) int { return cmp.Compare(b.TS, a.TS) })
	for _, ev := range ctxEvents {
		nbr, ok := e.store.Lookup(ev.Dst)
		if !ok {
			continue // the sampler could not use it either
		}
		uc.asOf = max(uc.asOf, ev.TS)
		uc.edges = append(uc.edges, graph.Edge{Nbr: nbr, Type: ev.Type, Out: true, TS: ev.TS, Weight: ev.Weight})
		if nbr.Type != graph.NodeAd {
			continue
		}
		if uc.seen != nil {
			uc.seen.Add(nbr.Idx)
		}
		if ev.Type.IsPositive() && history > 0 && !inRecent[nbr.Idx] && len(uc.recent) < history {
			inRecent[nbr.Idx] = true
			uc.recent = append(uc.recent, rank.RecentAd{Ad: nbr.Idx, TS: ev.TS})
		}
	}
	uc.events = len(req.ContextEvents)
	if !uc.known {
		return uc
	}
	genAsOf := s.gen.AsOf
	stored := 0
	e.store.Neighbors(uc.id, asOf, func(ed graph.Edge) bool {
		stored++
		if ed.TS <= genAsOf {
			uc.atGen++
		}
		if ed.Nbr.Type == graph.NodeAd {
			if uc.seen != nil {
				uc.seen.Add(ed.Nbr.Idx)
			}
			if rank.Engaged(ed) && len(uc.recent) < history && !inRecent[ed.Nbr.Idx] {
				inRecent[ed.Nbr.Idx] = true
				uc.recent = append(uc.recent, rank.RecentAd{Ad: ed.Nbr.Idx, TS: ed.TS})
			}
		}
		if len(req.ContextEvents) > 0 && stored <= maxUserContextEdges {
			uc.edges = append(uc.edges, ed)
		}
		return true
	})
	uc.events += stored
	return uc
}

// Validate checks a request's fields; Retrieve answers an invalid one
// with an error wrapping ErrBadRequest.
func (req *Request) Validate() error {
	switch {
	case req.K < 1 || req.K > MaxK:
		return fmt.Errorf("%w: k: %d is out of range 1..%d", ErrBadRequest, req.K, MaxK)
	case len(req.ContextEvents) > MaxContextEvents:
		return fmt.Errorf("%w: context_events: %d events exceed the limit of %d", ErrBadRequest, len(req.ContextEvents), MaxContextEvents)
	case req.User == nil && len(req.ContextEvents) == 0 && req.Query == "":
		return fmt.Errorf("%w: give a user, context_events or a query", ErrBadRequest)
	case req.User != nil && req.User.Type != graph.NodeUser:
		return fmt.Errorf("%w: user: type %s: candidates are retrieved for users (GET /v1/entities/%s/%s/similar finds ads near other entities)",
			ErrBadRequest, req.User.Type, req.User.Type, req.User.ID)
	}
	if err := req.Weights.apply(rank.DefaultWeights()).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return nil
}

// WeightOverrides override re-rank weights for one request; a nil field
// keeps the engine's weight (for the prior, the calibrated weight of the
// generation that answers, see [Engine.Weights]).
type WeightOverrides struct {
	Prior, CoEngagement, NewAdShare *float32
}

// apply returns w with o's weights in place of its own.
func (o WeightOverrides) apply(w rank.Weights) rank.Weights {
	for _, f := range []struct {
		v   *float32
		dst *float32
	}{{o.Prior, &w.Prior}, {o.CoEngagement, &w.CoEngagement}, {o.NewAdShare, &w.NewAdShare}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	return w
}

// Retrieve answers candidate ads for a known, never-seen or anonymous user:
// the user's context (one as-of time, one pass over their events) -> their
// embedding (the generation's, or computed now) -> BoM query bag -> token
// postings ∩ filter (∩ keyword hits), minus the seen ads -> exact re-rank
// by dot product plus the prior and co-engagement terms -> top K. It is the
// one retrieval path: POST /v1/retrieve and the offline evaluation both call
// it. Safe for concurrent use.
func (e *Engine) Retrieve(ctx context.Context, req Request) (*Response, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	s := e.cur.Load()
	if s == nil {
		return nil, ErrNoGeneration
	}
	st := Stats{Start: time.Now()}
	asOf := req.AsOf
	if asOf == 0 {
		asOf = serveTime(e.store)
	}
	w := req.Weights.apply(e.weights(s))
	idx := s.live.Index.Snapshot()

	var keyword *roaring.Bitmap
	if req.Query != "" {
		if e.text == nil {
			return nil, fmt.Errorf("%w: query: keyword search is disabled", ErrBadRequest)
		}
		hits, err := e.text.Search(ctx, req.Query, keywordHitLimit)
		if err != nil {
			return nil, KeywordError(err)
		}
		keyword = hits
	}
	st.Keywords = time.Since(st.Start)

	embedStart := time.Now()
	var uc *userContext
	var vec []float32
	fresh := false
	var err error
	if req.User != nil || len(req.ContextEvents) > 0 {
		uc = e.userContext(s, &req, asOf)
		vec, fresh, err = e.userVector(ctx, s, idx, &req, uc)
		if err != nil {
			return nil, err
		}
	} else {
		vec = keywordCentroid(idx, keyword)
	}
	if uc != nil && vec != nil {
		vec = e.weighPopularity(s, vec, req.Popularity)
	}
	st.Embed = time.Since(embedStart)
	out := &Response{Version: s.gen.Version, FreshUser: fresh, Candidates: []Candidate{}, Stats: st, Catalogue: s.gen.Catalogue}
	if vec == nil { // keywords only, and none matched
		return out, nil
	}

	q := index.Query{Vector: vec, K: req.K, Filter: req.Filter, Bag: idx.Quantizer().QueryBag(vec),
		PriorWeight: w.Prior, Exhaustive: req.Exhaustive}
	if uc != nil {
		out.NewUser = e.opts.Rank.NewUser.Is(uc.events)
		q.NewUser = out.NewUser
		if w.CoEngagement != 0 {
			// The term fades with the time since the user's engagements, read
			// on the data's clock, as the priors' is: the newest event
			// stored, or the request's time when earlier (offline evaluation
			// asks as of the past). A service of historical data, whose wall
			// clock lies far past its events, keeps the term.
			q.Boost = s.live.Co.Boost(uc.recent, min(uc.asOf, e.store.MaxTS()), w.CoEngagement)
		}
		if uc.seen != nil && !uc.seen.IsEmpty() {
			q.Exclude = uc.seen
		}
	}
	if keyword != nil {
		q = index.Hybrid(q, keyword, index.HybridAnd)
	}
	if q.Filter != nil && newAdSlots(req.K, w.NewAdShare) > 0 {
		// The answer's search and the new ads' both read the filter:
		// evaluate it once (a filter of a thousand campaigns costs about
		// half a millisecond at a million ads).
		allowed, err := idx.Allowed(q.Filter)
		if err != nil {
			return nil, fmt.Errorf("search index: %w", err)
		}
		if q.Restrict != nil {
			allowed.And(q.Restrict)
		}
		q.Filter, q.Restrict = nil, allowed
	}
	res, err := idx.Search(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	out.Bag = q.Bag
	out.Stats.Candidates, out.Stats.Allowed, out.Stats.Exact = res.Candidates, res.Allowed, res.Exact
	out.Stats.Stage, out.Stats.Level = res.Stage, res.Level
	out.Stats.CandidatesTime, out.Stats.RerankTime = res.CandidatesTime, res.RerankTime
	hits, isNew := res.Hits, map[uint32]bool(nil)
	if slots := newAdSlots(req.K, w.NewAdShare); slots > 0 {
		newAds, newHits, err := newAdHits(ctx, s, idx, q, slots, res.Hits)
		if err != nil {
			return nil, err
		}
		hits, isNew = interleaveNewAds(res.Hits, newHits, newAds.Contains, req.K, w.NewAdShare)
	}
	out.Candidates = make([]Candidate, 0, len(hits))
	for _, h := range hits {
		out.Candidates = append(out.Candidates, Candidate{Ad: h.ID, Ref: e.store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: h.ID}),
			Score: h.Score, Parts: h.Parts, Tokens: h.Tokens, KeywordMatch: keyword != nil, NewAd: isNew[h.ID]})
	}
	return out, nil
}

// newAdSlots returns how many of k candidates a new-ad share gives new ads.
func newAdSlots(k int, share float32) int {
	if share <= 0 {
		return 0
	}
	return int(float64(k) * float64(share))
}

// newAdExhaustiveMax bounds the new ads that the new-ad search re-ranks
// whole (index.SearchOptions.ExhaustiveMax): a larger set goes through the
// token stage, as a filtered search does. A catalogue where thousands of
// ads are new would otherwise have every request score all of them.
const newAdExhaustiveMax = 2048

// newAdHits returns the best new ads (rank.Priors.NewAds) that pass q's
// filters, best first by q's own score (the prior's fresh floor tells the
// ads just launched from the others): slots of them beyond those among
// hits, which count toward the share where they stand. It also returns
// the set of new ads (empty, not nil, when there are none).
func newAdHits(ctx context.Context, s *Served, idx *index.Snapshot, q index.Query, slots int, hits []index.Hit) (*roaring.Bitmap, []index.Hit, error) {
	ads := s.live.newAdsOf(idx)
	if ads == nil || ads.IsEmpty() {
		return roaring.New(), nil, nil
	}
	res, err := idx.Search(ctx, newAdQuery(q, ads, slots, hits))
	if err != nil {
		return nil, nil, fmt.Errorf("search new ads: %w", err)
	}
	return ads, res.Hits, nil
}

// newAdQuery returns the query of the new-ad search: q restricted to the
// new ads (ads, which it may narrow to q's Restrict), for slots of them
// beyond those among hits, re-ranked whole only when there are at most
// newAdExhaustiveMax of them.
func newAdQuery(q index.Query, ads *roaring.Bitmap, slots int, hits []index.Hit) index.Query {
	if q.Restrict != nil {
		ads = roaring.And(ads, q.Restrict) // ads is shared: not in place
	}
	k := slots
	for _, h := range hits {
		if ads.Contains(h.ID) {
			k++
		}
	}
	q.Restrict, q.Include, q.K = ads, nil, k
	if q.Options.ExhaustiveMax <= 0 || q.Options.ExhaustiveMax > newAdExhaustiveMax {
		q.Options.ExhaustiveMax = newAdExhaustiveMax
	}
	return q
}

// interleaveNewAds returns the top k of hits with new ads placed so that
// every prefix of p candidates holds at least floor(p*share) new ads (as
// far as there are), and the set of the ads placed for the share. newHits
// are the new ads, best first, and isNew tells a new ad: one among the hits
// counts toward the share where its score places it. A hit placed already
// (a new ad moved up) is not placed again. A slot without a new ad left
// takes the next hit, and the other way round.
func interleaveNewAds(hits, newHits []index.Hit, isNew func(uint32) bool, k int, share float32) ([]index.Hit, map[uint32]bool) {
	out := make([]index.Hit, 0, k)
	placed := make(map[uint32]bool, k)
	moved := map[uint32]bool{}
	next := func(list *[]index.Hit) (index.Hit, bool) {
		for len(*list) > 0 {
			if h := (*list)[0]; !placed[h.ID] {
				return h, true
			}
			*list = (*list)[1:]
		}
		return index.Hit{}, false
	}
	taken := 0
	for p := 1; len(out) < k; p++ {
		h, ok := next(&hits)
		fromNew := false
		if due := taken < int(float64(p)*float64(share)); due && !(ok && isNew(h.ID)) || !ok {
			if n, ok := next(&newHits); ok {
				h, fromNew = n, true
			}
		}
		if !ok && !fromNew {
			break
		}
		if fromNew {
			newHits = newHits[1:]
			moved[h.ID] = true
		} else {
			hits = hits[1:]
		}
		if fromNew || isNew(h.ID) {
			taken++
		}
		placed[h.ID] = true
		out = append(out, h)
	}
	return out, moved
}

// PopularityWeight returns the weight of a user's popularity coordinate
// in the generation being served: its model version's calibrated one
// (model.Calibration.PopularityWeight), 1 without one. The coordinate
// says how much the user follows popularity (the ads' carries their
// engagement counts), so the weight decides how much an ad's popularity
// counts in the embeddings' score, as the prior weight does for the
// counted prior: on MovieLens it is worth a tenth of the recall, in the
// synthetic world of planted interests it costs a sixth
// (docs/evaluation-log.md).
func (e *Engine) PopularityWeight() float32 { return popularityWeight(e.cur.Load()) }

func popularityWeight(s *Served) float32 {
	if s != nil && s.gen != nil && s.gen.Model != nil {
		if c := s.gen.Model.Calibration(); c != nil && c.PopularityWeight != nil {
			return *c.PopularityWeight
		}
	}
	return 1
}

// weighPopularity returns the query vector vec of a user with its
// popularity coordinate times the weight (override, else the
// generation's), a copy when that changes it (vec may be the
// generation's).
func (e *Engine) weighPopularity(s *Served, vec []float32, override *float32) []float32 {
	axis := s.popularityAxis()
	w := popularityWeight(s)
	if override != nil {
		w = *override
	}
	if axis < 0 || axis >= len(vec) || w == 1 {
		return vec
	}
	out := slices.Clone(vec)
	out[axis] *= w
	return out
}

// KeywordError maps an error of the keyword search: the end of the
// request's context stays itself (a deadline, a client gone), anything else
// is a bad query.
func KeywordError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("keyword search: %w", err)
	}
	return fmt.Errorf("%w: query: %w", ErrBadRequest, err)
}

// userVector returns the query vector of a request's user and whether it
// was computed for this request:
//   - with context events, the user is embedded from a virtual subgraph of
//     those events and their newest stored edges;
//   - a stored user who is not new and has no events since the generation
//     was built is served the generation's embedding;
//   - another stored user is embedded from their neighbourhood now;
//   - a never-seen user is embedded from Request.Content alone.
func (e *Engine) userVector(ctx context.Context, s *Served, idx *index.Snapshot, req *Request, uc *userContext) ([]float32, bool, error) {
	if len(req.ContextEvents) == 0 && uc.known {
		return e.storedVector(ctx, s, idx, uc.id, uc.events, uc.atGen, req.AsOf != 0, uc.asOf)
	}
	m := s.gen.Model
	if m == nil {
		return nil, false, fmt.Errorf("embed %s: %w: %w", uc.ref, ErrNoGeneration, errNoModel)
	}
	content := req.Content
	if uc.known {
		if stored := e.store.Entity(uc.id); stored != nil {
			content = stored
		}
	}
	// A never-seen user without content or context has nothing that tells
	// them apart: all share one vector, cached per version.
	anonymous := len(uc.edges) == 0 && content == nil
	key := embedKey{version: s.gen.Version, node: graph.NodeID{Type: uc.ref.Type, Idx: graph.VirtualIdx}, degree: -1}
	if anonymous {
		if v, ok := e.cache.get(key); ok {
			return v, true, nil
		}
	}
	e.batch.enter()
	defer e.batch.leave()
	sg := s.sampler(e.store, e.opts.NarrowRequestView).SampleVirtual(uc.ref.Type, uc.edges, uc.asOf, graph.ViewTeacher, 1)
	src := virtualContent{store: e.store, anchor: graph.NodeID{Type: uc.ref.Type, Idx: graph.VirtualIdx}, content: content}
	vec, err := e.batch.embed(ctx, m, src, sg)
	if err != nil {
		return nil, false, fmt.Errorf("embed %s: %w", uc.ref, err)
	}
	if anonymous {
		e.cache.put(key, vec)
	}
	return vec, true, nil
}

// virtualContent gives the model a virtual anchor's content beside the
// store's.
type virtualContent struct {
	store   *graph.Store
	anchor  graph.NodeID
	content *graph.Entity
}

func (v virtualContent) Entity(id graph.NodeID) *graph.Entity {
	if id == v.anchor {
		return v.content
	}
	return v.store.Entity(id)
}

// storedVector returns the embedding of a stored node and whether it was
// computed now: the live index's (idx, the request's snapshot of it) for
// an indexed ad; the generation's for
// another node it embedded (a user only when not new and unchanged since
// the generation: events == atGen); else one computed with the
// generation's model as of asOf (cached per version, node and degree unless
// exact is set, as offline evaluation asks).
func (e *Engine) storedVector(ctx context.Context, s *Served, idx *index.Snapshot, id graph.NodeID, events, atGen int, exact bool, asOf int64) ([]float32, bool, error) {
	if id.Type == graph.NodeAd {
		if v, ok := idx.Embedding(id.Idx); ok {
			return v, false, nil
		}
	}
	current := id.Type != graph.NodeUser || (!e.opts.Rank.NewUser.Is(events) && events == atGen)
	if current {
		if v, ok := s.gen.Embeddings[id.Type].Vector(id.Idx); ok {
			return v, false, nil
		}
	}
	if s.gen.Model == nil {
		return nil, false, fmt.Errorf("embed %s: %w: %w", e.store.Ref(id), ErrNoGeneration, errNoModel)
	}
	key := embedKey{version: s.gen.Version, node: id, degree: events}
	if !exact {
		if v, ok := e.cache.get(key); ok {
			return v, true, nil
		}
	}
	vecs, err := s.gen.Model.Embed(ctx, e.store, []graph.NodeID{id}, asOf)
	if err != nil {
		return nil, false, fmt.Errorf("embed %s: %w", e.store.Ref(id), err)
	}
	if !exact {
		e.cache.put(key, vecs[0])
	}
	return vecs[0], true, nil
}

// Vector returns the embedding of a stored entity, as retrieval would use
// it now (see [Engine.Retrieve]), and whether it was computed for this
// call. It answers ErrNotFound for an entity the graph does not hold and
// ErrNoGeneration before the first publication.
func (e *Engine) Vector(ctx context.Context, ref graph.Ref) ([]float32, *Served, error) {
	s := e.cur.Load()
	if s == nil {
		return nil, nil, ErrNoGeneration
	}
	vec, err := e.vectorIn(ctx, s, s.live.Index.Snapshot(), ref)
	return vec, s, err
}

// vectorIn returns the embedding of the stored entity ref in s (idx its
// live index's snapshot), as retrieval would use it now; ErrNotFound
// (wrapped) for an entity the graph does not hold.
func (e *Engine) vectorIn(ctx context.Context, s *Served, idx *index.Snapshot, ref graph.Ref) ([]float32, error) {
	id, ok := e.store.Lookup(ref)
	if !ok {
		return nil, fmt.Errorf("%w: unknown entity %s", ErrNotFound, ref)
	}
	asOf := serveTime(e.store)
	vec, _, err := e.storedVector(ctx, s, idx, id, e.store.Degree(id, asOf), e.store.Degree(id, s.gen.AsOf), false, asOf)
	return vec, err
}

// Interest is one token of an entity's Bag of Meaning ([Engine.Interests]).
type Interest struct {
	Token  index.Token
	Weight float32
	// Label is the token's label in the generation's catalogue ("" for
	// none).
	Label string
}

// Interests returns the version serving and the Bag-of-Meaning tokens of
// the stored entity ref, with their weights and labels. It loads the
// served state once; ErrNotFound for an entity the graph does not hold,
// ErrNoGeneration before the first publication.
func (e *Engine) Interests(ctx context.Context, ref graph.Ref) (string, []Interest, error) {
	vec, s, err := e.Vector(ctx, ref) // the one load of the served state
	if err != nil {
		return "", nil, err
	}
	bag := s.live.Index.Quantizer().Bag(vec)
	out := make([]Interest, 0, len(bag))
	for _, wt := range bag {
		in := Interest{Token: wt.Token, Weight: wt.Weight}
		if cat := s.gen.Catalogue; cat != nil {
			if info, ok := cat.Get(wt.Token); ok {
				in.Label = info.Label
			}
		}
		out = append(out, in)
	}
	return s.gen.Version, out, nil
}

// TokenView describes one interest token of the generation serving
// ([Engine.Token]).
type TokenView struct {
	Version string
	Info    index.TokenInfo // label, parent, children
	// Size is the number of live ads in the token's posting, and Members
	// the first up to the sample size asked for.
	Size    int
	Members []graph.Ref
}

// Token describes token t in the generation serving, with up to sample
// member ads. It loads the served state once; ErrNotFound (wrapped) for a
// token the generation's catalogue does not hold, ErrNoGeneration before
// the first publication.
func (e *Engine) Token(t index.Token, sample int) (*TokenView, error) {
	s := e.cur.Load()
	if s == nil {
		return nil, ErrNoGeneration
	}
	if !s.gen.hasToken(t) {
		return nil, unknownToken(t, s.gen.Version)
	}
	v := e.tokenView(s, s.live.Index.Snapshot(), t, sample)
	return &v, nil
}

// tokenView describes token t of s's catalogue (which holds it) with its
// live size in idx and up to sample member ads.
func (e *Engine) tokenView(s *Served, idx *index.Snapshot, t index.Token, sample int) TokenView {
	info, _ := s.gen.Catalogue.Get(t)
	post := idx.Postings(t)
	v := TokenView{Version: s.gen.Version, Info: info, Size: int(post.GetCardinality()), Members: []graph.Ref{}}
	it := post.Iterator()
	for it.HasNext() && len(v.Members) < sample {
		v.Members = append(v.Members, e.store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: it.Next()}))
	}
	return v
}

// unknownToken is the error for a token model version does not hold.
func unknownToken(t index.Token, version string) error {
	return fmt.Errorf("%w: unknown token %d.%d in model %s", ErrNotFound, t.Level(), t.Code(), version)
}

// TokenList is the tokens of one level, or the children of one token, of
// the generation serving ([Engine.Tokens]).
type TokenList struct {
	Version string
	// Levels is the number of token levels of the generation's catalogue.
	Levels int
	// Tokens are largest first (live ads in the posting), then by code;
	// each with up to the sample of members asked for.
	Tokens []TokenView
}

// Tokens returns the tokens of level, or with parent the children of that
// token, of the generation serving, largest first. It loads the served
// state once; ErrBadRequest (wrapped) for a level the generation does not
// have, ErrNotFound (wrapped) for an unknown parent, ErrNoGeneration before
// the first publication.
func (e *Engine) Tokens(level int, parent *index.Token, sample int) (*TokenList, error) {
	s := e.cur.Load()
	if s == nil {
		return nil, ErrNoGeneration
	}
	cat := s.gen.Catalogue
	var all []index.Token
	if cat != nil {
		all = cat.Tokens()
	}
	levels := 0
	for _, t := range all {
		levels = max(levels, t.Level()+1)
	}
	var toks []index.Token
	switch {
	case parent != nil:
		if !s.gen.hasToken(*parent) {
			return nil, unknownToken(*parent, s.gen.Version)
		}
		info, _ := cat.Get(*parent)
		toks = slices.Clone(info.Children)
	case level >= levels:
		return nil, fmt.Errorf("%w: level: %d is out of range: model %s has levels 0..%d", ErrBadRequest, level, s.gen.Version, levels-1)
	default:
		for _, t := range all {
			if t.Level() == level {
				toks = append(toks, t)
			}
		}
	}
	idx := s.live.Index.Snapshot()
	out := &TokenList{Version: s.gen.Version, Levels: levels, Tokens: make([]TokenView, 0, len(toks))}
	for _, t := range toks {
		out.Tokens = append(out.Tokens, e.tokenView(s, idx, t, sample))
	}
	slices.SortFunc(out.Tokens, func(a, b TokenView) int {
		if c := cmp.Compare(b.Size, a.Size); c != 0 {
			return c
		}
		return cmp.Compare(a.Info.Token.Code(), b.Info.Token.Code())
	})
	return out, nil
}

// TokenPage is a page of the ads in a token's posting ([Engine.TokenMembers]).
type TokenPage struct {
	Version string
	// Total is the number of live ads in the posting; Members are the page,
	// by ascending node index.
	Total   int
	Members []graph.NodeID
	// Next is the node index the next page starts at, when More is set.
	Next uint32
	More bool
}

// TokenMembers returns up to limit ads of token t's posting in the
// generation serving, from node index from on. It loads the served state
// once; ErrNotFound (wrapped) for a token the generation's catalogue does
// not hold, ErrNoGeneration before the first publication.
func (e *Engine) TokenMembers(t index.Token, from uint32, limit int) (*TokenPage, error) {
	s := e.cur.Load()
	if s == nil {
		return nil, ErrNoGeneration
	}
	if !s.gen.hasToken(t) {
		return nil, unknownToken(t, s.gen.Version)
	}
	post := s.live.Index.Snapshot().Postings(t)
	p := &TokenPage{Version: s.gen.Version, Total: int(post.GetCardinality()), Members: []graph.NodeID{}}
	it := post.Iterator()
	it.AdvanceIfNeeded(from)
	for it.HasNext() {
		id := it.Next()
		if len(p.Members) == limit {
			p.Next, p.More = id, true
			break
		}
		p.Members = append(p.Members, graph.NodeID{Type: graph.NodeAd, Idx: id})
	}
	return p, nil
}

// Events returns the total number of events the stored entity ref is the
// source of and up to limit of them from offset on, newest first.
// ErrNotFound for an entity the graph does not hold.
func (e *Engine) Events(ref graph.Ref, offset uint64, limit int) (int, []graph.Edge, error) {
	id, ok := e.store.Lookup(ref)
	if !ok {
		return 0, nil, fmt.Errorf("%w: unknown entity %s", ErrNotFound, ref)
	}
	out := []graph.Edge{}
	n := uint64(0)
	e.store.Neighbors(id, math.MaxInt64, func(ed graph.Edge) bool {
		if !ed.Out {
			return true
		}
		if n >= offset && len(out) < limit {
			out = append(out, ed)
		}
		n++
		return true
	})
	return int(n), out, nil
}

// Similar is one entity near another ([Engine.Similar]).
type Similar struct {
	Ref   graph.Ref
	Score float32
}

// Similar returns the version serving and up to k entities of type target
// nearest to the stored entity ref by dot product of their embeddings, best
// first, ref itself left out: ads from the live index (every ad, exactly),
// other types from the generation's embeddings. It loads the served state
// once; ErrNotFound for an entity the graph does not hold, ErrNoGeneration
// before the first publication.
func (e *Engine) Similar(ctx context.Context, ref graph.Ref, target graph.NodeType, k int) (string, []Similar, error) {
	s := e.cur.Load() // the one load of the served state
	if s == nil {
		return "", nil, ErrNoGeneration
	}
	idx := s.live.Index.Snapshot()
	vec, err := e.vectorIn(ctx, s, idx, ref)
	if err != nil {
		return "", nil, err
	}
	id, _ := e.store.Lookup(ref)
	out := []Similar{}
	if target == graph.NodeAd {
		q := index.Query{Vector: vec, K: k, Exhaustive: true}
		if id.Type == graph.NodeAd {
			q.Exclude = roaring.BitmapOf(id.Idx)
		}
		res, err := idx.Search(ctx, q)
		if err != nil {
			return "", nil, fmt.Errorf("search index: %w", err)
		}
		for _, h := range res.Hits {
			out = append(out, Similar{Ref: e.store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: h.ID}), Score: h.Score})
		}
		return s.gen.Version, out, nil
	}
	if m := s.gen.Embeddings[target]; m != nil {
		top, err := m.TopK(ctx, vec, k, id.Idx, id.Type == target)
		if err != nil {
			return "", nil, err
		}
		for _, sc := range top {
			out = append(out, Similar{Ref: e.store.Ref(graph.NodeID{Type: target, Idx: sc.Idx}), Score: sc.Score})
		}
	}
	return s.gen.Version, out, nil
}

// keywordCentroid is the normalised mean embedding of the keyword hits that
// are indexed ads, nil when there are none.
func keywordCentroid(idx *index.Snapshot, keyword *roaring.Bitmap) []float32 {
	if keyword == nil {
		return nil
	}
	var sum []float32
	it := keyword.Iterator()
	for n := 0; it.HasNext() && n < centroidHits; {
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

// hasToken reports whether g's catalogue holds token t.
func (g *generation) hasToken(t index.Token) bool {
	if g.Catalogue == nil {
		return false
	}
	_, ok := g.Catalogue.Get(t)
	return ok
}
