package retrieval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hir-ads/hir/explore"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
)

// BenchmarkMapPoints measures what [Engine.Map] (GET /v1/map) costs per answer besides
// encoding: placing limit ads (projection plus the coarse interest from
// each ad's bag) at the default model size (64-dimensional embeddings,
// 16 / 64 / 256 prototypes, no residual level), whatever the number of ads
// served (the basis is fitted once per generation on at most 4,096).
func BenchmarkMapPoints(b *testing.B) {
	const dim = 64
	rng := rand.New(rand.NewPCG(1, 2))
	unit := func() []float32 {
		v := make([]float32, dim)
		var n float64
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			n += float64(v[i] * v[i])
		}
		for i := range v {
			v[i] /= float32(math.Sqrt(n))
		}
		return v
	}
	var levels [][][]float32
	for _, k := range []int{16, 64, 256} {
		var lv [][]float32
		for range k {
			lv = append(lv, unit())
		}
		levels = append(levels, lv)
	}
	q, err := index.NewQuantizer(index.QuantizerOptions{Levels: levels, ResidualLevels: -1})
	if err != nil {
		b.Fatal(err)
	}
	vecs := make([][]float32, 5000)
	for i := range vecs {
		vecs[i] = unit()
	}
	pca, err := explore.FitPCA(context.Background(), vecs[:MapBasisSample])
	if err != nil {
		b.Fatal(err)
	}
	basis := &mapBasis{gen: &generation{}, pca: pca}
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, v := range vecs[:n] {
					if _, ok := basis.point(q, nil, graph.Ref{Type: graph.NodeAd, ID: "a1"}, v); !ok {
						b.Fatal("not projected")
					}
				}
			}
			b.ReportMetric(float64(n), "points/op")
		})
	}
}
