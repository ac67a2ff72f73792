package index

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQuantizerDeterminism(t *testing.T) {
	ctx := context.Background()
	s := genSynth(3000, 16, 7)
	levels := hierPrototypes(t, s.vecs, []int{8, 4}, 7)
	fit := func(workers int, seed uint64) *Quantizer {
		q, err := NewQuantizer(QuantizerOptions{Levels: levels, ResidualLevels: 2, ResidualCodes: 8, Seed: seed, Workers: workers})
		if err != nil {
			t.Fatalf("NewQuantizer() error = %v", err)
		}
		if err := q.Fit(ctx, s.vecs); err != nil {
			t.Fatalf("Fit() error = %v", err)
		}
		return q
	}
	a, b, c := fit(1, 1), fit(2, 1), fit(2, 2)
	if diff := cmp.Diff(a.Residual(), b.Residual()); diff != "" {
		t.Errorf("codebooks differ between 1 and 2 workers (-1 +2):\n%s", diff)
	}
	if cmp.Equal(a.Residual(), c.Residual()) {
		t.Errorf("codebooks equal for seeds 1 and 2, want different")
	}
	for i, v := range s.vecs[:200] {
		if diff := cmp.Diff(a.Bag(v), b.Bag(v)); diff != "" {
			t.Fatalf("Bag(vec %d) differs between runs:\n%s", i, diff)
		}
	}
}

func TestBagShape(t *testing.T) {
	ctx := context.Background()
	s := genSynth(2000, 16, 3)
	levels := hierPrototypes(t, s.vecs, []int{8, 4, 4}, 3)
	q, err := NewQuantizer(QuantizerOptions{Levels: levels, MaxPerLevel: 2, MaxTokens: 7, ResidualCodes: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Fit(ctx, s.vecs); err != nil {
		t.Fatal(err)
	}
	L := q.NumLevels()
	for i, v := range s.vecs[:300] {
		bag := q.Bag(v)
		if len(bag) == 0 || len(bag) > 7 {
			t.Fatalf("len(Bag(vec %d)) = %d, want 1..7", i, len(bag))
		}
		perLevel := map[int]int{}
		best := map[int]float32{}
		for _, wt := range bag {
			l := wt.Token.Level()
			perLevel[l]++
			if wt.Token.Code() >= q.LevelSize(l) {
				t.Fatalf("Bag(vec %d) token %v beyond level size %d", i, wt.Token, q.LevelSize(l))
			}
			if l < L {
				if perLevel[l] == 1 {
					best[l] = wt.Weight
					// The first token of a level is its argmax.
					if c, _ := q.argmaxDot(l, v); int(c) != wt.Token.Code() {
						t.Fatalf("Bag(vec %d) level %d first token %v, want code %d", i, l, wt.Token, c)
					}
				} else if wt.Weight < best[l]-q.Options().Margin {
					t.Fatalf("Bag(vec %d) token %v weight %v outside margin of %v", i, wt.Token, wt.Weight, best[l])
				}
			} else if p, ok := q.Parent(wt.Token); !ok || p.Level() != l-1 {
				t.Fatalf("Parent(%v) = %v, %v", wt.Token, p, ok)
			}
		}
		for l, n := range perLevel {
			if l < L && n > 2 {
				t.Fatalf("Bag(vec %d) has %d tokens at level %d, want <= 2", i, n, l)
			}
		}
		if qb := q.QueryBag(v); len(qb) < len(bag) {
			t.Fatalf("QueryBag(vec %d) has %d tokens, fewer than Bag's %d", i, len(qb), len(bag))
		}
	}
	if q.Bag([]float32{1}) != nil {
		t.Errorf("Bag(wrong dim) != nil")
	}
}

func TestNewQuantizerErrors(t *testing.T) {
	tests := []struct {
		name string
		opts QuantizerOptions
	}{
		{"no levels", QuantizerOptions{}},
		{"ragged", QuantizerOptions{Levels: [][][]float32{{{1, 0}, {1}}}}},
		{"dim mismatch across levels", QuantizerOptions{Levels: [][][]float32{{{1, 0}}, {{1, 0, 0}}}}},
		{"too many levels", QuantizerOptions{Levels: make([][][]float32, MaxTokenLevels)}},
		{"bad residual", QuantizerOptions{Levels: [][][]float32{{{1, 0}}}, Residual: [][][]float32{{{1, 0}}}, ResidualCodes: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewQuantizer(tc.opts); err == nil {
				t.Errorf("NewQuantizer(%s) error = nil, want error", tc.name)
			}
		})
	}
}
