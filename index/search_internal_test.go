package index

import (
	"context"
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
