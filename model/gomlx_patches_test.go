package model

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	G "github.com/gomlx/gomlx/pkg/core/graph"
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
		op       func(l, r *G.Node) *G.Node
	}
	cases := []tc{
		{"matmul", []int{3, 4}, []int{4, 5}, func(l, r *G.Node) *G.Node { return G.Einsum("ij,jk->ik", l, r) }},
		{"batched attention", []int{2, 3, 4, 5}, []int{2, 3, 6, 5}, func(l, r *G.Node) *G.Node { return G.Einsum("bhqd,bhkd->bhqk", l, r) }},
		{"contract two axes", []int{2, 3, 4}, []int{4, 3, 5}, func(l, r *G.Node) *G.Node {
			return G.DotGeneral(l, []int{2, 1}, nil, r, []int{0, 1}, nil)
		}},
		{"batch not first", []int{3, 2, 4}, []int{4, 5, 2}, func(l, r *G.Node) *G.Node {
			return G.DotGeneral(l, []int{2}, []int{1}, r, []int{0}, []int{2})
		}},
		{"outer", []int{3}, []int{4}, func(l, r *G.Node) *G.Node { return G.DotGeneral(l, nil, nil, r, nil, nil) }},
		{"dot matrix", []int{3, 4}, []int{4, 2}, G.Dot},
		{"dot matvec", []int{3, 4}, []int{4}, G.Dot},
		{"dot vecvec", []int{4}, []int{4}, G.Dot},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lv := randSlice(rng, c.lhs)
			rv := randSlice(rng, c.rhs)
			// Weighted sum of the output so every output element matters.
			loss := func(l, r *G.Node) *G.Node {
				out := c.op(l, r)
				if out.Rank() == 0 {
					return G.MulScalar(out, 1.3)
				}
				w := G.Sin(G.AddScalar(G.Iota(out.Graph(), out.Shape(), 0), 1))
				if out.Rank() > 1 {
					w = G.Add(w, G.Cos(G.Iota(out.Graph(), out.Shape(), out.Rank()-1)))
				}
				return G.ReduceAllSum(G.Mul(out, w))
			}
			exec := G.MustNewExec(be, func(l, r *G.Node) []*G.Node {
				y := loss(l, r)
				grads := G.Gradient(y, l, r)
				return []*G.Node{y, grads[0], grads[1]}
			})
			fwd := G.MustNewExec(be, func(l, r *G.Node) *G.Node { return loss(l, r) })
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

// TestGoMLXVersionPinned fails when the GoMLX version in go.mod (or the one
// linked into this test binary) is not PatchedGoMLXVersion: the patches of
// gomlx_patches.go replace process-wide GoMLX internals and must be
// re-checked (are the gradients still needed and still right, does the
// reflected DotGeneral struct still exist, does SimpleGo's pool still
// deadlock) before the pin moves.
func TestGoMLXVersionPinned(t *testing.T) {
	const module = "github.com/gomlx/gomlx"
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module {
			got = f[1]
		}
	}
	if got != PatchedGoMLXVersion {
		t.Errorf("go.mod requires %s %q, want %q: re-check the patches in gomlx_patches.go, then move PatchedGoMLXVersion", module, got, PatchedGoMLXVersion)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == module && d.Version != PatchedGoMLXVersion {
				t.Errorf("binary links %s %s, want %s", module, d.Version, PatchedGoMLXVersion)
			}
		}
	}
}
