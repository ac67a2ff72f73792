package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/viterin/vek/vek32"
)

// ErrBadVectors is returned when input vectors are empty, ragged or of the
// wrong dimension.
var ErrBadVectors = errors.New("bad vectors")

// KMeansOptions configures [KMeans]. Zero fields take the documented defaults.
type KMeansOptions struct {
	// K is the number of centroids. Required.
	K int
	// Iterations is the number of Lloyd iterations after k-means++ seeding
	// (default 15).
	Iterations int
	// Seed makes the result deterministic: the same data, options and seed
	// give bit-identical centroids whatever the number of workers.
	Seed uint64
	// Workers is the number of goroutines used for the assignment step
	// (default min(2, GOMAXPROCS)).
	Workers int
	// InitSample bounds the number of points the k-means++ seeding looks at
	// (default 64*K); the seeding costs O(InitSample*K*dim).
	InitSample int
	// Spherical L2-normalises centroids after every update (spherical
	// k-means), for clustering directions of L2-normalised vectors.
	Spherical bool
}

func (o *KMeansOptions) applyDefaults() {
	if o.Iterations <= 0 {
		o.Iterations = 15
	}
	if o.Workers <= 0 {
		o.Workers = min(2, runtime.GOMAXPROCS(0))
	}
	if o.InitSample <= 0 {
		o.InitSample = 64 * o.K
	}
}

// KMeans clusters data into opts.K centroids with k-means++ seeding and Lloyd
// iterations (squared Euclidean distance). The assignment step runs on
// opts.Workers goroutines; the update is sequential in point order, so the
// result depends only on data, opts and the seed. data is not retained or
// modified. When data has fewer distinct points than K some centroids are
// duplicates.
func KMeans(ctx context.Context, data [][]float32, opts KMeansOptions) ([][]float32, error) {
	opts.applyDefaults()
	if opts.K <= 0 {
		return nil, fmt.Errorf("run k-means: K = %d: %w", opts.K, ErrBadVectors)
	}
	dim, err := checkVectors(data, 0)
	if err != nil {
		return nil, fmt.Errorf("run k-means: %w", err)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15))
	cents := seedPlusPlus(data, opts, dim, rng)
	assign := make([]int32, len(data))
	sums := make([]float64, opts.K*dim)
	counts := make([]int, opts.K)
	dists := make([]float32, len(data))
	for it := 0; it < opts.Iterations; it++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("run k-means: %w", err)
		}
		flat := flatten(cents, dim)
		parallelRange(len(data), opts.Workers, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				assign[i], dists[i] = nearestL2(flat, dim, data[i])
			}
		})
		clear(sums)
		clear(counts)
		for i, v := range data {
			c := int(assign[i])
			counts[c]++
			s := sums[c*dim : (c+1)*dim]
			for j, x := range v {
				s[j] += float64(x)
			}
		}
		used := make(map[int]bool)
		for c := range cents {
			if counts[c] == 0 {
				// Re-seed an empty cluster with the worst-served point.
				best, bestD := -1, float32(-1)
				for i, d := range dists {
					if d > bestD && !used[i] {
						best, bestD = i, d
					}
				}
				used[best] = true
				copy(cents[c], data[best])
				continue
			}
			s := sums[c*dim : (c+1)*dim]
			for j := range cents[c] {
				cents[c][j] = float32(s[j] / float64(counts[c]))
			}
			if opts.Spherical {
				normalize(cents[c])
			}
		}
	}
	return cents, nil
}

func seedPlusPlus(data [][]float32, opts KMeansOptions, dim int, rng *rand.Rand) [][]float32 {
	sample := data
	if len(data) > opts.InitSample {
		idx := rng.Perm(len(data))[:opts.InitSample]
		sample = make([][]float32, len(idx))
		for i, j := range idx {
			sample[i] = data[j]
		}
	}
	cents := make([][]float32, 0, opts.K)
	first := sample[rng.IntN(len(sample))]
	cents = append(cents, append([]float32(nil), first...))
	minD := make([]float64, len(sample))
	for i := range minD {
		minD[i] = math.Inf(1)
	}
	for len(cents) < opts.K {
		last := cents[len(cents)-1]
		parallelRange(len(sample), opts.Workers, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if d := float64(sqDist(last, sample[i])); d < minD[i] {
					minD[i] = d
				}
			}
		})
		var total float64
		for _, d := range minD {
			total += d
		}
		pick := 0
		if total > 0 {
			r := rng.Float64() * total
			for i, d := range minD {
				r -= d
				if r < 0 {
					pick = i
					break
				}
				pick = i
			}
		} else {
			pick = rng.IntN(len(sample))
		}
		c := append([]float32(nil), sample[pick]...)
		if opts.Spherical {
			normalize(c)
		}
		cents = append(cents, c)
	}
	if opts.Spherical {
		normalize(cents[0])
	}
	return cents
}

// parallelRange calls fn on disjoint [lo,hi) chunks of [0,n) from up to
// workers goroutines and waits for all of them.
func parallelRange(n, workers int, fn func(lo, hi int)) {
	if workers <= 1 || n < 1024 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	step := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

func checkVectors(data [][]float32, dim int) (int, error) {
	if len(data) == 0 {
		return 0, fmt.Errorf("no vectors: %w", ErrBadVectors)
	}
	if dim == 0 {
		dim = len(data[0])
	}
	if dim == 0 {
		return 0, fmt.Errorf("zero-length vector: %w", ErrBadVectors)
	}
	for i, v := range data {
		if len(v) != dim {
			return 0, fmt.Errorf("vector %d has dim %d, want %d: %w", i, len(v), dim, ErrBadVectors)
		}
	}
	return dim, nil
}

func flatten(vs [][]float32, dim int) []float32 {
	out := make([]float32, 0, len(vs)*dim)
	for _, v := range vs {
		out = append(out, v...)
	}
	return out
}

func nearestL2(flat []float32, dim int, v []float32) (int32, float32) {
	best, bestD := int32(0), float32(math.Inf(1))
	for c := 0; c*dim < len(flat); c++ {
		if d := sqDist(flat[c*dim:(c+1)*dim], v); d < bestD {
			best, bestD = int32(c), d
		}
	}
	return best, bestD
}

// sqDist returns the squared Euclidean distance of a and b, which must
// have the same length: the square of github.com/viterin/vek's distance,
// which runs on AVX2 where the CPU has it (about 4x the rate of four scalar
// accumulators at 192 dimensions).
func sqDist(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	d := vek32.Distance(a, b[:len(a)])
	return d * d
}

// Dot returns the dot product of a and b, which must have the same length.
// It is github.com/viterin/vek's, which runs on AVX2 where the CPU has it
// (about 3x the rate of four scalar accumulators at 64 dimensions) and in
// Go elsewhere.
func Dot(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	return vek32.Dot(a, b[:len(a)])
}

func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
}
