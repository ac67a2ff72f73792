package explore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFitPCA(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Points spread mostly along (1,1,0)/√2, less along (0,0,1), barely along (1,-1,0).
	var line [][]float32
	for range 500 {
		a, b, c := rng.NormFloat64()*5, rng.NormFloat64()*2, rng.NormFloat64()*0.1
		line = append(line, []float32{float32(a/math.Sqrt2 + c/math.Sqrt2 + 3), float32(a/math.Sqrt2 - c/math.Sqrt2 - 1), float32(b)})
	}
	for _, tc := range []struct {
		name    string
		vecs    [][]float32
		wantErr error
		check   func(t *testing.T, p *PCA)
	}{
		{"no vectors", nil, ErrEmptySample, nil},
		{"zero dimension", [][]float32{{}}, ErrDimension, nil},
		{"ragged", [][]float32{{1, 2}, {1}}, ErrDimension, nil},
		{"one vector", [][]float32{{1, 2, 3}}, nil, func(t *testing.T, p *PCA) {
			if x, y, ok := p.Project([]float32{1, 2, 3}); !ok || x != 0 || y != 0 {
				t.Errorf("Project(mean) = %v, %v, %v, want 0, 0, true", x, y, ok)
			}
			if e := p.Explained(); e != [2]float64{} {
				t.Errorf("Explained() = %v, want zeros", e)
			}
		}},
		{"planted axes", line, nil, func(t *testing.T, p *PCA) {
			ax := p.axes
			if got := math.Abs(ax[0][0]*math.Sqrt2/2 + ax[0][1]*math.Sqrt2/2); got < 0.999 {
				t.Errorf("|cos(axis 0, (1,1,0))| = %v, want ~1 (axis %v)", got, ax[0])
			}
			if got := math.Abs(ax[1][2]); got < 0.999 {
				t.Errorf("|cos(axis 1, (0,0,1))| = %v, want ~1 (axis %v)", got, ax[1])
			}
			e := p.Explained()
			if !(e[0] > 0.8 && e[1] > 0.1 && e[0]+e[1] < 1) {
				t.Errorf("Explained() = %v, want ~[0.86, 0.14]", e)
			}
			if _, _, ok := p.Project([]float32{1, 2}); ok {
				t.Error("Project of a 2-D vector on a 3-D basis is ok")
			}
			if p.Dim() != 3 || p.SampleSize() != 500 {
				t.Errorf("Dim, SampleSize = %d, %d, want 3, 500", p.Dim(), p.SampleSize())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := FitPCA(context.Background(), tc.vecs)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("FitPCA() error = %v, want %v", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, p)
			}
		})
	}
}

// TestFitPCADeterministic: the same sample gives the same basis, and each
// axis's largest coefficient is positive.
func TestFitPCADeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vecs := make([][]float32, 300)
	for i := range vecs {
		vecs[i] = make([]float32, 16)
		for j := range vecs[i] {
			vecs[i][j] = float32(rng.NormFloat64() * float64(j+1))
		}
	}
	a, err := FitPCA(context.Background(), vecs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FitPCA(context.Background(), vecs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a.axes, b.axes); diff != "" {
		t.Errorf("two fits differ (-first +second):\n%s", diff)
	}
	for k, ax := range a.axes {
		best := 0
		for i := range ax {
			if math.Abs(ax[i]) > math.Abs(ax[best]) {
				best = i
			}
		}
		if ax[best] <= 0 {
			t.Errorf("axis %d's largest coefficient %v is not positive", k, ax[best])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := FitPCA(ctx, vecs); !errors.Is(err, context.Canceled) {
		t.Errorf("FitPCA(cancelled) error = %v, want context.Canceled", err)
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		n, k int
		want []int
	}{
		{0, 5, nil},
		{5, 0, nil},
		{3, 5, []int{0, 1, 2}},
		{5, 5, []int{0, 1, 2, 3, 4}},
		{10, 4, []int{0, 2, 5, 7}},
		{1_000_000, 2, []int{0, 500_000}},
	} {
		t.Run(fmt.Sprintf("n=%d,k=%d", tc.n, tc.k), func(t *testing.T) {
			if got := Spread(tc.n, tc.k); !cmp.Equal(got, tc.want) {
				t.Errorf("Spread(%d, %d) = %v, want %v", tc.n, tc.k, got, tc.want)
			}
		})
	}
}

func TestPageAndCursor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		offset uint64
		limit  int
		lo, hi int
		more   bool
	}{
		{"empty list", 0, 0, 10, 0, 0, false},
		{"first page", 25, 0, 10, 0, 10, true},
		{"last full page", 20, 10, 10, 10, 20, false},
		{"short last page", 25, 20, 10, 20, 25, false},
		{"past the end", 25, 40, 10, 25, 25, false},
		{"huge offset", 25, math.MaxUint64, 10, 25, 25, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, more := Page(tc.n, tc.offset, tc.limit)
			if lo != tc.lo || hi != tc.hi || more != tc.more {
				t.Errorf("Page(%d, %d, %d) = %d, %d, %v, want %d, %d, %v", tc.n, tc.offset, tc.limit, lo, hi, more, tc.lo, tc.hi, tc.more)
			}
		})
	}
	for _, tc := range []struct {
		in   string
		want uint64
		err  bool
	}{
		{"", 0, false}, {"0", 0, false}, {"42", 42, false}, {FormatCursor(math.MaxUint64), math.MaxUint64, false},
		{"-1", 0, true}, {"+1", 0, true}, {"x", 0, true}, {"1.5", 0, true}, {"123456789012345678901", 0, true},
	} {
		t.Run("cursor "+tc.in, func(t *testing.T) {
			got, err := ParseCursor(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("ParseCursor(%q) = %d, %v, want %d, error %v", tc.in, got, err, tc.want, tc.err)
			}
			if tc.err && !errors.Is(err, ErrBadCursor) {
				t.Errorf("ParseCursor(%q) error = %v, want ErrBadCursor", tc.in, err)
			}
		})
	}
}

func Example_fitPCA() {
	vecs := [][]float32{{0, 0}, {2, 0}, {4, 0}, {2, 1}, {2, -1}}
	p, err := FitPCA(context.Background(), vecs)
	if err != nil {
		panic(err)
	}
	x, y, _ := p.Project([]float32{4, 0})
	fmt.Printf("x=%.1f y=%.1f\n", x, math.Abs(y))
	// Output: x=2.0 y=0.0
}

func BenchmarkFitPCA(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1024, 4096} {
		const d = 64
		vecs := make([][]float32, n)
		for i := range vecs {
			vecs[i] = make([]float32, d)
			for j := range vecs[i] {
				vecs[i][j] = float32(rng.NormFloat64())
			}
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := FitPCA(context.Background(), vecs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "vectors/op")
		})
	}
}
