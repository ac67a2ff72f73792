package model

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/hir-ads/hir/graph"
)

// prototypeVar returns the variable of level l's prototypes [K_l, EmbedDim].
// With c.ProtoMomentum > 0 it is not trained by the optimizer but moved by
// [updatePrototypes].
func prototypeVar(ctx *context.Context, c Config, l int) *context.Variable {
	v := ctx.In(scopePrototypes).VariableWithShape(fmt.Sprintf("level_%d", l),
		shapes.Make(dtypes.Float32, c.Prototypes[l], c.EmbedDim))
	if c.ProtoMomentum > 0 {
		v.SetTrainable(false)
	}
	return v
}

// prototypes returns the L2-normalised prototypes of level l: [K_l, EmbedDim].
func prototypes(ctx *context.Context, c Config, g *Graph, l int) *Node {
	return L2Normalize(prototypeVar(ctx, c, l).ValueGraph(g), -1)
}

// updatePrototypes moves level l's prototypes (current value protos, L2
// normalised) towards the direction of the teacher embeddings the
// balanced assignment q [B,K] gives them, rows weighted by rowW [B]:
// p <- normalise(m*p + (1-m)*normalise(sum_b w_b q_bk teacher_b)), the
// exponential-moving-average codebook update (online balanced spherical
// k-means). A prototype assigned no mass keeps its value.
func updatePrototypes(ctx *context.Context, c Config, l int, protos, teacher, q, rowW *Node) {
	m := c.ProtoMomentum
	qw := Mul(StopGradient(q), InsertAxes(rowW, -1))
	means := L2Normalize(Einsum("bk,be->ke", qw, StopGradient(teacher)), -1)
	next := Add(MulScalar(StopGradient(protos), m), MulScalar(means, 1-m))
	prototypeVar(ctx, c, l).SetValueGraph(L2Normalize(next, -1))
}

// cosines returns emb [B,E] x prototypes -> [B,K].
func cosines(emb, protos *Node) *Node { return Einsum("be,ke->bk", emb, protos) }

// sinkhorn returns the balanced soft assignment of scores [B,K] (logits
// already divided by the temperature): rows sum to 1, columns to B/K, after
// iters rounds. No gradient flows through it.
func sinkhorn(scores *Node, iters int) *Node {
	B, K := scores.Shape().Dimensions[0], scores.Shape().Dimensions[1]
	s := StopGradient(scores)
	s = Sub(s, ReduceAllMax(s))
	q := Exp(s)
	q = Div(q, ReduceAllSum(q))
	for range iters {
		q = DivScalar(Div(q, ReduceAndKeep(q, ReduceSum, 0)), float64(K)) // each prototype gets 1/K
		q = DivScalar(Div(q, ReduceAndKeep(q, ReduceSum, 1)), float64(B)) // each row gets 1/B
	}
	return StopGradient(MulScalar(q, float64(B)))
}

// softCE is -mean_b sum_k target[b,k] * logp[b,k] over rows weighted by w [B].
func softCE(target, logp, w *Node) *Node {
	per := Neg(ReduceSum(Mul(target, logp), -1))
	return weightedMean(per, w)
}

func weightedMean(x, w *Node) *Node {
	den := Max(ReduceAllSum(w), ScalarOne(w.Graph(), w.DType()))
	return Div(ReduceAllSum(Mul(x, w)), den)
}

// parents returns the one-hot parent map of level l+1 in level l: [K_{l+1}, K_l],
// each fine prototype's nearest coarse prototype (no gradient).
func parents(fine, coarse *Node) *Node {
	sim := StopGradient(Einsum("fe,ce->fc", fine, coarse))
	return OneHot(ArgMax(sim, -1, dtypes.Int32), coarse.Shape().Dimensions[0], dtypes.Float32)
}

// softplus is log(1+exp(x)), computed stably.
func softplus(x *Node) *Node {
	return Add(Max(x, ZerosLike(x)), Log1p(Exp(Neg(Abs(x)))))
}

// engagementLogits scores pairs of rows of emb [A,E]: src, dst, edge type and
// time bucket are [P] int32. The score is a relation-weighted bilinear form.
func engagementLogits(ctx *context.Context, c Config, emb, src, dst, etype, tbucket *Node) *Node {
	g := emb.Graph()
	ctx = ctx.In(scopeEngage)
	tbl := func(name string, rows, cols int) *Node {
		return ctx.In(name).VariableWithShape("table", shapes.Make(dtypes.Float32, rows, cols)).ValueGraph(g)
	}
	es := gatherRows(emb, src)
	ed := gatherRows(emb, dst)
	rel := Add(gatherRows(tbl("edge_type", graph.NumEdgeTypes, c.EmbedDim), etype),
		gatherRows(tbl("time_bucket", graph.NumTimeBuckets, c.EmbedDim), tbucket))
	dot := ReduceSum(Mul(Mul(es, OnePlus(rel)), ed), -1)
	bias := Reshape(gatherRows(tbl("bias", graph.NumEdgeTypes, 1), etype), -1)
	scale := ctx.VariableWithValue("scale", float32(5)).ValueGraph(g)
	return Add(Mul(dot, scale), bias)
}

