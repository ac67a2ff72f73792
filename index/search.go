package index

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
)

// SearchOptions tunes candidate generation. Zero fields take defaults.
type SearchOptions struct {
	// CandidateFactor: the token stage widens (coarser levels) until it has
	// at least CandidateFactor*K candidates (default 8).
	CandidateFactor int
	// MinCandidates is a floor on the candidates wanted (default 256).
	MinCandidates int
	// ExhaustiveMax: when the filtered set has at most this many docs it is
	// re-ranked whole, skipping the token stage (default 16384).
	ExhaustiveMax int
	// ResidualFirst starts widening at the residual levels instead of the
	// finest prototype level. Residual postings are sub-clusters; starting
	// there only pays off when fine clusters are much larger than the
	// candidates wanted (measured worse at 100k ads, so off by default).
	ResidualFirst bool
	// ErrorBand > 0: when a query has more than approxMin docs to score,
	// they are first scored approximately, from their first-stage codes
	// (the dot product with their reconstruction by prototype, residual
	// codewords and product code, plus the exact prior and boost), and
	// only the docs whose
	// approximate score is within ErrorBand estimated standard deviations
	// of the approximation's error of the K-th best are scored exactly
	// (4: about 0.2% of the docs' errors exceed it on trained embeddings).
	// 0 (the default) or negative: every doc is scored exactly, as
	// Query.Exhaustive always is. It pays off only when the priors or
	// boosts separate the scores (docs/benchmarks.md, "Approximate first
	// stage").
	ErrorBand float32
	// SplitOver: a posting holding more than SplitOver times the
	// candidates wanted is taken down the hierarchy until enough
	// candidates are found, instead of whole: a prototype level's posting
	// by the next finer level's prototypes under it and then, for the docs
	// those do not hold, by the finest prototypes, a finest-level one by
	// its residual sub-clusters, nearest to the query first, each split
	// again while it is that large (default 4; negative: every posting is
	// taken whole). At a million ads a few prototypes hold tens of
	// thousands of docs, and a query that widens to a coarser level meets
	// postings of a tenth of the catalogue, which it would otherwise
	// re-rank all.
	SplitOver int
	// Workers bounds the goroutines one query's exact re-rank uses when it
	// scores at least 2*parallelMin candidates (a filter allowing thousands
	// of docs re-ranked whole, an Exhaustive query): each scores a share
	// of them into its own top K, and the shares are merged (default
	// runtime.GOMAXPROCS(0); 1: one goroutine). Smaller candidate sets, the
	// token stage's usual case, are scored by the query's own goroutine.
	Workers int
	// WholeShare: where the quantizer has a whole-vector level
	// (QuantizerOptions.WholeCodes), the token stage of an unfiltered
	// search that ranks by similarity alone (Query.PriorWeight 0) takes
	// this share of the candidates wanted from the level's cells of
	// largest dot product with the query (at most 32 of them), the rest
	// from the prototype levels (default 0.5; negative: none from the
	// cells). The prototypes span only the encoder's coordinates: where the
	// model's collaborative factors decide the dot product, the cells find
	// the docs they miss (docs/benchmarks.md). A search that weighs the
	// prior has its prior pass for that.
	WholeShare float32
}

