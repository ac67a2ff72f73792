package index

import (
	"cmp"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

func TestTokenSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		bag  []Token
	}{
		{"empty", nil},
		{"zero token", []Token{0}},
		{"extremes", []Token{0, 1, MaxTokenCode, mustToken(MaxTokenLevels-1, MaxTokenCode)}},
		{"duplicates", []Token{mustToken(1, 5), mustToken(1, 5), mustToken(2, 5)}},
		{"colliding codes", func() []Token {
			var b []Token
			for l := range 3 {
				for c := range 40 {
					b = append(b, mustToken(l, c*16))
				}
			}
			return b
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bag := make([]WeightedToken, len(tc.bag))
			want := map[Token]bool{}
			for i, tok := range tc.bag {
				bag[i] = WeightedToken{Token: tok, Weight: 1}
				want[tok] = true
			}
			ts := newTokenSet(bag)
			probes := append([]Token{}, tc.bag...)
			for range 2000 {
				probes = append(probes, mustToken(rng.IntN(4), rng.IntN(700)))
			}
			for _, p := range probes {
				if got := ts.has(p); got != want[p] {
					t.Fatalf("has(%v) = %v, want %v", p, got, want[p])
				}
			}
		})
	}
}

func TestSqDist(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 3, 4, 7, 64, 65} {
		a, b := make([]float32, n), make([]float32, n)
		var want float64
		for i := range a {
			a[i], b[i] = rng.Float32()*2-1, rng.Float32()*2-1
			d := float64(a[i]) - float64(b[i])
			want += d * d
		}
		if got := sqDist(a, b); math.Abs(float64(got)-want) > 1e-5*max(1, want) {
			t.Errorf("n=%d: sqDist = %v, want %v", n, got, want)
		}
	}
}

// TestSearchExclude checks that Query.Exclude, which is taken out of the
// candidates rather than out of a copy of the live set, answers exactly
// as restricting the search to the live docs minus the excluded ones, at
// every stage and with boosted and included docs among the excluded.
func TestSearchExclude(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 3000, 2)
	snap := ix.Snapshot()
	live := snap.Allowed
	all, err := live(nil)
	if err != nil {
		t.Fatal(err)
	}
	for qi, v := range s.queries(8, 5) {
		first, err := snap.Search(ctx, Query{Vector: v, K: 30, Exhaustive: true})
		if err != nil {
			t.Fatal(err)
		}
		ex := roaring.New()
		for i, h := range first.Hits {
			if i%3 == 0 {
				ex.Add(h.ID)
			}
		}
		ex.Add(1 << 30) // not a doc
		boost := map[uint32]float32{first.Hits[0].ID: 5, first.Hits[1].ID: 4, 7: 0.5}
		include := roaring.BitmapOf(first.Hits[3].ID, 11)
		for _, tc := range []struct {
			name string
			q    Query
		}{
			{"tokens", Query{Options: SearchOptions{ExhaustiveMax: 1, MinCandidates: 50}}},
			{"tokens, prior, boost, include", Query{PriorWeight: 1, Boost: boost, Include: include,
				Options: SearchOptions{ExhaustiveMax: 1, MinCandidates: 50}}},
			{"filtered-all", Query{PriorWeight: 1, Boost: boost}},
			{"tokens, filter", Query{Filter: Eq(AttrStatus, "active"), Boost: boost, Options: SearchOptions{ExhaustiveMax: 1, MinCandidates: 50}}},
			{"exhaustive", Query{Exhaustive: true, Include: include}},
		} {
			q := tc.q
			q.Vector, q.K = v, 20
			want := q
			want.Restrict = roaring.AndNot(all, ex)
			q.Exclude = ex
			got, err := snap.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := snap.Search(ctx, want)
			if err != nil {
				t.Fatal(err)
			}
			if got.Allowed != exp.Allowed || got.Candidates != exp.Candidates || got.Stage != exp.Stage ||
				!slices.EqualFunc(got.Hits, exp.Hits, func(a, b Hit) bool { return a.ID == b.ID && a.Score == b.Score }) {
				t.Errorf("query %d, %s: Exclude gave allowed %d, candidates %d, stage %s, hits %v; Restrict gave %d, %d, %s, %v",
					qi, tc.name, got.Allowed, got.Candidates, got.Stage, ids(got.Hits), exp.Allowed, exp.Candidates, exp.Stage, ids(exp.Hits))
			}
			if len(got.Hits) != q.K || strings.HasPrefix(tc.name, "tokens") != (got.Stage == StageTokens) {
				t.Errorf("query %d, %s: %d hits at stage %s", qi, tc.name, len(got.Hits), got.Stage)
			}
			for _, h := range got.Hits {
				if ex.Contains(h.ID) {
					t.Errorf("query %d, %s: excluded doc %d returned", qi, tc.name, h.ID)
				}
			}
		}
	}
}

