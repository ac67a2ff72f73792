package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestDotGradientsMatchFiniteDifferences checks the registered DotGeneral/Dot
// gradients against central finite differences in float64.
func TestDotGradientsMatchFiniteDifferences(t *testing.T) {
	RegisterFastDotGradients()
	be, err := Backend()
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name     string
		lhs, rhs []int
		op       func(l, r *graph.Node) *graph.Node
	}
	cases := []tc{
		{"matmul", []int{3, 4}, []int{4, 5}, func(l, r *graph.Node) *graph.Node { return graph.Einsum("ij,jk->ik", l, r) }},
		{"batched attention", []int{2, 3, 4, 5}, []int{2, 3, 6, 5}, func(l, r *graph.Node) *graph.Node { return graph.Einsum("bhqd,bhkd->bhqk", l, r) }},
		{"contract two axes", []int{2, 3, 4}, []int{4, 3, 5}, func(l, r *graph.Node) *graph.Node {
			return graph.DotGeneral(l, []int{2, 1}, nil, r, []int{0, 1}, nil)
		}},
		{"batch not first", []int{3, 2, 4}, []int{4, 5, 2}, func(l, r *graph.Node) *graph.Node {
			return graph.DotGeneral(l, []int{2}, []int{1}, r, []int{0}, []int{2})
		}},
		{"outer", []int{3}, []int{4}, func(l, r *graph.Node) *graph.Node { return graph.DotGeneral(l, nil, nil, r, nil, nil) }},
		{"dot matrix", []int{3, 4}, []int{4, 2}, graph.Dot},
		{"dot matvec", []int{3, 4}, []int{4}, graph.Dot},
		{"dot vecvec", []int{4}, []int{4}, graph.Dot},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lv := randSlice(rng, c.lhs)
			rv := randSlice(rng, c.rhs)
			// Weighted sum of the output so every output element matters.
			loss := func(l, r *graph.Node) *graph.Node {
				out := c.op(l, r)
				if out.Rank() == 0 {
					return graph.MulScalar(out, 1.3)
				}
				w := graph.Sin(graph.AddScalar(graph.Iota(out.Graph(), out.Shape(), 0), 1))
				if out.Rank() > 1 {
					w = graph.Add(w, graph.Cos(graph.Iota(out.Graph(), out.Shape(), out.Rank()-1)))
				}
				return graph.ReduceAllSum(graph.Mul(out, w))
			}
			exec := graph.MustNewExec(be, func(l, r *graph.Node) []*graph.Node {
				y := loss(l, r)
				grads := graph.Gradient(y, l, r)
				return []*graph.Node{y, grads[0], grads[1]}
			})
			fwd := graph.MustNewExec(be, func(l, r *graph.Node) *graph.Node { return loss(l, r) })
			lt := tensors.FromFlatDataAndDimensions(lv, c.lhs...)
			rt := tensors.FromFlatDataAndDimensions(rv, c.rhs...)
			outs := exec.MustExec(lt, rt)
			gl := outs[1].Value()
			gr := outs[2].Value()
			check := func(name string, vals []float64, grad any) {
				flatGrad := tensors.FromAnyValue(grad)
				g := tensors.MustCopyFlatData[float64](flatGrad)
				const eps = 1e-6
				for i := range vals {
					orig := vals[i]
					eval := func(x float64) float64 {
						vals[i] = x
						defer func() { vals[i] = orig }()
						a := tensors.FromFlatDataAndDimensions(lv, c.lhs...)
						b := tensors.FromFlatDataAndDimensions(rv, c.rhs...)
						return fwd.MustExec(a, b)[0].Value().(float64)
					}
					num := (eval(orig+eps) - eval(orig-eps)) / (2 * eps)
					if math.Abs(num-g[i]) > 1e-5*(1+math.Abs(num)) {
						t.Fatalf("grad %s[%d] = %v, want %v (finite difference)", name, i, g[i], num)
					}
				}
			}
			check("lhs", lv, gl)
			check("rhs", rv, gr)
		})
	}
}

func randSlice(rng *rand.Rand, dims []int) []float64 {
	n := 1
	for _, d := range dims {
		n *= d
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = rng.NormFloat64()
	}
	return out
}
