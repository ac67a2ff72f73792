package index

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/coder/hnsw"
)

// searcher is the one query interface behind which the token index, exact
// brute force and HNSW are measured.
type searcher interface {
	search(ctx context.Context, vec []float32, k int, f *Filter) []Hit
}

type tokenSearcher struct{ s *Snapshot }

func (t tokenSearcher) search(ctx context.Context, vec []float32, k int, f *Filter) []Hit {
	r, err := t.s.Search(ctx, Query{Vector: vec, K: k, Filter: f})
	if err != nil {
		panic(err)
	}
	return r.Hits
}

type exactSearcher struct{ s *Snapshot }

func (e exactSearcher) search(ctx context.Context, vec []float32, k int, f *Filter) []Hit {
	r, err := e.s.Search(ctx, Query{Vector: vec, K: k, Filter: f, Exhaustive: true})
	if err != nil {
		panic(err)
	}
	return r.Hits
}

// hnswSearcher post-filters: it asks HNSW for k/selectivity neighbours and
// doubles the request until k pass the filter.
type hnswSearcher struct {
	g  *hnsw.Graph[uint32]
	s  *Snapshot
	n  int
	ef int // search beam: max(ef, neighbours asked)
}

func (h hnswSearcher) search(ctx context.Context, vec []float32, k int, f *Filter) []Hit {
	var allowed *roaring.Bitmap
	ask := k
	if f != nil {
		allowed, _ = h.s.Allowed(f)
		sel := float64(allowed.GetCardinality()) / float64(h.n)
		ask = int(float64(k) / max(sel, 1e-6) * 1.2)
	}
	for {
		ask = min(ask, h.n)
		var out []Hit
		h.g.EfSearch = max(h.ef, ask)
		for _, nd := range h.g.Search(vec, ask) {
			if allowed == nil || allowed.Contains(nd.Key) {
				out = append(out, Hit{ID: nd.Key, Score: Dot(vec, nd.Value)})
			}
		}
		if len(out) >= k || ask == h.n {
			slices.SortFunc(out, func(a, b Hit) int {
				if a.Score > b.Score {
					return -1
				}
				if a.Score < b.Score {
					return 1
				}
				return int(a.ID) - int(b.ID)
			})
			return out[:min(k, len(out))]
		}
		ask *= 2
	}
}

type benchEnv struct {
	s       *synth
	snap    *Snapshot
	g       *hnsw.Graph[uint32]
	queries [][]float32
	filters map[string]*Filter
	truth   map[string][][]Hit
}

var (
	benchMu   sync.Mutex
	benchEnvs = map[int]*benchEnv{}
)

func setupBench(b *testing.B, n int) *benchEnv {
	benchMu.Lock()
	defer benchMu.Unlock()
	if e, ok := benchEnvs[n]; ok {
		return e
	}
	ctx := context.Background()
	const dim = 64
	s := genSynth(n, dim, 42)
	t0 := time.Now()
	levels := hierPrototypes(b, s.vecs, []int{32, 8, 8}, 42) // 32 / 256 / 2048
	q, err := NewQuantizer(QuantizerOptions{Levels: levels, Seed: 42})
	if err != nil {
		b.Fatal(err)
	}
	if err := q.Fit(ctx, s.vecs); err != nil {
		b.Fatal(err)
	}
	fitDur := time.Since(t0)
	ix, err := New(Options{Quantizer: q})
	if err != nil {
		b.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t1 := time.Now()
	if err := ix.Build(ctx, s.docs); err != nil {
		b.Fatal(err)
	}
	buildDur := time.Since(t1)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	extra := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)-int64(n*dim*4)) / float64(n)
	b.Logf("n=%d prototypes+residual fit %v; index build %v (%.0f ads/s); memory beyond embedding %.0f B/ad",
		n, fitDur.Round(time.Millisecond), buildDur.Round(time.Millisecond), float64(n)/buildDur.Seconds(), extra)
	g := hnsw.NewGraph[uint32]()
	g.M, g.EfSearch, g.Distance = 16, 100, hnsw.CosineDistance
	g.Rng = rand.New(rand.NewSource(42))
	t2 := time.Now()
	nodes := make([]hnsw.Node[uint32], n)
	for i, v := range s.vecs {
		nodes[i] = hnsw.MakeNode(uint32(i), v)
	}
	g.Add(nodes...)
	b.Logf("n=%d hnsw build %v (%.0f ads/s)", n, time.Since(t2).Round(time.Millisecond), float64(n)/time.Since(t2).Seconds())
	cats := func(k int) []string {
		var out []string
		for i := range k {
			out = append(out, fmt.Sprintf("c%d", i))
		}
		return out
	}
	e := &benchEnv{s: s, snap: ix.Snapshot(), g: g, queries: s.queries(200, 7),
		filters: map[string]*Filter{"none": nil, "10%": In(AttrCategory, cats(10)...), "1%": Eq(AttrCategory, "c0")},
		truth:   map[string][][]Hit{}}
	ex := exactSearcher{e.snap}
	for name, f := range e.filters {
		for _, v := range e.queries {
			e.truth[name] = append(e.truth[name], ex.search(ctx, v, 100, f))
		}
	}
	b.Logf("n=%d memory per ad: %.0f B beyond the %d B embedding", n, extra, dim*4)
	benchEnvs[n] = e
	return e
}

// BenchmarkRetrieval measures recall@100 against exact top-100, queries/s
// and p50/p99 latency for the token index, HNSW (post-filtered) and exact
// brute force, unfiltered and with filters keeping 10% and 1% of ads.
// n=1M runs only with HIR_BENCH_1M=1.
func BenchmarkRetrieval(b *testing.B) {
	if testing.Short() {
		b.Skip("slow: builds HNSW")
	}
	sizes := []int{100_000}
	if os.Getenv("HIR_BENCH_1M") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	ctx := context.Background()
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			e := setupBench(b, n)
			engines := []struct {
				name string
				s    searcher
			}{
				{"tokens", tokenSearcher{e.snap}},
				{"hnsw-ef100", hnswSearcher{e.g, e.snap, n, 100}},
				{"hnsw-ef800", hnswSearcher{e.g, e.snap, n, 800}},
				{"exact", exactSearcher{e.snap}},
			}
			for _, fname := range []string{"none", "10%", "1%"} {
				for _, eng := range engines {
					b.Run("filter="+fname+"/engine="+eng.name, func(b *testing.B) {
						b.ReportAllocs()
						var lat []time.Duration
						var rec float64
						i := 0
						for b.Loop() {
							qi := i % len(e.queries)
							t0 := time.Now()
							hits := eng.s.search(ctx, e.queries[qi], 100, e.filters[fname])
							lat = append(lat, time.Since(t0))
							rec += recall(hits, e.truth[fname][qi])
							i++
						}
						slices.Sort(lat)
						var total time.Duration
						for _, d := range lat {
							total += d
						}
						b.ReportMetric(rec/float64(i), "recall@100")
						b.ReportMetric(float64(i)/total.Seconds(), "queries/s")
						b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
						b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
					})
				}
			}
		})
	}
}

// BenchmarkUpsert measures online single-doc upserts on a 100k index.
func BenchmarkUpsert(b *testing.B) {
	if testing.Short() {
		b.Skip("slow")
	}
	ctx := context.Background()
	e := setupBench(b, 100_000)
	ix := NewFromSnapshot(e.snap, Options{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := e.s.docs[i%len(e.s.docs)]
		d.Embedding = e.s.vecs[(i*7919)%len(e.s.vecs)]
		if err := ix.Upsert(ctx, d); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