func ids(hits []Hit) []uint32 {
	out := make([]uint32, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

// TestPopularityPass checks the token stage's popularity pass: with a
// popularity axis and no prior weight, the docs with the largest
// coordinate are scored for a query whose coordinate is positive or zero
// even when the token candidates lack them, within the filters; without an
// axis, or for a negative coordinate, they are not; with a prior weight the prior
// pass scores the high-prior docs instead.
func TestPopularityPass(t *testing.T) {
	ctx := context.Background()
	ix, _ := testIndex(t, 2000, 2)
	snap := ix.Snapshot()
	dim := len(mustEmbedding(t, snap, 0))
	axis := dim - 1
	// The query weighs popularity only: its exact top K are the docs with
	// the largest coordinate.
	up := make([]float32, dim)
	up[axis] = 1
	down := slices.Clone(up)
	down[axis] = -1
	byCoord := func(sign float32, excluded *roaring.Bitmap, k int) []uint32 {
		var ids []uint32
		it := snap.Live().Iterator()
		for it.HasNext() {
			if id := it.Next(); !excluded.Contains(id) {
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, func(a, b uint32) int {
			ea, eb := mustEmbedding(t, snap, a), mustEmbedding(t, snap, b)
			return cmp.Or(cmp.Compare(sign*eb[axis], sign*ea[axis]), cmp.Compare(a, b))
		})
		return ids[:k]
	}
	top := byCoord(1, roaring.New(), 30)
	// High priors on ten docs that are not popular: the prior pass scores
	// those.
	hiPrior := byCoord(-1, roaring.New(), 60)[50:]
	priors := make([]float32, len(hiPrior))
	for i := range priors {
		priors[i] = 10
	}
	if err := ix.SetPriors(ctx, hiPrior, priors, priors, nil); err != nil {
		t.Fatal(err)
	}
	excluded := roaring.BitmapOf(top[0], top[5])
	// A query that weighs popularity at 0 and points at a popular doc's
	// other coordinates: the pass still scores that doc.
	zero := slices.Clone(mustEmbedding(t, snap, top[1]))
	zero[axis] = 0
	// Candidates: the 50 least popular docs only.
	cand := roaring.BitmapOf(byCoord(-1, roaring.New(), 50)...)
	for _, tc := range []struct {
		name   string
		axis   int
		vec    []float32
		priorW float32
		want   []uint32 // the hits exactly; nil: none of top outside the candidates
		some   []uint32 // among the hits
	}{
		{"popularity pass", axis, up, 0, byCoord(1, excluded, 20), nil},
		{"prior pass instead", axis, up, 1, nil, hiPrior},
		{"zero coordinate", axis, zero, 0, nil, []uint32{top[1]}},
		{"negative coordinate", axis, down, 0, nil, nil},
		{"no axis", -1, up, 0, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ix.SetPopularityFloor(ctx, tc.axis, 0); err != nil {
				t.Fatal(err)
			}
			s := ix.Snapshot()
			hits, _, err := s.rerank(ctx, rerankPlan{vec: tc.vec, priorW: tc.priorW, k: 20, allowed: allowSet{base: s.Live(), minus: excluded},
				priorPass: true, workers: 1}, cand)
			if err != nil {
				t.Fatal(err)
			}
			got := ids(hits)
			seen := map[uint32]bool{}
			for _, id := range got {
				if seen[id] || excluded.Contains(id) {
					t.Fatalf("hits %v: doc %d twice or excluded", got, id)
				}
				seen[id] = true
			}
			if tc.some != nil {
				for _, id := range tc.some {
					if !seen[id] {
						t.Errorf("hits %v lack doc %d", got, id)
					}
				}
				return
			}
			if tc.want != nil {
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tc.want))
				if !slices.Equal(got, want) {
					t.Errorf("hits %v, want the most popular allowed docs %v", got, want)
				}
				return
			}
			for _, id := range got {
				if slices.Contains(top, id) && !cand.Contains(id) {
					t.Errorf("doc %d of the most popular scored outside the candidates", id)
				}
			}
		})
	}
}

