package model

import (
	"math"
	"math/rand/v2"
	"testing"

	G "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// TestAlignLoss checks the in-batch contrastive loss: matched pairs score
// far below chance, shuffled pairs do not, and explicit negatives (label 0)
// are left out.
func TestAlignLoss(t *testing.T) {
	be, err := Backend()
	if err != nil {
		t.Fatal(err)
	}
	const P, E = 8, 16
	rng := rand.New(rand.NewPCG(3, 4))
	unit := func() []float32 {
		v := make([]float32, E)
		var n float64
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			n += float64(v[i] * v[i])
		}
		for i := range v {
			v[i] /= float32(math.Sqrt(n))
		}
		return v
	}
	srcs := make([][]float32, P)
	for i := range srcs {
		srcs[i] = unit()
	}
	// layout [3P, E]: sources, destinations, random nodes
	layout := func(dstOf func(i int) []float32) []float32 {
		var flat []float32
		for i := range P {
			flat = append(flat, srcs[i]...)
		}
		for i := range P {
			flat = append(flat, dstOf(i)...)
		}
		for range P {
			flat = append(flat, unit()...)
		}
		return flat
	}
	ones := make([]float32, 3*P)
	for i := range ones {
		ones[i] = 1
	}
	onlyFirst := make([]float32, 3*P)
	onlyFirst[0] = 1
	chance := math.Log(2*P) + math.Log(P)
	exec := G.MustNewExec(be, func(emb, label *G.Node) *G.Node { return alignLoss(emb, label, nil, P, 0.1) })
	loss := func(flat, label []float32) float64 {
		out := exec.MustExec(tensors.FromFlatDataAndDimensions(flat, 3*P, E), tensors.FromFlatDataAndDimensions(label, 3*P))
		return float64(out[0].Value().(float32))
	}
	matched := layout(func(i int) []float32 { return srcs[i] })
	shuffled := layout(func(i int) []float32 { return srcs[(i+1)%P] })
	// Event 0 matched, the others shuffled among themselves.
	firstMatched := layout(func(i int) []float32 {
		if i == 0 {
			return srcs[0]
		}
		return srcs[1+i%(P-1)]
	})
	cases := []struct {
		name     string
		flat     []float32
		label    []float32
		min, max float64
	}{
		{"matched pairs", matched, ones, 0, chance / 4},
		{"shuffled pairs", shuffled, ones, chance / 2, math.Inf(1)},
		{"first matched, all counted", firstMatched, ones, chance / 2, math.Inf(1)},
		{"label 0 left out", firstMatched, onlyFirst, 0, chance / 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := loss(tc.flat, tc.label)
			if got < tc.min || got > tc.max || math.IsNaN(got) {
				t.Errorf("alignLoss = %.4f, want in [%.4f, %.4f] (chance %.4f)", got, tc.min, tc.max, chance)
			}
		})
	}

	// The cross-view loss: the same views give alignLoss; a student view
	// unrelated to the teacher's (every row random) is at chance level
	// both ways, even when the teacher views are matched.
	cold := G.MustNewExec(be, func(teacher, student, label *G.Node) *G.Node {
		return coldAlignLoss(teacher, student, label, nil, P, 0.1)
	})
	coldLoss := func(teacher, student []float32) float64 {
		out := cold.MustExec(tensors.FromFlatDataAndDimensions(teacher, 3*P, E), tensors.FromFlatDataAndDimensions(student, 3*P, E),
			tensors.FromFlatDataAndDimensions(ones, 3*P))
		return float64(out[0].Value().(float32))
	}
	for _, flat := range [][]float32{matched, shuffled} {
		if got, want := coldLoss(flat, flat), loss(flat, ones); math.Abs(got-want) > 1e-4 {
			t.Errorf("coldAlignLoss with equal views = %.4f, want alignLoss %.4f", got, want)
		}
	}
	var noise []float32
	for range 3 * P {
		noise = append(noise, unit()...)
	}
	if got := coldLoss(matched, noise); got < chance/2 {
		t.Errorf("coldAlignLoss with unrelated student views = %.4f, want >= %.4f", got, chance/2)
	}
}

