package index

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestKthLargest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		xs   []float32
	}{
		{"one", []float32{3}},
		{"sorted", []float32{1, 2, 3, 4, 5, 6, 7, 8}},
		{"reversed", []float32{8, 7, 6, 5, 4, 3, 2, 1}},
		{"all equal", []float32{2, 2, 2, 2, 2}},
		{"few values", func() []float32 {
			xs := make([]float32, 300)
			for i := range xs {
				xs[i] = float32(rng.IntN(4))
			}
			return xs
		}()},
		{"random", func() []float32 {
			xs := make([]float32, 1000)
			for i := range xs {
				xs[i] = rng.Float32()
			}
			return xs
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desc := slices.Clone(tc.xs)
			slices.SortFunc(desc, func(a, b float32) int { return -cmpF(a, b) })
			for k := 1; k <= len(tc.xs); k += max(1, len(tc.xs)/17) {
				if got := kthLargest(slices.Clone(tc.xs), k); got != desc[k-1] {
					t.Errorf("kthLargest(k=%d) = %v, want %v", k, got, desc[k-1])
				}
			}
		})
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestFirstStageCodes checks that a doc's stored path code is the one of
// its bag, that its product code and norm are those of what the path
// leaves, that the approximate similarity read off both is the dot product
// with the reconstruction, and that a loaded snapshot holds the same
// codes, norms and shares as the built one, whether the file stores them
// (version 4) or not (version 3: computed when read).
func TestFirstStageCodes(t *testing.T) {
	ix, s := testIndex(t, 2000, 3)
	snap := ix.Snapshot()
	q := snap.q
	p := snap.product()
	if p == nil || p.subspaces() != q.dim/4 {
		t.Fatalf("Build left no product codes of %d bytes (width %d)", q.dim/4, snap.pq.width)
	}
	if got, want := q.CodeBytes(), 8+q.dim/4; got != want {
		t.Errorf("CodeBytes() = %d, want %d", got, want)
	}
	if snap.resShare == nil {
		t.Fatal("Build left no residual shares")
	}
	var sum float32
	for _, x := range snap.resShare {
		sum += x
	}
	if math.Abs(float64(sum)-1) > 1e-4 {
		t.Errorf("residual shares sum to %v, want 1", sum)
	}
	query := s.queries(1, 9)[0]
	tab, pt := q.adc(query), p.table(query)
	r := make([]float32, q.dim)
	var pathErr, codeErr float64
	for id := range uint32(200) {
		e := snap.emb.at(int(id))
		c := snap.code.at(int(id))
		if want := q.pathCode(e); c[0] != want {
			t.Fatalf("doc %d: stored code %d, pathCode %d", id, c[0], want)
		}
		q.residual(e, c[0], r)
		pathErr += float64(Dot(r, r))
		pq := make([]byte, p.subspaces())
		p.encode(r, pq)
		codeErr += float64(Dot(r, r))
		if !slices.Equal(pq, snap.pq.at(int(id))) {
			t.Fatalf("doc %d: stored product code %v, encode %v", id, snap.pq.at(int(id)), pq)
		}
		if got, want := math.Float32frombits(c[1]), norm32(r); got != want {
			t.Errorf("doc %d: residual norm %v, want %v", id, got, want)
		}
		// e - r is the reconstruction.
		var want float32
		for i := range e {
			want += query[i] * (e[i] - r[i])
		}
		if got := tab.sim(c[0]) + pt.sim(snap.pq.at(int(id))); math.Abs(float64(got-want)) > 1e-4 {
			t.Errorf("doc %d: approximate similarity %v, want %v", id, got, want)
		}
	}
	// The product code must explain most of what the path leaves.
	if codeErr > pathErr/2 {
		t.Errorf("squared error %.3f after the product code, %.3f before: want at most half", codeErr, pathErr)
	}
	path := t.TempDir() + "/index.bin"
	if err := snap.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	v3, err := ReadSnapshot(bytes.NewReader(downgrade(t, buf.Bytes(), snap, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if v3.product() != nil {
		t.Error("a version 3 file read with product codes")
	}
	if v3.resShare == nil {
		t.Error("a version 3 file read without residual shares")
	}
	for it := snap.live.Iterator(); it.HasNext(); {
		id := int(it.Next())
		if got, want := loaded.code.at(id), snap.code.at(id); !slices.Equal(got, want) {
			t.Fatalf("doc %d: loaded code %v, built %v", id, got, want)
		}
		if got, want := loaded.pq.at(id), snap.pq.at(id); !slices.Equal(got, want) {
			t.Fatalf("doc %d: loaded product code %v, built %v", id, got, want)
		}
		if got, want := v3.code.at(id)[0], snap.code.at(id)[0]; got != want {
			t.Fatalf("doc %d: version 3 path code %v, built %v", id, got, want)
		}
	}
	for i := range snap.resShare {
		if math.Abs(float64(loaded.resShare[i]-snap.resShare[i])) > 1e-6 {
			t.Fatalf("axis %d: loaded share %v, built %v", i, loaded.resShare[i], snap.resShare[i])
		}
	}
}

// TestErrorBand checks the two-stage re-rank against scoring every doc
// exactly: the same hits (the band holds every error here) from fewer
// exact scores when the prior separates the docs; the default, an
// exhaustive query and an index without residual shares score every doc.
func TestErrorBand(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 4000, 4)
	snap := ix.Snapshot()
	// Priors spread the scores: a few docs stand out.
	rng := rand.New(rand.NewPCG(4, 4))
	ids := snap.live.ToArray()
	priors := make([]float32, len(ids))
	for i := range priors {
		priors[i] = float32(rng.ExpFloat64())
	}
	if err := ix.SetPriors(ctx, ids, priors, make([]float32, len(ids)), nil); err != nil {
		t.Fatal(err)
	}
	snap = ix.Snapshot()
	upserted, err := New(Options{Quantizer: ix.Quantizer()})
	if err != nil {
		t.Fatal(err)
	}
	if err := upserted.Upsert(ctx, s.docs...); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		snap      *Snapshot
		q         Query
		fewer     bool // fewer docs scored exactly than scored at all
		wantExact bool // every doc scored exactly
	}{
		{"filtered-all, prior", snap, Query{PriorWeight: 1, Options: SearchOptions{ErrorBand: 4}}, true, false},
		{"tokens, prior", snap, Query{PriorWeight: 1, Options: SearchOptions{ErrorBand: 4, ExhaustiveMax: 1, MinCandidates: 1500}}, true, false},
		{"filtered-all, similarity", snap, Query{Options: SearchOptions{ErrorBand: 4}}, true, false},
		{"exhaustive", snap, Query{PriorWeight: 1, Exhaustive: true, Options: SearchOptions{ErrorBand: 4}}, false, true},
		{"default: off", snap, Query{PriorWeight: 1}, false, true},
		{"upserted index", upserted.Snapshot(), Query{Options: SearchOptions{ErrorBand: 4}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits, total, exact, scored int
			for _, v := range s.queries(20, 11) {
				q := tc.q
				q.Vector, q.K = v, 20
				got, err := tc.snap.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				q.Options.ErrorBand = -1
				want, err := tc.snap.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				hits += int(recall(got.Hits, want.Hits) * float64(len(want.Hits)))
				total += len(want.Hits)
				exact += got.Exact
				scored += want.Exact
			}
			if r := float64(hits) / float64(total); r < 0.99 {
				t.Errorf("recall against exact scoring %.3f, want >= 0.99", r)
			}
			if tc.wantExact && exact != scored {
				t.Errorf("%d docs scored exactly, want all %d", exact, scored)
			}
			if tc.fewer && exact*2 > scored {
				t.Errorf("%d docs scored exactly of %d, want at most half", exact, scored)
			}
			t.Logf("%d of %d docs scored exactly", exact, scored)
		})
	}
}

// BenchmarkFirstStage measures a query's product table and the
// approximate similarity of one doc read off its first-stage code, against
// the exact dot product with its embedding (192 dimensions, 48 subspaces).
func BenchmarkFirstStage(b *testing.B) {
	ix, s := testIndex(b, 4000, 4)
	snap := ix.Snapshot()
	p := snap.product()
	q := s.queries(1, 5)[0]
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			_ = p.table(q)
		}
	})
	pt, tab := p.table(q), snap.q.adc(q)
	n := snap.live.GetCardinality()
	b.Run("approximate", func(b *testing.B) {
		var sum float32
		i := 0
		for b.Loop() {
			id := i % int(n)
			sum += tab.sim(snap.code.at(id)[0]) + pt.sim(snap.pq.at(id))
			i++
		}
	})
	b.Run("exact", func(b *testing.B) {
		var sum float32
		i := 0
		for b.Loop() {
			sum += Dot(q, snap.emb.at(i%int(n)))
			i++
		}
	})
}

// TestADCSim checks the path code's approximate similarity against the
// dot product with the reconstruction, for a codebook size that is a power
// of two (read with shifts) and one that is not (with divisions).
func TestADCSim(t *testing.T) {
	ctx := context.Background()
	for _, codes := range []int{3, 4} {
		s := genSynth(600, 16, 7)
		levels := hierPrototypes(t, s.vecs, []int{4, 8}, 7)
		q, err := NewQuantizer(QuantizerOptions{Levels: levels, ResidualLevels: 2, ResidualCodes: codes, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Fit(ctx, s.vecs); err != nil {
			t.Fatal(err)
		}
		query := s.queries(1, 3)[0]
		tab := q.adc(query)
		r := make([]float32, q.dim)
		for _, e := range s.vecs[:50] {
			code := q.pathCode(e)
			q.residual(e, code, r)
			var want float32
			for i := range e {
				want += query[i] * (e[i] - r[i])
			}
			if got := tab.sim(code); math.Abs(float64(got-want)) > 1e-4 {
				t.Errorf("%d codes: sim(%d) = %v, want %v", codes, code, got, want)
			}
		}
	}
}