func mustEmbedding(t *testing.T, s *Snapshot, id uint32) []float32 {
	t.Helper()
	e, ok := s.Embedding(id)
	if !ok {
		t.Fatalf("doc %d has no embedding", id)
	}
	return e
}

// TestTopLive checks the bounded selection of the prior and popularity
// passes against a full sort, ties included.
func TestTopLive(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name    string
		docs, n int
		levels  int // distinct values (ties when small)
	}{
		{"empty", 0, 4, 10}, {"fewer than n", 3, 8, 100}, {"exactly n", 8, 8, 100},
		{"many", 5000, 64, 1 << 20}, {"ties", 3000, 100, 7}, {"n 1", 50, 1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := roaring.New()
			val := map[uint32]float32{}
			for len(val) < tc.docs {
				id := rng.Uint32N(1 << 24)
				live.Add(id)
				val[id] = float32(rng.IntN(tc.levels))
			}
			ids := topLive(live, tc.n, func(id uint32) float32 { return val[id] })
			all := live.ToArray()
			slices.SortFunc(all, func(a, b uint32) int { return cmp.Or(cmp.Compare(val[b], val[a]), cmp.Compare(a, b)) })
			if k := min(tc.n, len(all)); !slices.Equal(ids, all[:k]) {
				t.Errorf("topLive = %v, want %v", ids, all[:k])
			}
		})
	}
}

// TestChildren checks that Quantizer.residualOrder and children list a
// finest prototype's residual sub-clusters best first for the query, and
// that their postings partition the prototype's, which tokenCandidates'
// split relies on.
func TestChildren(t *testing.T) {
	ix, s := testIndex(t, 3000, 2)
	snap := ix.Snapshot()
	q := snap.Quantizer()
	L, R := q.NumLevels(), q.Options().ResidualCodes
	cb := q.Residual()[0]
	for i, v := range s.queries(5, 4) {
		for c := range q.LevelSize(L - 1) {
			tok := mustToken(L-1, c)
			kids := q.children(q.residualOrder(v), tok, nil)
			if len(kids) != R {
				t.Fatalf("query %d, %v: %d children, want %d", i, tok, len(kids), R)
			}
			union := roaring.New()
			for j, k := range kids {
				if p, ok := q.Parent(k); !ok || p != tok {
					t.Fatalf("child %v of %v has parent %v, %v", k, tok, p, ok)
				}
				if j > 0 && Dot(v, cb[kids[j-1].Code()%R]) < Dot(v, cb[k.Code()%R]) {
					t.Fatalf("query %d, %v: children not best first: %v", i, tok, kids)
				}
				kp := snap.Postings(k)
				if union.Intersects(kp) {
					t.Fatalf("%v: postings of its children overlap", tok)
				}
				union.Or(kp)
			}
			if !union.Equals(snap.Postings(tok)) {
				t.Fatalf("%v: children's postings hold %d docs, the prototype's %d", tok, union.GetCardinality(), snap.Postings(tok).GetCardinality())
			}
		}
	}
	v := s.queries(1, 5)[0]
	for _, tc := range []struct {
		name string
		tok  Token
		vec  []float32
	}{
		{"coarser level", mustToken(L-2, 0), v},
		{"residual level", mustToken(L, 0), v},
		{"code out of range", mustToken(L-1, q.LevelSize(L-1)), v},
		{"wrong dimension", mustToken(L-1, 0), v[:3]},
	} {
		if got := q.children(q.residualOrder(tc.vec), tc.tok, nil); got != nil {
			t.Errorf("%s: children = %v, want nil", tc.name, got)
		}
	}
}

