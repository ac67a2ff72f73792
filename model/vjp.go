package model

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

var registerGradientsOnce sync.Once

// RegisterFastDotGradients replaces GoMLX v0.26.0's gradients of DotGeneral and
// Dot with ones built from DotGeneral itself. The stock gradient materialises a
// broadcast product of both operands followed by a ReduceSum (for example a
// [256,32,64,128] tensor for a 64->128 dense layer), which dominates the training
// step on the pure-Go backend. The replacement computes the same values with two
// DotGenerals and a transpose.
//
// It edits the process-wide graph.VJPRegistration table once; later calls are
// no-ops. It is called by every constructor of this package that builds
// gradients, and is safe for concurrent use.
func RegisterFastDotGradients() {
	registerGradientsOnce.Do(func() {
		graph.VJPRegistration[graph.NodeTypeDotGeneral] = func(node *graph.Node, v []*graph.Node, _ shapes.Shape) []*graph.Node {
			return dotGeneralGrad(node, v[0])
		}
		graph.VJPRegistration[graph.NodeTypeDot] = func(node *graph.Node, v []*graph.Node, _ shapes.Shape) []*graph.Node {
			return dotGrad(node, v[0])
		}
	})
}

// dotGeneralAxes reads the axes of a DotGeneral node. GoMLX keeps them in an
// unexported struct; reflection reads (never writes) them.
type dotGeneralAxes struct {
	lhsContracting, lhsBatch, rhsContracting, rhsBatch []int
}

func readDotGeneralAxes(node *graph.Node) dotGeneralAxes {
	inputs := reflect.ValueOf(node).Elem().FieldByName("inputs")
	if !inputs.IsValid() || inputs.IsNil() {
		panic(fmt.Sprintf("model: DotGeneral node has no inputs field: %s", node))
	}
	s := inputs.Elem().Elem()
	ints := func(name string) []int {
		f := s.FieldByName(name)
		if !f.IsValid() {
			panic(fmt.Sprintf("model: DotGeneral node lacks %s (GoMLX version changed?)", name))
		}
		out := make([]int, f.Len())
		for i := range out {
			out[i] = int(f.Index(i).Int())
		}
		return out
	}
	return dotGeneralAxes{
		lhsContracting: ints("lhsContractingAxes"),
		lhsBatch:       ints("lhsBatchAxes"),
		rhsContracting: ints("rhsContractingAxes"),
		rhsBatch:       ints("rhsBatchAxes"),
	}
}

// crossAxes lists the axes of an operand of the given rank that are neither
// contracted nor batch, in increasing order.
func crossAxes(rank int, contracting, batch []int) []int {
	var out []int
	for a := range rank {
		if !slices.Contains(contracting, a) && !slices.Contains(batch, a) {
			out = append(out, a)
		}
	}
	return out
}

// dotGeneralGrad returns the gradients of out = DotGeneral(lhs, rhs) with
// respect to lhs and rhs given the adjoint v of out. out's axes are
// [batch..., lhsCross..., rhsCross...].
func dotGeneralGrad(node, v *graph.Node) []*graph.Node {
	ax := readDotGeneralAxes(node)
	in := node.Inputs()
	lhs, rhs := in[0], in[1]
	nb := len(ax.lhsBatch)
	lhsCross := crossAxes(lhs.Rank(), ax.lhsContracting, ax.lhsBatch)
	rhsCross := crossAxes(rhs.Rank(), ax.rhsContracting, ax.rhsBatch)
	vBatch := make([]int, nb)
	for i := range vBatch {
		vBatch[i] = i
	}
	vLhsCross := make([]int, len(lhsCross))
	for i := range vLhsCross {
		vLhsCross[i] = nb + i
	}
	vRhsCross := make([]int, len(rhsCross))
	for i := range vRhsCross {
		vRhsCross[i] = nb + len(lhsCross) + i
	}
	// grad(this) = DotGeneral(v, contract other's cross axes, other operand).
	// Result axes: [batch..., thisCross..., otherContracting (ascending)...].
	grad := func(thisRank int, thisBatch, thisContracting, thisCross []int, vThisCross, vOtherCross []int,
		other *graph.Node, otherBatch, otherContracting, otherCross []int) *graph.Node {
		_ = vThisCross
		g := graph.DotGeneral(v, vOtherCross, vBatch, other, otherCross, otherBatch)
		sortedOC := slices.Clone(otherContracting)
		slices.Sort(sortedOC)
		perm := make([]int, thisRank)
		for i, a := range thisBatch {
			perm[a] = i
		}
		for i, a := range thisCross {
			perm[a] = nb + i
		}
		for k, a := range thisContracting {
			perm[a] = nb + len(thisCross) + slices.Index(sortedOC, otherContracting[k])
		}
		identity := true
		for i, p := range perm {
			if i != p {
				identity = false
			}
		}
		if identity {
			return g
		}
		return graph.TransposeAllAxes(g, perm...)
	}
	return []*graph.Node{
		grad(lhs.Rank(), ax.lhsBatch, ax.lhsContracting, lhsCross, vLhsCross, vRhsCross, rhs, ax.rhsBatch, ax.rhsContracting, rhsCross),
		grad(rhs.Rank(), ax.rhsBatch, ax.rhsContracting, rhsCross, vRhsCross, vLhsCross, lhs, ax.lhsBatch, ax.lhsContracting, lhsCross),
	}
}

// dotGrad handles graph.Dot: vector.vector, matrix.vector and matrix.matrix.
func dotGrad(node, v *graph.Node) []*graph.Node {
	in := node.Inputs()
	lhs, rhs := in[0], in[1]
	switch {
	case lhs.Rank() == 1 && rhs.Rank() == 1:
		return []*graph.Node{graph.Mul(v, rhs), graph.Mul(v, lhs)}
	case lhs.Rank() == 2 && rhs.Rank() == 1:
		// out[i] = sum_j lhs[i,j] rhs[j].
		return []*graph.Node{
			graph.DotGeneral(graph.InsertAxes(v, -1), []int{1}, nil, graph.InsertAxes(rhs, 0), []int{0}, nil),
			graph.DotGeneral(lhs, []int{0}, nil, v, []int{0}, nil),
		}
	case lhs.Rank() == 2 && rhs.Rank() == 2:
		return []*graph.Node{
			graph.DotGeneral(v, []int{1}, nil, rhs, []int{1}, nil),
			graph.DotGeneral(lhs, []int{0}, nil, v, []int{0}, nil),
		}
	}
	panic(fmt.Sprintf("model: Dot of ranks %d and %d has no gradient", lhs.Rank(), rhs.Rank()))
}
