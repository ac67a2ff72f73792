package index

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// wholeWorld returns n docs whose embeddings are a head of 8 coordinates
// that the prototypes span and a tail of 8 that they do not (zero there,
// as the model's prototypes are on its collaborative factors), drawn from
// independent mixtures and the tail weighed twice, so that the tail
// decides most of a dot product; the prototypes (8, 4 and 4 per level)
// fitted on the heads; and queries drawn the same way.
func wholeWorld(t *testing.T, n int) (docs []Doc, levels [][][]float32, queries [][]float32) {
	t.Helper()
	head, tail := genSynth(n, 8, 11), genSynth(n, 8, 12)
	join := func(h, tl []float32) []float32 {
		v := slices.Concat(h, tl)
		for i := range tl {
			v[len(h)+i] *= 2
		}
		return v
	}
	for i, d := range head.docs {
		d.Embedding = join(head.vecs[i], tail.vecs[i])
		docs = append(docs, d)
	}
	for _, lv := range hierPrototypes(t, head.vecs, []int{8, 4, 4}, 11) {
		var padded [][]float32
		for _, p := range lv {
			padded = append(padded, slices.Concat(p, make([]float32, 8)))
		}
		levels = append(levels, padded)
	}
	qh, qt := head.queries(60, 13), tail.queries(60, 14)
	for i := range qh {
		queries = append(queries, join(qh[i], qt[i]))
	}
	return docs, levels, queries
}