// TestSplitOver checks that a finest posting larger than SplitOver times
// the candidates wanted is taken by sub-clusters, best first: fewer
// candidates, at least the wanted ones, the best sub-cluster of the
// query's best prototype among them.
func TestSplitOver(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 6000, 3)
	snap := ix.Snapshot()
	q := snap.Quantizer()
	finest := q.NumLevels() - 1
	const k, factor = 10, 2
	base := SearchOptions{ExhaustiveMax: 1, MinCandidates: 1, CandidateFactor: factor}
	var whole, split, splitRecall, wholeRecall float64
	qs := s.queries(40, 7)
	for i, v := range qs {
		want, err := snap.Search(ctx, Query{Vector: v, K: k, Exhaustive: true})
		if err != nil {
			t.Fatal(err)
		}
		cands, res := splitSearches(t, snap, v, q.QueryBag(v), k, base)
		whole += float64(res[-1].Candidates)
		split += float64(res[2].Candidates)
		wholeRecall += recall(res[-1].Hits, want.Hits)
		splitRecall += recall(res[2].Hits, want.Hits)
		if res[2].Candidates > res[-1].Candidates || res[2].Candidates < factor*k {
			t.Errorf("query %d: split took %d candidates, whole postings %d, wanted %d", i, res[2].Candidates, res[-1].Candidates, factor*k)
		}
		// The best finest token of the bag: when its posting is split, its
		// best sub-cluster is taken first.
		var best WeightedToken
		for _, wt := range q.QueryBag(v) {
			if wt.Token.Level() == finest && (best.Weight == 0 || wt.Weight > best.Weight) {
				best = wt
			}
		}
		if p := snap.Postings(best.Token); p.GetCardinality() > 2*factor*k {
			kid := snap.Postings(q.children(q.residualOrder(v), best.Token, nil)[0])
			if !kid.IsEmpty() && !kid.Intersects(cands[2]) {
				t.Errorf("query %d: the best sub-cluster of %v (%d of its %d docs) is not among the candidates", i, best.Token, kid.GetCardinality(), p.GetCardinality())
			}
			if cands[2].Equals(cands[-1]) {
				t.Errorf("query %d: %v holds %d docs and was not split", i, best.Token, p.GetCardinality())
			}
		}
	}
	n := float64(len(qs))
	t.Logf("candidates whole %.0f, split %.0f; recall@10 whole %.3f, split %.3f", whole/n, split/n, wholeRecall/n, splitRecall/n)
	if split >= whole*0.8 {
		t.Errorf("split candidates %.0f, whole %.0f: want fewer", split/n, whole/n)
	}
}

// splitSearches searches snap for v with bag and base at SplitOver -1
// (postings taken whole) and 2, and checks that each search reads the
// candidates tokenCandidates takes, at the token stage; it returns each
// setting's candidates and result.
func splitSearches(t *testing.T, snap *Snapshot, v []float32, bag []WeightedToken, k int, base SearchOptions) (map[int]*roaring.Bitmap, map[int]Result) {
	t.Helper()
	cands, res := map[int]*roaring.Bitmap{}, map[int]Result{}
	for _, over := range []int{-1, 2} {
		o := base
		o.SplitOver = over
		if cands[over], _ = snap.tokenCandidates(bag, v, allowSet{base: snap.live}, base.CandidateFactor*k, o); cands[over] == nil {
			t.Fatalf("SplitOver %d: no candidates", over)
		}
		r, err := snap.Search(context.Background(), Query{Vector: v, Bag: bag, K: k, Options: o})
		if err != nil {
			t.Fatal(err)
		}
		if r.Stage != StageTokens || int(cands[over].GetCardinality()) != r.Candidates {
			t.Fatalf("SplitOver %d: Search read %d candidates at stage %v, want %d at the token stage", over, r.Candidates, r.Stage, cands[over].GetCardinality())
		}
		res[over] = r
	}
	return cands, res
}

