package index

import (
	"context"
	"fmt"
	"math"
)

// productQuantizer encodes what a doc's path code leaves of its embedding
// (Quantizer.residual) by product quantisation: the dimensions are split
// into contiguous subspaces, and each subspace's part of the residual is
// replaced by the nearest of at most 256 codewords, one byte. With the
// path code this is the first stage's code of a doc: a query's approximate
// similarity to it is a sum of table entries (asymmetric distance
// computation), read from a few dozen bytes instead of the embedding.
type productQuantizer struct {
	bounds []int       // len M+1: subspace s covers dimensions bounds[s]..bounds[s+1]
	cents  [][]float32 // per subspace, K*width row-major codewords
	k      int         // codewords per subspace, <= 256
}

// productK is the number of codewords per subspace: one byte a subspace.
const productK = 256

// productFitSample bounds the residuals the subspaces' k-means clusters.
const productFitSample = 16384

// subspaceBounds splits dim dimensions into m contiguous subspaces whose
// widths differ by at most one.
func subspaceBounds(dim, m int) []int {
	b := make([]int, m+1)
	for s := range b {
		b[s] = s * dim / m
	}
	return b
}

// newProductQuantizer checks fitted codebooks (per subspace, K codewords
// of the subspace's width) against dim.
func newProductQuantizer(dim int, cbs [][][]float32) (*productQuantizer, error) {
	m := len(cbs)
	if m == 0 || m > dim {
		return nil, fmt.Errorf("product codebooks: %d subspaces for %d dimensions: %w", m, dim, ErrBadQuantizer)
	}
	p := &productQuantizer{bounds: subspaceBounds(dim, m), k: len(cbs[0])}
	if p.k == 0 || p.k > productK {
		return nil, fmt.Errorf("product codebooks: %d codewords, want 1..%d: %w", p.k, productK, ErrBadQuantizer)
	}
	for s, cb := range cbs {
		w := p.bounds[s+1] - p.bounds[s]
		if len(cb) != p.k {
			return nil, fmt.Errorf("product codebook %d: %d codewords, want %d: %w", s, len(cb), p.k, ErrBadQuantizer)
		}
		if _, err := checkVectors(cb, w); err != nil {
			return nil, fmt.Errorf("product codebook %d: %w", s, err)
		}
		p.cents = append(p.cents, flatten(cb, w))
	}
	return p, nil
}

// fitProduct fits m subspaces' codebooks on residuals (k-means per
// subspace, deterministic for the seed).
func fitProduct(ctx context.Context, resid [][]float32, dim, m int, seed uint64, iterations, workers int) (*productQuantizer, error) {
	sample := resid
	if len(sample) > productFitSample {
		sample = make([][]float32, productFitSample)
		for i := range sample {
			sample[i] = resid[i*len(resid)/productFitSample]
		}
	}
	bounds := subspaceBounds(dim, m)
	k := min(productK, len(sample))
	cbs := make([][][]float32, m)
	part := make([][]float32, len(sample))
	for s := range m {
		for i, r := range sample {
			part[i] = r[bounds[s]:bounds[s+1]]
		}
		cb, err := KMeans(ctx, part, KMeansOptions{K: k, Iterations: iterations, Seed: seed + uint64(s), Workers: workers})
		if err != nil {
			return nil, fmt.Errorf("product subspace %d: %w", s, err)
		}
		cbs[s] = cb
	}
	return newProductQuantizer(dim, cbs)
}

// subspaces returns the number of subspaces: the bytes of a code.
func (p *productQuantizer) subspaces() int { return len(p.cents) }

// encode writes r's code to out (subspaces() bytes) and subtracts the
// code's reconstruction from r, leaving what the code does not explain.
func (p *productQuantizer) encode(r []float32, out []byte) {
	for s, flat := range p.cents {
		lo, hi := p.bounds[s], p.bounds[s+1]
		c, _ := nearestL2(flat, hi-lo, r[lo:hi])
		out[s] = byte(c)
		sub(r[lo:hi], flat[int(c)*(hi-lo):(int(c)+1)*(hi-lo)])
	}
}

// subtractCode subtracts the reconstruction of code from r.
func (p *productQuantizer) subtractCode(code []byte, r []float32) {
	for s, flat := range p.cents {
		lo, hi := p.bounds[s], p.bounds[s+1]
		c := int(code[s])
		sub(r[lo:hi], flat[c*(hi-lo):(c+1)*(hi-lo)])
	}
}

// productTable is one query's dot products with every subspace's
// codewords, subspace-major (K entries each).
type productTable struct {
	t []float32
	k int
}

// table returns vec's table.
func (p *productQuantizer) table(vec []float32) productTable {
	t := make([]float32, len(p.cents)*p.k)
	for s, flat := range p.cents {
		lo, hi := p.bounds[s], p.bounds[s+1]
		w, q := hi-lo, vec[lo:hi]
		row := t[s*p.k : (s+1)*p.k]
		if w == 4 { // the usual width (Dim/4 subspaces), unrolled
			q0, q1, q2, q3 := q[0], q[1], q[2], q[3]
			for c := range row {
				cw := flat[4*c : 4*c+4 : 4*c+4]
				row[c] = q0*cw[0] + q1*cw[1] + q2*cw[2] + q3*cw[3]
			}
			continue
		}
		for c := range row {
			var d float32
			for j, x := range flat[c*w : (c+1)*w] {
				d += x * q[j]
			}
			row[c] = d
		}
	}
	return productTable{t: t, k: p.k}
}

// sim returns the query's dot product with the reconstruction of code.
func (t productTable) sim(code []byte) float32 {
	var a, b float32
	row := t.t
	i := 0
	for ; i+1 < len(code); i += 2 {
		a += row[int(code[i])]
		b += row[t.k+int(code[i+1])]
		row = row[2*t.k:]
	}
	if i < len(code) {
		a += row[int(code[i])]
	}
	return a + b
}

// norm32 is the Euclidean norm of r.
func norm32(r []float32) float32 { return float32(math.Sqrt(float64(Dot(r, r)))) }
