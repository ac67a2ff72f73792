package model

// This file holds everything in package model that changes or works around
// process-wide state of GoMLX, pinned to the version in go.mod
// (PatchedGoMLXVersion; TestGoMLXVersionPinned fails when go.mod moves, so
// that every patch is re-checked against the new version):
//
//   - RegisterFastDotGradients replaces the DotGeneral and Dot gradients in
//     GoMLX's process-wide G.VJPRegistration table (the stock ones build a
//     broadcast product + ReduceSum; fixed upstream after v0.26.0), and reads
//     a DotGeneral node's axes by reflection from an unexported struct.
//   - Backend creates the one process-wide backend: it defaults to the
//     pure-Go backend with parallelism=-1 (its bounded worker pool can
//     deadlock with several DotGenerals at once), sets GOMLX_NO_AUTO_INSTALL,
//     and silences SimpleGo's fmt.Printf to standard output while it starts.
//
// Nothing else in the package touches GoMLX globals.

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"

	"github.com/gomlx/gomlx/backends"
	_ "github.com/gomlx/gomlx/backends/default" // simplego always; XLA when GOMLX_BACKEND=xla:... (cgo builds)
	G "github.com/gomlx/gomlx/pkg/core/graph"   // aliased: the project has its own graph package
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// PatchedGoMLXVersion is the GoMLX module version the patches of this file
// were written and checked against (see the file comment).
const PatchedGoMLXVersion = "v0.26.0"

var registerGradientsOnce sync.Once

// RegisterFastDotGradients replaces GoMLX v0.26.0's gradients of DotGeneral and
// Dot with ones built from DotGeneral itself. The stock gradient materialises a
// broadcast product of both operands followed by a ReduceSum (for example a
// [256,32,64,128] tensor for a 64->128 dense layer), which dominates the training
// step on the pure-Go backend. The replacement computes the same values with two
// DotGenerals and a transpose.
//
// It edits the process-wide G.VJPRegistration table once; later calls are
// no-ops. It is called by every constructor of this package that builds
// gradients, and is safe for concurrent use.
func RegisterFastDotGradients() {
	registerGradientsOnce.Do(func() {
		G.VJPRegistration[G.NodeTypeDotGeneral] = func(node *G.Node, v []*G.Node, _ shapes.Shape) []*G.Node {
			return dotGeneralGrad(node, v[0])
		}
		G.VJPRegistration[G.NodeTypeDot] = func(node *G.Node, v []*G.Node, _ shapes.Shape) []*G.Node {
			return dotGrad(node, v[0])
		}
	})
}

// dotGeneralAxes reads the axes of a DotGeneral node. GoMLX keeps them in an
// unexported struct; reflection reads (never writes) them.
type dotGeneralAxes struct {
	lhsContracting, lhsBatch, rhsContracting, rhsBatch []int
}

func readDotGeneralAxes(node *G.Node) dotGeneralAxes {
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
func dotGeneralGrad(node, v *G.Node) []*G.Node {
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
		other *G.Node, otherBatch, otherContracting, otherCross []int) *G.Node {
		_ = vThisCross
		g := G.DotGeneral(v, vOtherCross, vBatch, other, otherCross, otherBatch)
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
		return G.TransposeAllAxes(g, perm...)
	}
	return []*G.Node{
		grad(lhs.Rank(), ax.lhsBatch, ax.lhsContracting, lhsCross, vLhsCross, vRhsCross, rhs, ax.rhsBatch, ax.rhsContracting, rhsCross),
		grad(rhs.Rank(), ax.rhsBatch, ax.rhsContracting, rhsCross, vRhsCross, vLhsCross, lhs, ax.lhsBatch, ax.lhsContracting, lhsCross),
	}
}

// dotGrad handles G.Dot: vector.vector, matrix.vector and matrix.matrix.
func dotGrad(node, v *G.Node) []*G.Node {
	in := node.Inputs()
	lhs, rhs := in[0], in[1]
	switch {
	case lhs.Rank() == 1 && rhs.Rank() == 1:
		return []*G.Node{G.Mul(v, rhs), G.Mul(v, lhs)}
	case lhs.Rank() == 2 && rhs.Rank() == 1:
		// out[i] = sum_j lhs[i,j] rhs[j].
		return []*G.Node{
			G.DotGeneral(G.InsertAxes(v, -1), []int{1}, nil, G.InsertAxes(rhs, 0), []int{0}, nil),
			G.DotGeneral(lhs, []int{0}, nil, v, []int{0}, nil),
		}
	case lhs.Rank() == 2 && rhs.Rank() == 2:
		return []*G.Node{
			G.DotGeneral(v, []int{1}, nil, rhs, []int{1}, nil),
			G.DotGeneral(lhs, []int{0}, nil, v, []int{0}, nil),
		}
	}
	panic(fmt.Sprintf("model: Dot of ranks %d and %d has no gradient", lhs.Rank(), rhs.Rank()))
}

var (
	backendOnce sync.Once
	backendVal  backends.Backend
	backendErr  error
)

// Backend returns the process-wide GoMLX backend, created on first use. It
// honours GOMLX_BACKEND (e.g. "go", "xla:cuda", "xla:/path/pjrt_plugin.so");
// when the variable is unset it uses the pure-Go backend instead of GoMLX's
// default, which would try to download XLA. The pure-Go backend ("go" without
// options) runs with parallelism=-1: its bounded worker pool can deadlock when
// several DotGenerals run at once. Safe for concurrent use.
func Backend() (backends.Backend, error) {
	backendOnce.Do(func() {
		if os.Getenv("GOMLX_NO_AUTO_INSTALL") == "" {
			_ = os.Setenv("GOMLX_NO_AUTO_INSTALL", "1")
		}
		config := os.Getenv("GOMLX_BACKEND")
		if config == "" || config == "go" {
			config = "go:parallelism=-1"
		}
		backendVal, backendErr = newQuietBackend(config)
		if backendErr != nil {
			backendErr = fmt.Errorf("create gomlx backend %q: %w", config, backendErr)
		}
	})
	return backendVal, backendErr
}

// newQuietBackend creates the backend. SimpleGo prints its parallelism
// setting to standard output with fmt.Printf, which would corrupt the JSON
// that commands write there, so stdout points at the null device while it is
// created. This runs once per process, before any of our output.
func newQuietBackend(config string) (backends.Backend, error) {
	if devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		stdout := os.Stdout
		os.Stdout = devNull
		defer func() {
			os.Stdout = stdout
			devNull.Close()
		}()
	}
	return backends.NewWithConfig(config)
}