// TestSplitCoarse checks that a posting of a level above the finest larger
// than SplitOver times the candidates wanted is taken down the hierarchy,
// its finer prototypes nearest to the query first: a query whose bag holds
// only the coarser levels' tokens gets fewer candidates, at least those
// wanted, its best finer prototype's docs among them; and that finer
// lists each finer prototype under its parent, nearest first.
func TestSplitCoarse(t *testing.T) {
	ix, s := testIndex(t, 6000, 3)
	snap := ix.Snapshot()
	q := snap.Quantizer()
	finest := q.NumLevels() - 1
	if finest < 1 {
		t.Fatalf("%d levels, want 2 or more", finest+1)
	}
	qs := s.queries(20, 11)
	for l := range finest {
		seen := map[Token]bool{}
		for c := range q.LevelSize(l) {
			tok := mustToken(l, c)
			kids := q.finer(qs[0], tok, nil)
			for j, k := range kids {
				if p, ok := q.Parent(k); !ok || p != tok || seen[k] {
					t.Fatalf("finer(%v)[%d] = %v with parent %v (%v), seen before %v", tok, j, k, p, ok, seen[k])
				}
				seen[k] = true
				if j > 0 && Dot(qs[0], q.proto(l+1, kids[j-1].Code())) < Dot(qs[0], q.proto(l+1, k.Code())) {
					t.Fatalf("finer(%v) not nearest first: %v", tok, kids)
				}
			}
		}
		if len(seen) != q.LevelSize(l+1) {
			t.Errorf("level %d: finer lists %d of the %d finer prototypes", l, len(seen), q.LevelSize(l+1))
		}
	}
	if got := q.finer(qs[0], mustToken(finest, 0), nil); got != nil {
		t.Errorf("finer of a finest token = %v, want nil", got)
	}
	const k, factor = 10, 2
	base := SearchOptions{ExhaustiveMax: 1, MinCandidates: 1, CandidateFactor: factor}
	var whole, split float64
	for i, v := range qs {
		var bag []WeightedToken // the coarsest level's tokens alone
		for _, wt := range q.QueryBag(v) {
			if wt.Token.Level() == 0 {
				bag = append(bag, wt)
			}
		}
		cands, _ := splitSearches(t, snap, v, bag, k, base)
		n, nw := cands[2].GetCardinality(), cands[-1].GetCardinality()
		whole, split = whole+float64(nw), split+float64(n)
		if n > nw || n < factor*k {
			t.Errorf("query %d: split took %d candidates, whole postings %d, wanted %d", i, n, nw, factor*k)
		}
		best := bag[0]
		for _, wt := range bag {
			if wt.Weight > best.Weight {
				best = wt
			}
		}
		if p := snap.Postings(best.Token); p.GetCardinality() > 2*factor*k {
			kid := roaring.And(snap.Postings(q.finer(v, best.Token, nil)[0]), p)
			if !kid.IsEmpty() && !kid.Intersects(cands[2]) {
				t.Errorf("query %d: the nearest finer prototype of %v is not among the candidates", i, best.Token)
			}
		}
	}
	// Any large posting of a level above the finest, asked for alone, is
	// taken in pieces, never whole, even where its finer prototypes hold
	// few of its docs (then the finest prototypes nearest to the query
	// take the rest).
	o := base
	o.SplitOver = 2
	for l := range finest {
		for c := range q.LevelSize(l) {
			tok := mustToken(l, c)
			p := snap.Postings(tok)
			if p.GetCardinality() <= 4*factor*k*2 {
				continue
			}
			for i, v := range qs[:5] {
				cand, _ := snap.tokenCandidates([]WeightedToken{{Token: tok, Weight: 1}}, v, allowSet{base: snap.live}, factor*k, o)
				if cand == nil || cand.GetCardinality() >= p.GetCardinality() || cand.GetCardinality() < factor*k {
					n := uint64(0)
					if cand != nil {
						n = cand.GetCardinality()
					}
					t.Errorf("%v alone (%d docs), query %d: %d candidates, want at least %d and fewer than the posting", tok, p.GetCardinality(), i, n, factor*k)
				}
			}
		}
	}
	t.Logf("candidates from the coarsest level: whole %.0f, split %.0f", whole/float64(len(qs)), split/float64(len(qs)))
	if split >= whole*0.5 {
		t.Errorf("split candidates %.0f, whole %.0f: want far fewer", split/float64(len(qs)), whole/float64(len(qs)))
	}
}