// alignLoss is an in-batch contrastive (InfoNCE) loss in the embedding space
// itself: the anchors are laid out as P event sources, P event destinations
// and P random nodes of the destinations' types (see buildStep), and each
// source must pick its own destination among the 2P destination-type anchors
// by plain dot product, and each destination its source among the P sources.
// It is what makes retrieval by dot product rank engaged ads first and puts a
// user next to the ads of its interests. label [3P] holds each event's label
// in its first P entries; explicit negatives (label 0) are left out, so they
// never pull together.
func alignLoss(emb, label *Node, temp float64) *Node {
	g := emb.Graph()
	P := emb.Shape().Dimensions[0] / 3
	srcIdx := Iota(g, shapes.Make(dtypes.Int32, P), 0)
	candIdx := AddScalar(Iota(g, shapes.Make(dtypes.Int32, 2*P), 0), float64(P))
	us := gatherRows(emb, srcIdx)                        // [P,E]
	cs := gatherRows(emb, candIdx)                       // [2P,E]: destinations, then random nodes
	ds := gatherRows(emb, AddScalar(srcIdx, float64(P))) // [P,E]
	posW := Reshape(gatherRows(Reshape(label, -1, 1), srcIdx), -1)
	fwd := LogSoftmax(DivScalar(Einsum("pe,qe->pq", us, cs), temp), -1)
	bwd := LogSoftmax(DivScalar(Einsum("pe,qe->pq", ds, us), temp), -1)
	return Add(softCE(OneHot(srcIdx, 2*P, dtypes.Float32), fwd, posW),
		softCE(OneHot(srcIdx, P, dtypes.Float32), bwd, posW))
}

// coldAlignLoss is alignLoss across views, averaged over both ways: the
// sources' student embeddings against the destinations' teacher ones, and
// the sources' teacher embeddings against the destinations' student ones.
// A student view is often the anchor alone (graph.ViewOptions.AnchorOnly),
// so this places a user or ad that has no edges yet from its content.
func coldAlignLoss(teacher, student, label *Node, temp float64) *Node {
	g := teacher.Graph()
	P := teacher.Shape().Dimensions[0] / 3
	// mix takes the student rows where sel is 1 (a constant [3P,1] mask;
	// arithmetic, since Slice has no gradient on SimpleGo).
	mix := func(srcStudent bool) *Node {
		sel := make([]float32, 3*P)
		for i := range sel {
			if (i < P) == srcStudent {
				sel[i] = 1
			}
		}
		m := Const(g, sel)
		m = Reshape(m, 3*P, 1)
		return Add(Mul(student, m), Mul(teacher, OneMinus(m)))
	}
	return MulScalar(Add(alignLoss(mix(true), label, temp), alignLoss(mix(false), label, temp)), 0.5)
}

// stepOutputs indexes the outputs of the loss graph.
const (
	outTotal = iota
	outEngage
	outHier
	outAlign
	outColdAlign
	outFirstDistill // one per level, then one argmax [B] per level, then the engagement logits
)

// lossGraph builds the losses of one step. in holds the teacher batch, the
// student batch, then src, dst, etype, tbucket [P] int32, label and weight [P]
// float32 and rowWeight [A] float32 (0 for bucket padding rows). With train
// set (the training step, not evaluation) it also updates the prototypes
// when c.ProtoMomentum > 0.
func lossGraph(ctx *context.Context, c Config, w LossWeights, in []*Node, train bool) (total *Node, outs []*Node) {
	teacher := encode(ctx, c, in[:numBatchInputs])
	student := encode(ctx, c, in[numBatchInputs:2*numBatchInputs])
	p := in[2*numBatchInputs:]
	src, dst, etype, tbucket, label, pw, rowW := p[0], p[1], p[2], p[3], p[4], p[5], p[6]
	g := teacher.Graph()

	L := len(c.Prototypes)
	distill := make([]*Node, L)
	argmaxes := make([]*Node, L)
	protos := make([]*Node, L)
	studentLogP := make([]*Node, L)
	total = ScalarZero(g, dtypes.Float32)
	for l := range L {
		protos[l] = prototypes(ctx, c, g, l)
		ts := DivScalar(cosines(teacher, protos[l]), c.TeacherTemp)
		ss := DivScalar(cosines(student, protos[l]), c.StudentTemp)
		q := sinkhorn(ts, c.SinkhornIters)
		if train && c.ProtoMomentum > 0 {
			updatePrototypes(ctx, c, l, protos[l], teacher, q, rowW)
		}
		studentLogP[l] = LogSoftmax(ss, -1)
		distill[l] = softCE(q, studentLogP[l], rowW)
		argmaxes[l] = ArgMax(StopGradient(ts), -1, dtypes.Int32)
		total = Add(total, MulScalar(distill[l], w.Distill))
	}
	hier := ScalarZero(g, dtypes.Float32)
	for l := 0; l+1 < L; l++ {
		m := parents(protos[l+1], protos[l])
		agg := Einsum("bf,fc->bc", Exp(studentLogP[l+1]), m)
		hier = Add(hier, softCE(agg, studentLogP[l], rowW))
	}
	total = Add(total, MulScalar(hier, w.Hierarchy))

	align := alignLoss(teacher, label, c.AlignTemp)
	total = Add(total, MulScalar(align, w.Align))
	cold := coldAlignLoss(teacher, student, label, c.AlignTemp)
	total = Add(total, MulScalar(cold, w.ColdAlign))

	logits := engagementLogits(ctx, c, teacher, src, dst, etype, tbucket)
	bce := Sub(softplus(logits), Mul(label, logits))
	engage := weightedMean(bce, pw)
	total = Add(total, MulScalar(engage, w.Engagement))

	outs = []*Node{total, engage, hier, align, cold}
	outs = append(outs, distill...)
	outs = append(outs, argmaxes...)
	outs = append(outs, logits)
	return total, outs
}
