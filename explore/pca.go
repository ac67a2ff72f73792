package explore

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Errors of FitPCA.
var (
	// ErrEmptySample is returned for a sample without vectors.
	ErrEmptySample = errors.New("explore: empty sample")
	// ErrDimension is returned for vectors of different or zero length.
	ErrDimension = errors.New("explore: vectors of different or zero dimension")
)

// powerIterations bounds the power iteration of each component; it stops
// earlier once the direction changes by less than powerTolerance.
const (
	powerIterations = 300
	powerTolerance  = 1e-9
)

// PCA is a 2-D principal-component basis fitted on a sample of vectors.
// Immutable; safe for concurrent use.
type PCA struct {
	mean     []float64
	axes     [2][]float64
	explain  [2]float64
	n        int
	totalVar float64
}

// FitPCA fits the two leading principal components of vecs (at least one
// vector, all of one non-zero dimension; vecs is not retained). A sample
// with no variance along an axis gets a zero axis there, so every vector
// projects to 0 on it. ctx is checked once per vector while the covariance
// is accumulated.
func FitPCA(ctx context.Context, vecs [][]float32) (*PCA, error) {
	if len(vecs) == 0 {
		return nil, ErrEmptySample
	}
	d := len(vecs[0])
	if d == 0 {
		return nil, ErrDimension
	}
	p := &PCA{mean: make([]float64, d), n: len(vecs)}
	for i, v := range vecs {
		if len(v) != d {
			return nil, fmt.Errorf("fit pca: vector %d has %d dimensions, want %d: %w", i, len(v), d, ErrDimension)
		}
		for j, x := range v {
			p.mean[j] += float64(x)
		}
	}
	for j := range p.mean {
		p.mean[j] /= float64(len(vecs))
	}
	cov := make([]float64, d*d) // row-major, symmetric
	c := make([]float64, d)
	for i, v := range vecs {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("fit pca: %w", err)
			}
		}
		for j, x := range v {
			c[j] = float64(x) - p.mean[j]
		}
		for a := range d {
			ca := c[a]
			if ca == 0 {
				continue
			}
			row := cov[a*d : a*d+d]
			for b := a; b < d; b++ {
				row[b] += ca * c[b]
			}
		}
	}
	for a := range d {
		for b := a; b < d; b++ {
			cov[a*d+b] /= float64(len(vecs))
			cov[b*d+a] = cov[a*d+b]
		}
		p.totalVar += cov[a*d+a]
	}
	for k := range 2 {
		axis, lambda := leadingEigen(cov, d, k)
		p.axes[k] = axis
		if p.totalVar > 0 {
			p.explain[k] = lambda / p.totalVar
		}
		// Deflate: cov -= lambda * axis axisᵀ.
		for a := range d {
			for b := range d {
				cov[a*d+b] -= lambda * axis[a] * axis[b]
			}
		}
	}
	return p, nil
}

// leadingEigen returns the unit leading eigenvector of the symmetric d×d
// matrix m and its eigenvalue, by power iteration from a fixed start (seeded
// by k so that the second component does not start on the first). A zero
// matrix gives a zero vector and 0.
func leadingEigen(m []float64, d, k int) ([]float64, float64) {
	v := make([]float64, d)
	for i := range v {
		// A fixed, non-degenerate start: not orthogonal to any axis in general.
		v[i] = 1 + 0.1*float64((i*(k+7)+3)%11)
	}
	normalize(v)
	next := make([]float64, d)
	lambda := 0.0
	for range powerIterations {
		for a := range d {
			s := 0.0
			row := m[a*d : a*d+d]
			for b, x := range row {
				s += x * v[b]
			}
			next[a] = s
		}
		lambda = normalize(next)
		if lambda < 1e-12 {
			return make([]float64, d), 0
		}
		delta := 0.0
		for i := range v {
			delta += math.Abs(next[i] - v[i])
		}
		v, next = next, v
		if delta < powerTolerance {
			break
		}
	}
	// Sign: the largest-magnitude coefficient is positive.
	best := 0
	for i := range v {
		if math.Abs(v[i]) > math.Abs(v[best]) {
			best = i
		}
	}
	if v[best] < 0 {
		for i := range v {
			v[i] = -v[i]
		}
	}
	return v, lambda
}

// normalize scales v to unit length and returns its former length.
func normalize(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	n := math.Sqrt(s)
	if n == 0 {
		return 0
	}
	for i := range v {
		v[i] /= n
	}
	return n
}

// Dim returns the dimension of the vectors the basis projects.
func (p *PCA) Dim() int { return len(p.mean) }

// SampleSize returns the number of vectors the basis was fitted on.
func (p *PCA) SampleSize() int { return p.n }

// Explained returns the share of the sample's variance along each axis.
func (p *PCA) Explained() [2]float64 { return p.explain }

// Project returns v's coordinates on the two axes: the dot products of
// v minus the sample mean with each axis. ok is false when v's dimension
// is not the basis's.
func (p *PCA) Project(v []float32) (x, y float64, ok bool) {
	if len(v) != len(p.mean) {
		return 0, 0, false
	}
	for j, f := range v {
		c := float64(f) - p.mean[j]
		x += c * p.axes[0][j]
		y += c * p.axes[1][j]
	}
	return x, y, true
}
