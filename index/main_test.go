package index

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

// bleve starts a package-level analysis worker pool in init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

// testIndex builds a small synthetic index (n docs, 8/4/4 prototypes).
func testIndex(t testing.TB, n int, seed uint64) (*Index, *synth) {
	t.Helper()
	ctx := context.Background()
	s := genSynth(n, 16, seed)
	levels := hierPrototypes(t, s.vecs, []int{8, 4, 4}, seed)
	q, err := NewQuantizer(QuantizerOptions{Levels: levels, ResidualCodes: 4, Seed: seed})
	if err != nil {
		t.Fatalf("NewQuantizer() error = %v", err)
	}
	if err := q.Fit(ctx, s.vecs); err != nil {
		t.Fatalf("Fit() error = %v", err)
	}
	ix, err := New(Options{Quantizer: q})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	if err := ix.Build(ctx, s.docs); err != nil {
		t.Fatalf("Build() error = %v", err)
	}
	return ix, s
}

func recall(got, want []Hit) float64 {
	if len(want) == 0 {
		return 1
	}
	m := map[uint32]bool{}
	for _, h := range want {
		m[h.ID] = true
	}
	n := 0
	for _, h := range got {
		if m[h.ID] {
			n++
		}
	}
	return float64(n) / float64(len(want))
}
