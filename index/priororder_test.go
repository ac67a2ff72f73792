package index

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPriorPassMatchesExhaustive checks that docs outside the token
// candidates whose prior lifts them into the top k are found: the token
// search answers exactly the exhaustive top k of the same score, for old and
// new users' priors.
func TestPriorPassMatchesExhaustive(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 600, 5)
	rng := rand.New(rand.NewPCG(3, 4))
	var ids []uint32
	var prior, newUser []float32
	for id := range uint32(600) {
		if rng.IntN(10) == 0 {
			ids = append(ids, id)
			prior = append(prior, float32(rng.Float64()*3))
			newUser = append(newUser, float32(rng.Float64()*3))
		}
	}
	if err := ix.SetPriors(ctx, ids, prior, newUser, nil); err != nil {
		t.Fatal(err)
	}
	snap := ix.Snapshot()
	for _, tc := range []struct {
		name    string
		weight  float32
		newUser bool
	}{
		{"weight 1", 1, false},
		{"weight 1, new user", 1, true},
		{"weight 0.3", 0.3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens := 0
			defer func() {
				if tokens < 10 {
					t.Errorf("%d of 20 queries answered from tokens, want most", tokens)
				}
			}()
			for qi, v := range s.queries(20, 9) {
				q := Query{Vector: v, K: 10, PriorWeight: tc.weight, NewUser: tc.newUser, Options: SearchOptions{ExhaustiveMax: 1, MinCandidates: 20}}
				got, err := snap.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if got.Stage == StageTokens {
					tokens++
				}
				q.Exhaustive = true
				want, err := snap.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				id := func(h Hit) uint32 { return h.ID }
				if g, w := mapHits(got.Hits, id), mapHits(want.Hits, id); !slices.Equal(g, w) {
					t.Errorf("query %d: Search = %v, exhaustive %v", qi, g, w)
				}
			}
		})
	}
}

func mapHits[T any](hits []Hit, f func(Hit) T) []T {
	out := make([]T, len(hits))
	for i, h := range hits {
		out[i] = f(h)
	}
	return out
}
