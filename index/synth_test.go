package index

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// synth is a synthetic ad corpus: a hierarchical Gaussian mixture of
// L2-normalised embeddings with categorical attributes.
type synth struct {
	dim    int
	leaves [][]float32 // finest mixture centres
	docs   []Doc
	vecs   [][]float32
}

// genSynth draws n ads from a 3-level mixture (32 x 8 x 8 components).
// Attributes: category c0..c99 uniform (so one category keeps 1%, ten keep
// 10%), brand b0..b499, advertiser a0..a999, campaign advertiser-local,
// status active (90%) or paused, label region eu/us.
func genSynth(n, dim int, seed uint64) *synth {
	rng := rand.New(rand.NewPCG(seed, 1))
	gauss := func(c []float32, sigma float64) []float32 {
		v := make([]float32, dim)
		for i := range v {
			var base float32
			if c != nil {
				base = c[i]
			}
			v[i] = base + float32(rng.NormFloat64()*sigma)
		}
		return v
	}
	var leaves [][]float32
	for range 32 {
		top := gauss(nil, 1)
		normalize(top)
		for range 8 {
			mid := gauss(top, 0.5/math.Sqrt(float64(dim)))
			for range 8 {
				leaf := gauss(mid, 0.35/math.Sqrt(float64(dim)))
				leaves = append(leaves, leaf)
			}
		}
	}
	s := &synth{dim: dim, leaves: leaves}
	for i := range n {
		v := s.sample(rng)
		adv := rng.IntN(1000)
		status := "active"
		if rng.IntN(10) == 0 {
			status = "paused"
		}
		region := "eu"
		if rng.IntN(2) == 0 {
			region = "us"
		}
		s.vecs = append(s.vecs, v)
		s.docs = append(s.docs, Doc{
			ID:        uint32(i),
			Embedding: v,
			Attrs: map[string][]string{
				AttrCategory:   {fmt.Sprintf("c%d", rng.IntN(100))},
				AttrBrand:      {fmt.Sprintf("b%d", rng.IntN(500))},
				AttrAdvertiser: {fmt.Sprintf("a%d", adv)},
				AttrCampaign:   {fmt.Sprintf("a%d-k%d", adv, rng.IntN(10))},
				AttrStatus:     {status},
			},
			Labels: map[string]string{"region": region},
		})
	}
	return s
}

// sample draws one normalised point around a random leaf.
func (s *synth) sample(rng *rand.Rand) []float32 {
	leaf := s.leaves[rng.IntN(len(s.leaves))]
	v := make([]float32, s.dim)
	sigma := 0.3 / math.Sqrt(float64(s.dim))
	for i := range v {
		v[i] = leaf[i] + float32(rng.NormFloat64()*sigma)
	}
	normalize(v)
	return v
}

// queries draws n query vectors from the same mixture.
func (s *synth) queries(n int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([][]float32, n)
	for i := range out {
		out[i] = s.sample(rng)
	}
	return out
}

// hierPrototypes fits prototypes at len(fanout) levels by hierarchical
// spherical k-means: fanout[0] clusters of the data, then fanout[l]
// children inside each cluster of level l-1.
func hierPrototypes(tb testing.TB, data [][]float32, fanout []int, seed uint64) [][][]float32 {
	tb.Helper()
	ctx := context.Background()
	groups := [][][]float32{data}
	var levels [][][]float32
	for l, k := range fanout {
		var protos [][]float32
		var next [][][]float32
		for g, members := range groups {
			kk := min(k, len(members))
			if kk == 0 {
				continue
			}
			cents, err := KMeans(ctx, members, KMeansOptions{K: kk, Iterations: 8, Seed: seed + uint64(l*100000+g), Spherical: true})
			if err != nil {
				tb.Fatalf("KMeans(level %d group %d) error = %v", l, g, err)
			}
			flat := flatten(cents, len(cents[0]))
			parts := make([][][]float32, kk)
			for _, v := range members {
				c, _ := nearestL2(flat, len(v), v)
				parts[c] = append(parts[c], v)
			}
			protos = append(protos, cents...)
			next = append(next, parts...)
		}
		levels = append(levels, protos)
		groups = next
	}
	return levels
}
