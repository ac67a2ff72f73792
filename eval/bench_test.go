package eval

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

func BenchmarkTopKScores(b *testing.B) {
	for _, n := range []int{1682, 100000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			scores := make([]float32, n)
			for i := range scores {
				scores[i] = rng.Float32()
			}
			q := &Query{K: 100}
			dst := make([]int32, 0, 100)
			b.ReportAllocs()
			for b.Loop() {
				dst = topKScores(scores, q, dst)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
		})
	}
}

// BenchmarkChronoSynthetic measures a whole chrono evaluation of the cheap
// baselines on the synthetic world.
func BenchmarkChronoSynthetic(b *testing.B) {
	d := makeSynth(7, 1000, 50, 20).data(b)
	cfg := Config{Methods: []string{"popularity", "item-knn", "content"}}
	var queries int
	b.ReportAllocs()
	for b.Loop() {
		rep, err := Evaluate(context.Background(), cfg, d)
		if err != nil {
			b.Fatal(err)
		}
		queries = rep.Get("popularity", SliceAll).Queries
	}
	b.ReportMetric(float64(queries*3)*float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}