func (o *SearchOptions) applyDefaults() {
	if o.CandidateFactor <= 0 {
		o.CandidateFactor = 8
	}
	if o.MinCandidates <= 0 {
		o.MinCandidates = 256
	}
	if o.ExhaustiveMax <= 0 {
		o.ExhaustiveMax = 16384
	}
	if o.SplitOver == 0 {
		o.SplitOver = 4
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.WholeShare == 0 {
		o.WholeShare = 0.5
	}
}

// parallelMin is the least share of one goroutine in an exact re-rank
// shared between goroutines (SearchOptions.Workers), so a re-rank is
// shared from 2*parallelMin candidates: below that the goroutines cost
// more than they save.
const parallelMin = 4096

// approxMin is the number of docs to score above which a query scores them
// approximately first (SearchOptions.ErrorBand).
const approxMin = 512

// Query is one retrieval request against a [Snapshot].
type Query struct {
	// Vector is the query embedding (a user's), used for the exact
	// re-rank and, when Bag is nil, for the query bag. Required.
	Vector []float32
	// Bag overrides the query bag (default Quantizer.QueryBag(Vector)).
	Bag []WeightedToken
	// K is the number of hits wanted (default 10).
	K int
	// Filter restricts hits to docs matching it; nil matches every doc.
	Filter *Filter
	// Exclude drops these doc ids (for example ads already seen).
	Exclude *roaring.Bitmap
	// Restrict, when set, keeps only these doc ids (keyword ∩ tokens).
	// Search reads it and never modifies it.
	Restrict *roaring.Bitmap
	// Include adds these doc ids to the candidates (keyword ∪ tokens);
	// they still pass Filter and Exclude.
	Include *roaring.Bitmap
	// Exhaustive skips the token stage and re-ranks every doc passing the
	// filters: exact top-K, the reference for recall.
	Exhaustive bool
	// PriorWeight scales the docs' priors in the exact re-rank: a doc
	// scores Dot(Vector, embedding) + PriorWeight*Prior (0: dot product
	// only). Candidate generation ignores it.
	PriorWeight float32
	// NewUser makes the re-rank read the docs' new-user priors
	// (Doc.NewUserPrior) instead of their priors.
	NewUser bool
	// Boost adds a per-query score to docs in the exact re-rank (for
	// example their co-engagement with the user's recent ads); boosted docs
	// join the candidates, and still pass Filter, Restrict and Exclude.
	Boost map[uint32]float32
	// Options overrides the index's SearchOptions where non-zero.
	Options SearchOptions
}

// Hit is one retrieved doc.
type Hit struct {
	ID    uint32  `json:"id"`
	Score float32 `json:"score"`
	// Parts splits Score into the terms of the exact re-rank.
	Parts Parts `json:"parts"`
	// Tokens lists the query tokens whose postings contain the doc (the
	// explanation); empty for docs reached by widening to the whole
	// filtered set or by Include.
	Tokens []Token `json:"tokens,omitempty"`
}

// Parts are the terms of a hit's exact re-rank score, which is their sum
// (Similarity + Prior + Boost, added in that order).
type Parts struct {
	// Similarity is the dot product of the query vector and the doc's
	// embedding.
	Similarity float32 `json:"similarity"`
	// Prior is Query.PriorWeight times the doc's prior (its new-user prior
	// for Query.NewUser), plus, with a non-zero PriorWeight, what a fresh
	// doc gains from the popularity floor (Index.SetPopularityFloor).
	Prior float32 `json:"prior"`
	// Boost is the doc's Query.Boost.
	Boost float32 `json:"boost"`
}

// Stage names how candidates were generated.
type Stage string

// Candidate stages, from most to least selective.
const (
	StageTokens      Stage = "tokens"       // postings of the query tokens
	StageFilteredAll Stage = "filtered-all" // the whole filtered set
)

// Result is the answer to a [Query].
type Result struct {
	Hits []Hit `json:"hits"`
	// Candidates is the number of candidate docs (the passes' docs come on
	// top); Exact is the number of docs whose similarity was computed
	// exactly: every doc scored, or those of the error band
	// (SearchOptions.ErrorBand).
	Candidates int `json:"candidates"`
	Exact      int `json:"exact"`
	// Allowed is the number of live docs passing Filter/Restrict/Exclude.
	Allowed int `json:"allowed"`
	// Stage says how candidates were found; Level is the coarsest token
	// level used by StageTokens.
	Stage Stage `json:"stage"`
	Level int   `json:"level"`
	// CandidatesTime and RerankTime split the search's wall time between
	// candidate generation (filter, postings, widening) and the exact
	// re-rank with explanations, for tracing.
	CandidatesTime time.Duration `json:"candidates_ns"`
	RerankTime     time.Duration `json:"rerank_ns"`
}

// Allowed returns the live docs passing f (nil: all live docs).
func (s *Snapshot) Allowed(f *Filter) (*roaring.Bitmap, error) {
	if f == nil {
		return s.live.Clone(), nil
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f.eval(s), nil
}

// Search runs q: query bag -> union of postings ∩ filter (widening to
// coarser levels, finally to the whole filtered set, while there are fewer
// than the wanted candidates) -> exact dot-product re-rank -> top-K.
// Safe for concurrent use.
func (s *Snapshot) Search(ctx context.Context, q Query) (Result, error) {
	if len(q.Vector) != s.q.dim {
		return Result{}, fmt.Errorf("search: %w: vector dim %d, want %d", ErrBadQuery, len(q.Vector), s.q.dim)
	}
	if q.K <= 0 {
		q.K = 10
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	start := time.Now()
	o := s.search
	if q.Options.CandidateFactor > 0 {
		o.CandidateFactor = q.Options.CandidateFactor
	}
	if q.Options.MinCandidates > 0 {
		o.MinCandidates = q.Options.MinCandidates
	}
	if q.Options.ExhaustiveMax > 0 {
		o.ExhaustiveMax = q.Options.ExhaustiveMax
	}
	if q.Options.ErrorBand != 0 {
		o.ErrorBand = q.Options.ErrorBand
	}
	if q.Options.SplitOver != 0 {
		o.SplitOver = q.Options.SplitOver
	}
	if q.Options.Workers > 0 {
		o.Workers = q.Options.Workers
	}
	if q.Options.WholeShare != 0 {
		o.WholeShare = q.Options.WholeShare
	}
	o.ResidualFirst = o.ResidualFirst || q.Options.ResidualFirst
	// The docs passing the filters are allowed.base minus allowed.minus:
	// excluding a user's few seen ads from every live doc would copy the
	// whole live set per query, so that set is read as it is and the
	// seen ads are taken out of the (far fewer) candidates instead.
	var allowed allowSet
	switch {
	case q.Filter != nil:
		base, err := s.Allowed(q.Filter)
		if err != nil {
			return Result{}, fmt.Errorf("search: %w", err)
		}
		if q.Restrict != nil {
			base.And(q.Restrict)
		}
		if err := ctx.Err(); err != nil { // a filter of many values takes a while
			return Result{}, fmt.Errorf("search: %w", err)
		}
		allowed.base, allowed.minus = base, q.Exclude
	case q.Restrict != nil && s.live.AndCardinality(q.Restrict) == q.Restrict.GetCardinality():
		// Every restricted doc is live (a caller's subset of this
		// snapshot, such as its new ads): read the set as it is instead
		// of copying it.
		allowed.base, allowed.minus = q.Restrict, q.Exclude
	case q.Restrict != nil:
		allowed.base, allowed.minus = roaring.And(s.live, q.Restrict), q.Exclude
	default:
		allowed.base, allowed.minus = s.live, q.Exclude // read only: the snapshot's own live set
	}
	if allowed.minus != nil && !allowed.base.Intersects(allowed.minus) {
		allowed.minus = nil
	}
	res := Result{Allowed: allowed.card()}
	need := max(o.MinCandidates, o.CandidateFactor*q.K)
	bag := q.Bag
	if bag == nil && !q.Exhaustive {
		bag = s.q.QueryBag(q.Vector)
	}
	var cand *roaring.Bitmap
	if q.Exhaustive || res.Allowed <= max(o.ExhaustiveMax, need) {
		cand, res.Stage = allowed.all(), StageFilteredAll
	} else {
		// Similarity alone, unfiltered, with a whole-vector level: the
		// cells give a share of the candidates. A query that weighs the
		// prior has the prior pass find what the prototypes miss; a
		// filtered one (a filter, the new ads) widens its tokens to the
		// allowed docs instead, where the cells would add few of them at
		// the cost of intersecting every cell's posting.
		tokNeed, wholeNeed := need, 0
		if _, ok := s.q.WholeLevel(); ok && q.PriorWeight == 0 && allowed.base == s.live && o.WholeShare > 0 {
			wholeNeed = max(int(float32(need)*min(o.WholeShare, 1)), 1)
			tokNeed = max(need-wholeNeed, 1)
		}
		cand, res.Level = s.tokenCandidates(bag, q.Vector, allowed, tokNeed, o)
		res.Stage = StageTokens
		if cand == nil {
			cand, res.Stage = allowed.all(), StageFilteredAll
		} else if wholeNeed > 0 {
			if whole := s.wholeCandidates(q.Vector, allowed, wholeNeed); whole != nil {
				cand.Or(whole)
			}
		}
	}
	if q.Include != nil {
		cand = roaring.Or(cand, allowed.of(q.Include))
	}
	if len(q.Boost) > 0 && res.Stage != StageFilteredAll {
		boosted := roaring.New()
		for id := range q.Boost {
			boosted.Add(id)
		}
		cand = roaring.Or(cand, allowed.of(boosted))
	}
	res.Candidates = int(cand.GetCardinality())
	rerankStart := time.Now()
	res.CandidatesTime = rerankStart.Sub(start)
	channel := 0
	if q.NewUser {
		channel = 1
	}
	band := max(o.ErrorBand, 0)
	if q.Exhaustive {
		band = 0
	}
	hits, exact, err := s.rerank(ctx, rerankPlan{vec: q.Vector, priorW: q.PriorWeight, channel: channel, boost: q.Boost, k: q.K,
		allowed: allowed, priorPass: res.Stage != StageFilteredAll, band: band, workers: o.Workers}, cand)
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	res.Exact = exact
	// Explanations: a hit's own bag (<= MaxTokens) ∩ the query bag, all
	// hits' tokens in one backing array.
	inBag := newTokenSet(bag)
	n := 0
	for i := range hits {
		m := s.meta.get(int(hits[i].ID))
		for _, t := range m[1 : 1+m[0]] {
			if inBag.has(Token(t)) {
				n++
			}
		}
	}
	toks := make([]Token, 0, n)
	for i := range hits {
		m := s.meta.get(int(hits[i].ID))
		lo := len(toks)
		for _, t := range m[1 : 1+m[0]] {
			if inBag.has(Token(t)) {
				toks = append(toks, Token(t))
			}
		}
		if len(toks) > lo {
			hits[i].Tokens = toks[lo:len(toks):len(toks)]
		}
	}
	res.Hits = hits
	res.RerankTime = time.Since(rerankStart)
	return res, nil
}

// tokenCandidates unions the postings of the bag's tokens, finest level
// first and within a level by decreasing weight, until the union ∩ allowed
// reaches need (widening: more tokens, then coarser levels). A posting
// larger than o.SplitOver times need is taken down the hierarchy, nearest
// to vec first (SearchOptions.SplitOver). It returns nil when the whole
// bag is not enough.
func (s *Snapshot) tokenCandidates(bag []WeightedToken, vec []float32, allowed allowSet, need int, o SearchOptions) (*roaring.Bitmap, int) {
	finest := s.q.NumLevels() - 1
	nLevels := finest + 1
	if o.ResidualFirst {
		nLevels += s.q.opts.ResidualLevels
	}
	byLevel := make([][]WeightedToken, nLevels)
	for _, wt := range bag {
		if l := wt.Token.Level(); l < nLevels {
			byLevel[l] = append(byLevel[l], wt)
		}
	}
	take := newCandidateUnion(allowed, need).take
	var order []int32         // residualOrder(vec), computed at the first split
	var nearestFinest []Token // the finest prototypes nearest to vec first, at the first need
	// descend takes b, the docs of token t (or of t within a coarser
	// token): whole when it is small, else piece by piece down the
	// hierarchy, the finer tokens nearest to vec first (a prototype level's
	// finer prototypes, the finest level's residual sub-clusters). A
	// prototype level's b that its finer prototypes do not cover (its docs'
	// finer tokens descend from other prototypes) is then taken by every
	// finest prototype, nearest first, and whatever none of them held last.
	var descend func(t Token, b *roaring.Bitmap) *roaring.Bitmap
	descend = func(t Token, b *roaring.Bitmap) *roaring.Bitmap {
		if o.SplitOver <= 0 || b.GetCardinality() <= uint64(o.SplitOver)*uint64(need) {
			return take(b)
		}
		var kids []Token
		whole := b == s.postings(t) // b is t's own posting, not a piece of it
		switch l := t.Level(); {
		case l == finest:
			if order == nil {
				order = s.q.residualOrder(vec)
			}
			kids = s.q.children(order, t, nil) // they partition t's docs
		case l < finest:
			kids = s.q.finer(vec, t, nil)
		}
		tried := map[Token]bool{}
		for _, c := range kids {
			tried[c] = true
			cb := s.postings(c)
			if cb == nil {
				continue
			}
			if t.Level() < finest || !whole {
				cb = roaring.And(cb, b)
			}
			if cand := descend(c, cb); cand != nil {
				return cand
			}
		}
		if t.Level() < finest {
			if nearestFinest == nil {
				nearestFinest = s.q.nearest(finest, vec)
			}
			for _, f := range nearestFinest {
				fb := s.postings(f)
				if tried[f] || fb == nil || !fb.Intersects(b) {
					continue
				}
				if cand := descend(f, roaring.And(fb, b)); cand != nil {
					return cand
				}
			}
		}
		return take(b)
	}
	for l := nLevels - 1; l >= 0; l-- {
		toks := byLevel[l]
		slices.SortStableFunc(toks, func(a, b WeightedToken) int { return cmp.Compare(b.Weight, a.Weight) })
		for _, wt := range toks {
			if b := s.postings(wt.Token); b != nil {
				if cand := descend(wt.Token, b); cand != nil {
					return cand, l
				}
			}
		}
	}
	return nil, 0
}

// wholeCandidates unions the postings of the whole-vector cells
// (QuantizerOptions.WholeCodes) of largest dot product with vec, best
// first, until the union ∩ allowed holds need docs or wholeProbe cells are
// read; nil without such cells. The prototype levels miss the docs whose
// score comes from the coordinates past the prototypes' span; these cells
// are cut over every coordinate.
func (s *Snapshot) wholeCandidates(vec []float32, allowed allowSet, need int) *roaring.Bitmap {
	toks := s.q.wholeNearest(vec, wholeProbe)
	if len(toks) == 0 {
		return nil
	}
	u := newCandidateUnion(allowed, need)
	for _, wt := range toks {
		if b := s.postings(wt.Token); b != nil {
			if cand := u.take(b); cand != nil {
				return cand
			}
		}
	}
	return allowed.of(u.acc)
}

// candidateUnion unions postings until the allowed docs among them reach
// need (tokenCandidates, wholeCandidates).
type candidateUnion struct {
	allowed allowSet
	need    int
	acc     *roaring.Bitmap
	check   int // next union size at which to intersect
}

func newCandidateUnion(allowed allowSet, need int) *candidateUnion {
	return &candidateUnion{allowed: allowed, need: need, acc: roaring.New(), check: need}
}

// take adds b to the union and returns the candidates once they reach
// need, else nil.
func (u *candidateUnion) take(b *roaring.Bitmap) *roaring.Bitmap {
	u.acc.Or(b)
	n := int(u.acc.GetCardinality())
	if n < u.check {
		return nil
	}
	cand := u.allowed.of(u.acc)
	got := int(cand.GetCardinality())
	if got >= u.need {
		return cand
	}
	// Extrapolate the union size that would pass the filter.
	u.check = n + 1
	if got > 0 {
		u.check = max(u.check, n*u.need/got*9/10)
	}
	return nil
}

// wholeProbe bounds the whole-vector cells one search reads.
const wholeProbe = 32

// worse reports whether a ranks below b: a lower score, ties by larger id.
func worse(a, b *Hit) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return a.ID > b.ID
}

// bestFirst orders hits best first (slices.SortFunc): by decreasing
// score, ties by increasing id, the order worse defines.
func bestFirst(a, b Hit) int {
	return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.ID, b.ID))
}