// wholeIndex builds an index of docs over levels with a whole-vector level
// of codes codes (0: none).
func wholeIndex(t *testing.T, docs []Doc, levels [][][]float32, codes int) *Index {
	t.Helper()
	ctx := context.Background()
	q, err := NewQuantizer(QuantizerOptions{Levels: levels, ResidualCodes: 4, WholeCodes: codes, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	vecs := make([][]float32, len(docs))
	for i, d := range docs {
		vecs[i] = d.Embedding
	}
	if err := q.Fit(ctx, vecs); err != nil {
		t.Fatal(err)
	}
	ix, err := New(Options{Quantizer: q})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Build(ctx, docs); err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestWholeLevel checks the whole-vector level: a doc's bag holds its
// nearest codeword's token, a query's none (the search reads the cells of
// largest dot product first), and where the prototypes miss what decides
// the dot product the level's cells lift the token stage's recall of a
// similarity-only search, unfiltered; a filtered search, or one that
// weighs the prior, takes none of its cells.
func TestWholeLevel(t *testing.T) {
	ctx := context.Background()
	docs, levels, queries := wholeWorld(t, 4000)
	without, with := wholeIndex(t, docs, levels, 0), wholeIndex(t, docs, levels, 64)
	q := with.Quantizer()
	w, ok := q.WholeLevel()
	if !ok || w != len(levels)+1 || q.LevelSize(w) != 64 || len(q.Whole()) != 64 || !q.Fitted() {
		t.Fatalf("whole level %d (%v) of %d codes, want level %d of 64", w, ok, q.LevelSize(w), len(levels)+1)
	}
	if _, ok := without.Quantizer().WholeLevel(); ok {
		t.Fatal("a quantizer of 0 whole codes has a whole level")
	}
	code := func(b []WeightedToken) []int {
		var out []int
		for _, wt := range b {
			if wt.Token.Level() == w {
				out = append(out, wt.Token.Code())
			}
		}
		return out
	}
	for _, d := range docs[:50] {
		c, _ := nearestL2(q.whole, q.dim, d.Embedding)
		if got := code(q.Bag(d.Embedding)); !slices.Equal(got, []int{int(c)}) {
			t.Fatalf("doc %d: whole tokens %v, want its nearest code [%d]", d.ID, got, c)
		}
	}
	v := queries[0]
	if got := code(q.QueryBag(v)); len(got) != 0 {
		t.Fatalf("query bag with whole tokens %v: the search picks its cells", got)
	}
	var got []int
	for _, wt := range q.wholeNearest(v, 10) {
		got = append(got, wt.Token.Code())
	}
	all := make([]int, 64)
	for c := range all {
		all[c] = c
	}
	slices.SortStableFunc(all, func(a, b int) int { return cmp.Compare(Dot(v, q.Whole()[b]), Dot(v, q.Whole()[a])) })
	if want := all[:10]; !slices.Equal(got, want) {
		t.Fatalf("nearest cells %v, want the 10 codes of largest dot product first %v", got, want)
	}

	opts := SearchOptions{ExhaustiveMax: 1, MinCandidates: 80, CandidateFactor: 1}
	wide := opts
	wide.MinCandidates *= 2 // the tokens alone, as many candidates as both stages take
	search := func(ix *Index, q Query) Result {
		t.Helper()
		res, err := ix.Snapshot().Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var rWithout, rWith, rWide, cWithout, cWith, cWide float64
	for _, v := range queries {
		want := search(with, Query{Vector: v, K: 10, Exhaustive: true})
		a := search(without, Query{Vector: v, K: 10, Options: opts})
		b := search(with, Query{Vector: v, K: 10, Options: opts})
		c := search(without, Query{Vector: v, K: 10, Options: wide})
		if a.Stage != StageTokens || b.Stage != StageTokens {
			t.Fatalf("stages %s, %s, want tokens", a.Stage, b.Stage)
		}
		rWithout += recall(a.Hits, want.Hits)
		rWith += recall(b.Hits, want.Hits)
		rWide += recall(c.Hits, want.Hits)
		cWithout += float64(a.Candidates)
		cWith += float64(b.Candidates)
		cWide += float64(c.Candidates)
	}
	n := float64(len(queries))
	t.Logf("recall@10 without the whole level %.3f (%.0f candidates), %.3f (%.0f); with it %.3f (%.0f)",
		rWithout/n, cWithout/n, rWide/n, cWide/n, rWith/n, cWith/n)
	if !(rWith/n >= max(rWithout, rWide)/n+0.3) || !(rWith/n >= 0.6) || cWith > cWide {
		t.Errorf("recall@10 with the whole level %.3f (%.0f candidates), without %.3f and %.3f (%.0f): want at least 0.6 and 0.3 more than the tokens alone at no more candidates",
			rWith/n, cWith/n, rWithout/n, rWide/n, cWide/n)
	}

	// A filtered search, or one that weighs the prior, reads the tokens
	// alone.
	for name, q := range map[string]Query{
		"filtered":   {Filter: Eq(AttrStatus, "active")},
		"with prior": {PriorWeight: 1},
	} {
		q.Vector, q.K, q.Options = v, 10, opts
		a, b := search(without, q), search(with, q)
		if b.Stage != StageTokens || a.Candidates != b.Candidates {
			t.Errorf("%s: %d candidates (%s) with the whole level, %d without; want the same", name, b.Candidates, b.Stage, a.Candidates)
		}
	}
}

// TestWholeLevelRoundTrip checks that a snapshot with a whole-vector level
// reads back with its codebook and answers the same.
func TestWholeLevelRoundTrip(t *testing.T) {
	ctx := context.Background()
	docs, levels, queries := wholeWorld(t, 1000)
	snap := wholeIndex(t, docs, levels, 32).Snapshot()
	path := filepath.Join(t.TempDir(), "index.snap")
	if err := snap.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	snapshotsEqual(t, snap, back)
	if diff := gocmp.Diff(snap.q.Whole(), back.q.Whole()); diff != "" || back.q.Options().WholeCodes != 32 {
		t.Fatalf("whole-vector codebook differs (%d codes read):\n%s", back.q.Options().WholeCodes, diff)
	}
	opts := SearchOptions{ExhaustiveMax: 1, MinCandidates: 80, CandidateFactor: 1}
	for _, v := range queries[:10] {
		r1, _ := snap.Search(ctx, Query{Vector: v, K: 10, Options: opts})
		r2, _ := back.Search(ctx, Query{Vector: v, K: 10, Options: opts})
		if diff := gocmp.Diff(r1, r2, cmpopts.IgnoreFields(Result{}, "CandidatesTime", "RerankTime")); diff != "" {
			t.Fatalf("Search after load differs:\n%s", diff)
		}
	}
}