// TestWorkers checks that an exact re-rank shared between goroutines
// (SearchOptions.Workers) answers as one goroutine does: the same hits,
// scores and counts, for exhaustive queries and whole filtered sets, with
// priors, boosts and excluded docs, with shares of unequal size and with
// a cancelled context.
func TestWorkers(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 5*parallelMin+123, 4)
	snap := ix.Snapshot()
	n := int(snap.Live().GetCardinality())
	rng := rand.New(rand.NewPCG(4, 5))
	docs := make([]uint32, 0, n)
	priors := make([]float32, 0, n)
	for it := snap.Live().Iterator(); it.HasNext(); {
		docs = append(docs, it.Next())
		priors = append(priors, rng.Float32())
	}
	if err := ix.SetPriors(ctx, docs, priors, priors, nil); err != nil {
		t.Fatal(err)
	}
	snap = ix.Snapshot()
	excluded := roaring.New()
	boost := map[uint32]float32{}
	for range 200 {
		excluded.Add(docs[rng.IntN(len(docs))])
		boost[docs[rng.IntN(len(docs))]] = rng.Float32()
	}
	for _, tc := range []struct {
		name    string
		q       Query
		workers []int
	}{
		{"exhaustive", Query{Exhaustive: true}, []int{2, 3, 5, 64}},
		{"exhaustive, prior and boost", Query{Exhaustive: true, PriorWeight: 0.5, Boost: boost, Exclude: excluded}, []int{2, 4}},
		{"filtered set re-ranked whole", Query{PriorWeight: 1, Exclude: excluded, Options: SearchOptions{ExhaustiveMax: 1 << 20}}, []int{2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, v := range s.queries(5, 9) {
				q := tc.q
				q.Vector, q.K = v, 50
				q.Options.Workers = 1
				want, err := snap.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if want.Exact < 2*parallelMin {
					t.Fatalf("query %d scored %d docs: too few to share", i, want.Exact)
				}
				for _, w := range tc.workers {
					q.Options.Workers = w
					got, err := snap.Search(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.EqualFunc(got.Hits, want.Hits, func(a, b Hit) bool { return a.ID == b.ID && a.Score == b.Score && a.Parts == b.Parts }) ||
						got.Exact != want.Exact || got.Candidates != want.Candidates {
						t.Fatalf("query %d, %d workers: hits %v (%d exact), one goroutine %v (%d exact)", i, w, ids(got.Hits), got.Exact, ids(want.Hits), want.Exact)
					}
				}
			}
		})
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	big := roaring.New()
	big.AddRange(0, 1<<18) // more than 65536 docs a share: the context is read
	if _, _, err := scoreShared(cancelled, big, 10, 2, func(id uint32) (Hit, bool) { return Hit{ID: id}, true }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err %v, want context.Canceled", err)
	}
}

// TestSplitOrphan checks that a prototype's large posting is taken in
// pieces even when no finer prototype descends from it: its docs' finer
// tokens all descend from another prototype, so its finer prototypes
// cover none of them, and the finest prototypes nearest to the query take
// them instead of the whole posting.
func TestSplitOrphan(t *testing.T) {
	ctx := context.Background()
	unit := func(deg float64) []float32 {
		r := deg * math.Pi / 180
		return []float32{float32(math.Cos(r)), float32(math.Sin(r))}
	}
	// Level 0: east and west. Level 1: four prototypes, all east of the
	// origin, so every one's parent is east and west has no finer ones.
	levels := [][][]float32{{unit(0), unit(180)}, {unit(10), unit(20), unit(-10), unit(-20)}}
	q, err := NewQuantizer(QuantizerOptions{Levels: levels, ResidualLevels: -1, ProductSubspaces: -1})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := New(Options{Quantizer: q})
	if err != nil {
		t.Fatal(err)
	}
	var docs []Doc
	for i := range 2000 { // 1,000 docs east and 1,000 west, spread over +-30 degrees
		deg := float64(i%1000)*0.06 - 30
		if i >= 1000 {
			deg += 180
		}
		docs = append(docs, Doc{ID: uint32(i), Embedding: unit(deg)})
	}
	if err := ix.Build(ctx, docs); err != nil {
		t.Fatal(err)
	}
	snap := ix.Snapshot()
	west := mustToken(0, 1)
	if kids := q.finer(unit(180), west, nil); len(kids) != 0 {
		t.Fatalf("west has finer prototypes %v, want none", kids)
	}
	posting := snap.Postings(west).GetCardinality()
	if posting < 900 {
		t.Fatalf("west holds %d docs, want about 1000", posting)
	}
	const k, factor = 10, 2
	for _, over := range []int{-1, 2} {
		o := SearchOptions{ExhaustiveMax: 1, MinCandidates: 1, CandidateFactor: factor, SplitOver: over}
		cand, _ := snap.tokenCandidates([]WeightedToken{{Token: west, Weight: 1}}, unit(180), allowSet{base: snap.live}, factor*k, o)
		n := uint64(0)
		if cand != nil {
			n = cand.GetCardinality()
		}
		switch {
		case over < 0 && n != posting:
			t.Errorf("postings taken whole: %d candidates, want west's %d", n, posting)
		case over > 0 && (n < factor*k || n >= posting):
			t.Errorf("SplitOver %d: %d candidates, want at least %d and fewer than west's %d", over, n, factor*k, posting)
		}
	}
}