// siftDown restores the min-heap order (worst hit at the root) of h below i.
func siftDown(h []Hit, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && worse(&h[r], &h[l]) {
			c = r
		}
		if !worse(&h[c], &h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// siftUp restores the min-heap order of h above i.
func siftUp(h []Hit, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !worse(&h[i], &h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// pushTop offers hit to the min-heap h of the best k hits (worst at the
// root) and returns the heap.
func pushTop(h []Hit, k int, hit Hit) []Hit {
	if len(h) < k {
		h = append(h, hit)
		siftUp(h, len(h)-1)
	} else if worse(&h[0], &hit) {
		h[0] = hit
		siftDown(h, 0)
	}
	return h
}

// floorLift is what a fresh doc's similarity gains when its popularity
// coordinate is read as at least the floor: the dot product of vec with
// the unit embedding e whose popularity coordinate is raised to the floor
// and which is re-normalised, minus sim = Dot(vec, e). It can be negative
// for a query that weighs popularity below zero; a unit result keeps the
// prior pass's similarity bound.
func (s *Snapshot) floorLift(vec, e []float32, sim float32) float32 {
	a, f := s.popAxis, s.popFloor
	x := e[a]
	if x >= f {
		return 0
	}
	norm := float32(math.Sqrt(max(float64(1-x*x+f*f), 1e-12)))
	return (sim+vec[a]*(f-x))/norm - sim
}

// hit completes the hit of doc id whose similarity part is sim: priorW
// times its prior of channel (0: Doc.Prior, 1: Doc.NewUserPrior; with
// priorW != 0 a fresh doc's prior part also takes its floorLift) plus its
// boost. e is the doc's embedding, nil to read it only where needed.
func (s *Snapshot) hit(id uint32, sim float32, e, vec []float32, priorW float32, channel int, boost map[uint32]float32) Hit {
	parts := Parts{Similarity: sim, Boost: boost[id]}
	sc := sim
	if priorW != 0 {
		if p := s.prior.at(int(id)); p != nil {
			parts.Prior = priorW * p[channel]
		}
		if s.popAxis >= 0 && s.fresh.Contains(id) {
			if e == nil {
				e = s.emb.at(int(id))
			}
			parts.Prior += s.floorLift(vec, e, sim)
		}
		sc += parts.Prior
	}
	sc += parts.Boost
	return Hit{ID: id, Score: sc, Parts: parts}
}

// rerankPlan is what a re-rank scores with and keeps (rerank, rerankBand).
type rerankPlan struct {
	vec     []float32          // the query vector
	priorW  float32            // the prior's weight
	channel int                // the prior's channel (Query.Channel)
	boost   map[uint32]float32 // co-engagement boosts by doc
	k       int                // hits to keep
	allowed allowSet           // the docs a hit may be
	// priorPass also scores allowed docs outside the candidates: those
	// the prior could lift into the top k, or the most popular ones.
	priorPass bool
	band      float32 // the error band's width (SearchOptions.ErrorBand); 0: exact scores only
	workers   int     // goroutines an exact scan may use
}

// rerank scores every candidate by dot product plus its prior and boost
// part (see hit) and keeps the top p.k, best first (ties by smaller id).
// With p.priorPass, allowed docs outside cand are scored too: with a prior
// weight those whose prior could lift them into the top k (see priorPass),
// otherwise the most popular ones (see popularityPass). With p.band > 0,
// when there are more than approxMin docs to score, see rerankBand;
// otherwise at least 2*parallelMin candidates are shared between at most
// p.workers goroutines (see scoreShared). It returns the hits and the number
// of docs scored exactly.
func (s *Snapshot) rerank(ctx context.Context, p rerankPlan, cand *roaring.Bitmap) ([]Hit, int, error) {
	vec, priorW, channel, boost, k := p.vec, p.priorW, p.channel, p.boost, p.k
	allowed, withPriorPass := p.allowed, p.priorPass
	exact := func(id uint32) (Hit, bool) {
		e := s.emb.at(int(id))
		if e == nil {
			return Hit{}, false
		}
		return s.hit(id, Dot(vec, e), e, vec, priorW, channel, boost), true
	}
	toScore := int(cand.GetCardinality())
	if withPriorPass {
		toScore += priorTop
	}
	var h []Hit
	var n int
	if p.band > 0 && s.resShare != nil && toScore > max(approxMin, k) {
		var err error
		if h, n, err = s.rerankBand(ctx, p, cand, exact); err != nil {
			return nil, 0, err
		}
	} else {
		var err error
		if h, n, err = scoreShared(ctx, cand, k, p.workers, exact); err != nil {
			return nil, 0, err
		}
		if withPriorPass {
			// A doc outside cand has no boost (boosted docs are candidates)
			// and a similarity of at most |vec| (doc embeddings are unit
			// vectors).
			bound := float32(math.Sqrt(float64(Dot(vec, vec)))) * 1.001
			var m int
			if priorW > 0 {
				h, m = s.priorPass(h, k, priorW, channel, bound, cand, allowed, exact)
			} else {
				// Without the prior pass, which scores the high-prior docs,
				// that is the popular ones, the popularity pass does.
				h, m = s.popularityPass(h, k, vec, cand, allowed, exact)
			}
			n += m
		}
	}
	slices.SortFunc(h, bestFirst)
	return h, n, nil
}

// scoreShared scores every doc of cand with exact into a top-k heap and
// returns it (unsorted) and the number of docs it scored. With at least
// 2*parallelMin docs and workers > 1, the docs are split into id ranges of
// at least parallelMin, one per goroutine (at most workers), each keeping
// its own top k, merged at the end: the scan of a large filtered set is
// bound by memory latency (each doc's embedding is a cache miss), which
// goroutines on other cores overlap. The hits are those of one goroutine:
// each doc's score is computed alike and ties break by id.
func scoreShared(ctx context.Context, cand *roaring.Bitmap, k, workers int, exact func(id uint32) (Hit, bool)) ([]Hit, int, error) {
	total := int(cand.GetCardinality())
	parts := min(workers, total/parallelMin)
	if parts < 2 {
		return scoreRange(ctx, cand.Iterator(), total, k, exact)
	}
	type share struct {
		h   []Hit
		n   int
		err error
	}
	shares := make([]share, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo := total * p / parts
		it := cand.Iterator()
		if lo > 0 {
			start, err := cand.Select(uint32(lo))
			if err != nil {
				return nil, 0, err
			}
			it.AdvanceIfNeeded(start)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sh := &shares[p]
			sh.h, sh.n, sh.err = scoreRange(ctx, it, total*(p+1)/parts-lo, k, exact)
		}()
	}
	wg.Wait()
	h := make([]Hit, 0, k)
	n := 0
	for _, sh := range shares {
		if sh.err != nil {
			return nil, 0, sh.err
		}
		n += sh.n
		for _, hit := range sh.h {
			h = pushTop(h, k, hit)
		}
	}
	return h, n, nil
}

// scoreRange scores the next count docs of it with exact into a top-k
// heap; it returns the heap and the number of docs it read.
func scoreRange(ctx context.Context, it roaring.IntPeekable, count, k int, exact func(id uint32) (Hit, bool)) ([]Hit, int, error) {
	h := make([]Hit, 0, k)
	n := 0
	for ; n < count && it.HasNext(); n++ {
		if (n+1)%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
		}
		if hit, ok := exact(it.Next()); ok {
			h = pushTop(h, k, hit)
		}
	}
	return h, n, nil
}

// approxHit is a doc's approximate score and the half-width of the band
// its exact score is taken to lie in.
type approxHit struct {
	score, half float32
	id          uint32
}

// rerankBand is rerank's two-stage form. Every candidate, and with
// priorPass every allowed doc outside cand of the pass's list (the
// highest-prior docs with priorW > 0, else the most popular ones unless
// the query's popularity coordinate is negative), is scored with its
// approximate similarity (the query's dot product with the doc's
// reconstruction, adcTable.sim of its path code plus productTable.sim of
// its product code) plus its exact prior and boost part. The
// approximation's error is q·r for what the doc's codes leave, r;
// its standard deviation is estimated as |r| times the square root of
// sum_i q_i^2 resShare_i, and a doc's exact score is taken to lie within
// band of those of its approximate one. The k-th best lower end of the
// bands bounds the k-th best exact score from below, so only the docs
// whose upper end reaches it are scored exactly, and the top k of them
// kept (unsorted). It returns them and the number of docs scored exactly.
func (s *Snapshot) rerankBand(ctx context.Context, plan rerankPlan, cand *roaring.Bitmap, exact func(id uint32) (Hit, bool)) ([]Hit, int, error) {
	vec, priorW, channel, boost, k, band := plan.vec, plan.priorW, plan.channel, plan.boost, plan.k, plan.band
	t := s.q.adc(vec)
	p := s.product()
	var pt productTable
	if p != nil {
		pt = p.table(vec)
	}
	var spread float64
	for i, x := range vec {
		spread += float64(x) * float64(x) * float64(s.resShare[i])
	}
	scale := band * float32(math.Sqrt(spread))
	var pass *ranked
	if plan.priorPass {
		if priorW > 0 {
			pass = s.byPrior(channel)
		} else {
			pass = s.popularityList(vec)
		}
	}
	n := int(cand.GetCardinality())
	if pass != nil {
		n += len(pass.ids)
	}
	list := make([]approxHit, 0, n)
	add := func(id uint32) {
		if c := s.code.at(int(id)); c != nil {
			sim := t.sim(c[0])
			if p != nil {
				sim += pt.sim(s.pq.at(int(id)))
			}
			list = append(list, approxHit{s.hit(id, sim, nil, vec, priorW, channel, boost).Score, scale * math.Float32frombits(c[1]), id})
		}
	}
	it := cand.Iterator()
	for i := 1; it.HasNext(); i++ {
		if i%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
		}
		add(it.Next())
	}
	if pass != nil {
		outside := pass.outside(cand, plan.allowed)
		for i, id := range pass.ids {
			if outside[i] {
				add(id)
			}
		}
	}
	// The k-th best lower end.
	lower := make([]float32, len(list))
	for i, a := range list {
		lower[i] = a.score - a.half
	}
	floor := float32(math.Inf(-1))
	if len(lower) >= k {
		floor = kthLargest(lower, k)
	}
	h := make([]Hit, 0, k)
	scored := 0
	for _, a := range list {
		if a.score+a.half < floor {
			continue
		}
		if hit, ok := exact(a.id); ok {
			h = pushTop(h, k, hit)
			scored++
		}
	}
	return h, scored, nil
}

// kthLargest returns the k-th largest of xs (1 <= k <= len(xs)), which it
// reorders: Hoare's selection, expected linear time.
func kthLargest(xs []float32, k int) float32 {
	lo, hi, want := 0, len(xs)-1, k-1
	for lo < hi {
		// Median of three as the pivot, which keeps sorted runs linear.
		mid := lo + (hi-lo)/2
		a, b, c := xs[lo], xs[mid], xs[hi]
		p := max(min(a, b), min(max(a, b), c))
		i, j := lo, hi
		for i <= j {
			for xs[i] > p {
				i++
			}
			for xs[j] < p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		// xs[lo..j] >= p >= xs[i..hi], and xs[j+1..i-1] == p.
		switch {
		case want <= j:
			hi = j
		case want >= i:
			lo = i
		default:
			return p
		}
	}
	return xs[want]
}

// tokenSet is the set of a query bag's tokens, for the explanations' one
// membership test per token of each hit: open addressing in a power-of-two
// table at most half full, cheaper than a map for these few keys.
type tokenSet struct {
	slots []uint64 // 1<<32 | token; 0: empty
	shift uint
}

func newTokenSet(bag []WeightedToken) tokenSet {
	bits := uint(4)
	for 1<<bits < 2*len(bag) {
		bits++
	}
	ts := tokenSet{slots: make([]uint64, 1<<bits), shift: 32 - bits}
	for _, wt := range bag {
		for i := ts.home(wt.Token); ; i = (i + 1) & uint32(len(ts.slots)-1) {
			if v := ts.slots[i]; v == 0 || Token(v) == wt.Token {
				ts.slots[i] = 1<<32 | uint64(wt.Token)
				break
			}
		}
	}
	return ts
}

// home is t's first slot (Fibonacci hashing).
func (ts tokenSet) home(t Token) uint32 { return uint32(t) * 0x9E3779B1 >> ts.shift }

func (ts tokenSet) has(t Token) bool {
	for i := ts.home(t); ; i = (i + 1) & uint32(len(ts.slots)-1) {
		switch v := ts.slots[i]; {
		case v == 0:
			return false
		case Token(v) == t:
			return true
		}
	}
}

// allowSet is the docs a query allows: base minus minus (nil: nothing
// taken out). Both bitmaps are read only.
type allowSet struct {
	base, minus *roaring.Bitmap
}

func (a allowSet) card() int {
	n := a.base.GetCardinality()
	if a.minus != nil {
		n -= a.base.AndCardinality(a.minus)
	}
	return int(n)
}

// all returns the allowed docs as one bitmap (base itself when nothing is
// taken out: read only).
func (a allowSet) all() *roaring.Bitmap {
	if a.minus == nil {
		return a.base
	}
	return roaring.AndNot(a.base, a.minus)
}

// of returns a new bitmap of the docs of b that are allowed.
func (a allowSet) of(b *roaring.Bitmap) *roaring.Bitmap {
	out := roaring.And(b, a.base)
	if a.minus != nil {
		out.AndNot(a.minus)
	}
	return out
}