// TestUpdatePrototypes checks the moving-average codebook update: with
// momentum m a prototype moves to normalise(m*p + (1-m)*dir), dir being the
// normalised q-weighted sum of the rows (padding rows, weight 0, left out),
// a prototype given no mass keeps its value, the result stays unit norm and
// the variable is not trainable.
func TestUpdatePrototypes(t *testing.T) {
	be, err := Backend()
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Prototypes: []int{3}, EmbedDim: 2, ProtoMomentum: 0.5}
	ctx := newModelContext(1)
	v := prototypeVar(ctx, c, 0)
	v.MustSetValue(tensors.FromFlatDataAndDimensions([]float32{1, 0, 0, 1, -1, 0}, 3, 2))
	if v.Trainable {
		t.Errorf("prototype variable is trainable with ProtoMomentum > 0")
	}
	// Rows: (0,1) and (1,0) to prototype 0 half each, (0,1) to prototype 1,
	// a padding row (weight 0) to prototype 2.
	teacher := []float32{0, 1, 1, 0, 0, 1, 5, 5}
	q := []float32{0.5, 0, 0, 0.5, 0, 0, 0, 1, 0, 0, 0, 1}
	rowW := []float32{1, 1, 1, 0}
	exec := context.MustNewExec(be, ctx, func(ctx *context.Context, teacher, q, rowW *G.Node) *G.Node {
		p := prototypes(ctx, c, teacher.Graph(), 0)
		updatePrototypes(ctx, c, 0, p, teacher, q, rowW)
		return p
	})
	exec.MustExec(tensors.FromFlatDataAndDimensions(teacher, 4, 2), tensors.FromFlatDataAndDimensions(q, 4, 3), tensors.FromFlatDataAndDimensions(rowW, 4))
	got := tensors.MustCopyFlatData[float32](v.MustValue())
	s := float32(math.Sqrt(0.5))
	// p0: 0.5*(1,0) + 0.5*(s,s) normalised; p1: (0,1) stays; p2: no mass.
	a, b := 0.5+0.5*s, 0.5*s
	n := float32(math.Sqrt(float64(a*a + b*b)))
	want := []float32{a / n, b / n, 0, 1, -1, 0}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-5 {
			t.Fatalf("prototypes after the update = %v, want %v", got, want)
		}
	}
}

// TestAlignLossLogQ checks the sampled-softmax correction against a direct
// computation: each candidate's logit is lowered by its log share, and a
// popular candidate so corrected no longer wins by being sampled often.
func TestAlignLossLogQ(t *testing.T) {
	be, err := Backend()
	if err != nil {
		t.Fatal(err)
	}
	const P, E, temp = 4, 8, 0.1
	rng := rand.New(rand.NewPCG(5, 6))
	emb := make([]float32, 3*P*E)
	for r := range 3 * P {
		var n float64
		for i := range E {
			v := rng.NormFloat64()
			emb[r*E+i] = float32(v)
			n += v * v
		}
		for i := range E {
			emb[r*E+i] /= float32(math.Sqrt(n))
		}
	}
	label := make([]float32, 3*P)
	for i := range P {
		label[i] = 1
	}
	dot := func(a, b int) float64 {
		var s float64
		for i := range E {
			s += float64(emb[a*E+i]) * float64(emb[b*E+i])
		}
		return s
	}
	// naive is the mean over events of -log softmax(fwd)[own] - log softmax(bwd)[own].
	naive := func(logq []float32) float64 {
		var total float64
		for p := range P {
			fwd := make([]float64, 2*P)
			for q := range 2 * P {
				fwd[q] = dot(p, P+q) / temp
				if logq != nil {
					fwd[q] -= float64(logq[q])
				}
			}
			bwd := make([]float64, P)
			for q := range P {
				bwd[q] = dot(P+p, q) / temp
			}
			total += logSumExp(fwd) - fwd[p] + logSumExp(bwd) - bwd[p]
		}
		return total / P
	}
	exec := G.MustNewExec(be, func(emb, label, logq *G.Node) *G.Node { return alignLoss(emb, label, logq, P, temp) })
	plain := G.MustNewExec(be, func(emb, label *G.Node) *G.Node { return alignLoss(emb, label, nil, P, temp) })
	tests := []struct {
		name string
		logq []float32
	}{
		{"no correction", nil},
		{"uniform shares: same as none", []float32{-2, -2, -2, -2, -2, -2, -2, -2}},
		{"popular destinations", []float32{-0.5, -1, -3, -6, -7, -7, -7, -7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out []*tensors.Tensor
			in := []any{tensors.FromFlatDataAndDimensions(emb, 3*P, E), tensors.FromFlatDataAndDimensions(label, 3*P)}
			if tc.logq == nil {
				out = plain.MustExec(in...)
			} else {
				out = exec.MustExec(append(in, tensors.FromFlatDataAndDimensions(tc.logq, 2*P))...)
			}
			got, want := float64(out[0].Value().(float32)), naive(tc.logq)
			if math.Abs(got-want) > 1e-3 {
				t.Errorf("alignLoss = %.5f, want %.5f", got, want)
			}
		})
	}
}

func logSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	var s float64
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}
