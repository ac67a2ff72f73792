package model

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	G "github.com/gomlx/gomlx/pkg/core/graph" // aliased: the project has its own graph package
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"

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

// prototypes returns the L2-normalised prototypes of level l: [K_l, EmbedDim],
// zero on the popularity coordinate (see interest).
func prototypes(ctx *context.Context, c Config, g *G.Graph, l int) *G.Node {
	return interest(c, prototypeVar(ctx, c, l).ValueGraph(g))
}

// updatePrototypes moves level l's prototypes (current value protos, L2
// normalised) towards the direction of the teacher embeddings the
// balanced assignment q [B,K] gives them, rows weighted by rowW [B]:
// p <- normalise(m*p + (1-m)*normalise(sum_b w_b q_bk teacher_b)), the
// exponential-moving-average codebook update (online balanced spherical
// k-means). A prototype assigned no mass keeps its value.
func updatePrototypes(ctx *context.Context, c Config, l int, protos, teacher, q, rowW *G.Node) {
	m := c.ProtoMomentum
	qw := G.Mul(G.StopGradient(q), G.InsertAxes(rowW, -1))
	means := G.L2Normalize(G.Einsum("bk,be->ke", qw, G.StopGradient(teacher)), -1)
	next := G.Add(G.MulScalar(G.StopGradient(protos), m), G.MulScalar(means, 1-m))
	prototypeVar(ctx, c, l).SetValueGraph(G.L2Normalize(next, -1))
}

// cosines returns emb [B,E] x prototypes -> [B,K].
func cosines(emb, protos *G.Node) *G.Node { return G.Einsum("be,ke->bk", emb, protos) }

// sinkhorn returns the balanced soft assignment of scores [B,K] (logits
// already divided by the temperature): rows sum to 1, columns to B/K, after
// iters rounds. No gradient flows through it.
func sinkhorn(scores *G.Node, iters int) *G.Node {
	B, K := scores.Shape().Dimensions[0], scores.Shape().Dimensions[1]
	s := G.StopGradient(scores)
	s = G.Sub(s, G.ReduceAllMax(s))
	q := G.Exp(s)
	q = G.Div(q, G.ReduceAllSum(q))
	for range iters {
		q = G.DivScalar(G.Div(q, G.ReduceAndKeep(q, G.ReduceSum, 0)), float64(K)) // each prototype gets 1/K
		q = G.DivScalar(G.Div(q, G.ReduceAndKeep(q, G.ReduceSum, 1)), float64(B)) // each row gets 1/B
	}
	return G.StopGradient(G.MulScalar(q, float64(B)))
}

// softCE is -mean_b sum_k target[b,k] * logp[b,k] over rows weighted by w [B].
func softCE(target, logp, w *G.Node) *G.Node {
	per := G.Neg(G.ReduceSum(G.Mul(target, logp), -1))
	return weightedMean(per, w)
}

func weightedMean(x, w *G.Node) *G.Node {
	den := G.Max(G.ReduceAllSum(w), G.ScalarOne(w.Graph(), w.DType()))
	return G.Div(G.ReduceAllSum(G.Mul(x, w)), den)
}

// parents returns the one-hot parent map of level l+1 in level l: [K_{l+1}, K_l],
// each fine prototype's nearest coarse prototype (no gradient).
func parents(fine, coarse *G.Node) *G.Node {
	sim := G.StopGradient(G.Einsum("fe,ce->fc", fine, coarse))
	return G.OneHot(G.ArgMax(sim, -1, dtypes.Int32), coarse.Shape().Dimensions[0], dtypes.Float32)
}

// softplus is log(1+exp(x)), computed stably.
func softplus(x *G.Node) *G.Node {
	return G.Add(G.Max(x, G.ZerosLike(x)), G.Log1p(G.Exp(G.Neg(G.Abs(x)))))
}

// engagementLogits scores pairs of rows of emb [A,E]: src, dst, edge type and
// time bucket are [P] int32. The score is a relation-weighted bilinear form.
func engagementLogits(ctx *context.Context, c Config, emb, src, dst, etype, tbucket *G.Node) *G.Node {
	g := emb.Graph()
	ctx = ctx.In(scopeEngage)
	tbl := func(name string, rows, cols int) *G.Node {
		return ctx.In(name).VariableWithShape("table", shapes.Make(dtypes.Float32, rows, cols)).ValueGraph(g)
	}
	es := gatherRows(emb, src)
	ed := gatherRows(emb, dst)
	rel := G.Add(gatherRows(tbl("edge_type", graph.NumEdgeTypes, c.EmbedDim), etype),
		gatherRows(tbl("time_bucket", graph.NumTimeBuckets, c.EmbedDim), tbucket))
	dot := G.ReduceSum(G.Mul(G.Mul(es, G.OnePlus(rel)), ed), -1)
	bias := G.Reshape(gatherRows(tbl("bias", graph.NumEdgeTypes, 1), etype), -1)
	scale := ctx.VariableWithValue("scale", float32(5)).ValueGraph(g)
	return G.Add(G.Mul(dot, scale), bias)
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
//
// logq, when not nil, is [2P]: the log of each candidate's expected share
// of the candidates (destinations are drawn by popularity, random nodes
// uniformly), subtracted from its logit. The sampled softmax then estimates
// the softmax over the whole catalogue, so the dot product keeps what makes
// an ad likely for everyone (its popularity, through the activity
// features) instead of only what sets it apart for this user.
func alignLoss(emb, label, logq *G.Node, P int, temp float64) *G.Node {
	g := emb.Graph()
	nc := emb.Shape().Dimensions[0] - P
	srcIdx := G.Iota(g, shapes.Make(dtypes.Int32, P), 0)
	candIdx := G.AddScalar(G.Iota(g, shapes.Make(dtypes.Int32, nc), 0), float64(P))
	us := gatherRows(emb, srcIdx)                          // [P,E]
	cs := gatherRows(emb, candIdx)                         // [nc,E]: destinations, then random nodes if any
	ds := gatherRows(emb, G.AddScalar(srcIdx, float64(P))) // [P,E]
	posW := G.Reshape(gatherRows(G.Reshape(label, -1, 1), srcIdx), -1)
	fl := G.DivScalar(G.Einsum("pe,qe->pq", us, cs), temp)
	if logq != nil {
		fl = G.Sub(fl, G.InsertAxes(logq, 0))
	}
	fwd := G.LogSoftmax(fl, -1)
	bwd := G.LogSoftmax(G.DivScalar(G.Einsum("pe,qe->pq", ds, us), temp), -1)
	return G.Add(softCE(G.OneHot(srcIdx, nc, dtypes.Float32), fwd, posW),
		softCE(G.OneHot(srcIdx, P, dtypes.Float32), bwd, posW))
}

// scopeQueue holds the queue of recent destination embeddings (training
// state, saved with the optimizer's, not with the model's weights).
const scopeQueue = "negatives"

// emptyLogQ is the log-sampling correction of an empty queue slot: its
// logit is so low that it takes no probability.
const emptyLogQ = 1e4

// queueVars returns the queue of recent destination embeddings [Q,E], their
// log sampling probabilities [Q] and their node keys [Q] (see nodeKey).
func queueVars(ctx *context.Context, c Config, q int) (emb, logq, key *context.Variable) {
	qc := ctx.In(scopeQueue).Checked(false)
	emb = qc.WithInitializer(initializers.Zero).VariableWithShape("emb", shapes.Make(dtypes.Float32, q, c.EmbedDim))
	lq := make([]float32, q)
	ks := make([]int32, q)
	for i := range lq {
		lq[i], ks[i] = emptyLogQ, -1
	}
	logq = qc.VariableWithValue("logq", lq)
	key = qc.VariableWithValue("key", ks)
	for _, v := range []*context.Variable{emb, logq, key} {
		v.SetTrainable(false)
	}
	return emb, logq, key
}

// retrievalLoss is the sampled softmax of each event's source over its
// destination, the batch's other destinations and the queue of earlier
// destinations, by the plain dot product the index re-ranks with, each
// candidate's logit corrected by minus its log sampling probability
// (candidates are drawn by popularity; the correction makes the loss
// estimate a softmax over the whole catalogue). A candidate that is the
// event's own destination node (a repeat in the batch or in the queue) is
// left out. The backward direction (each destination picks its source among
// the sources) and the label weighting are alignLoss's. emb holds P sources
// then P destinations; logq and key are the destinations' [P]. With train
// set the batch's destinations are pushed into the queue.
func retrievalLoss(ctx *context.Context, c Config, q int, emb, label, logq, key *G.Node, temp float64, train bool) *G.Node {
	g := emb.Graph()
	P := emb.Shape().Dimensions[0] / 2
	srcIdx := G.Iota(g, shapes.Make(dtypes.Int32, P), 0)
	us := gatherRows(emb, srcIdx)                          // [P,E]
	ds := gatherRows(emb, G.AddScalar(srcIdx, float64(P))) // [P,E]
	posW := G.Reshape(gatherRows(G.Reshape(label, -1, 1), srcIdx), -1)
	qEmbV, qLogqV, qKeyV := queueVars(ctx, c, q)
	qEmb, qLogq, qKey := qEmbV.ValueGraph(g), qLogqV.ValueGraph(g), qKeyV.ValueGraph(g)

	block := func(cands, candLogq, candKey *G.Node, keepDiag bool) *G.Node {
		l := G.Sub(G.DivScalar(G.Einsum("pe,qe->pq", us, cands), temp), G.InsertAxes(candLogq, 0))
		same := G.Equal(G.InsertAxes(key, -1), G.InsertAxes(candKey, 0)) // [P,C]
		if keepDiag {
			n := candKey.Shape().Dimensions[0]
			eye := G.Equal(G.Iota(g, shapes.Make(dtypes.Int32, P, n), 0), G.Iota(g, shapes.Make(dtypes.Int32, P, n), 1))
			same = G.LogicalAnd(same, G.LogicalNot(eye))
		}
		return G.Where(same, G.BroadcastToShape(G.Scalar(g, dtypes.Float32, -1e9), l.Shape()), l)
	}
	inBatch := block(ds, logq, key, true)
	inQueue := block(G.StopGradient(qEmb), qLogq, qKey, false)
	fwd := G.LogSoftmax(G.Concatenate([]*G.Node{inBatch, inQueue}, 1), -1)
	bwd := G.LogSoftmax(G.DivScalar(G.Einsum("pe,qe->pq", ds, us), temp), -1)
	loss := G.Add(softCE(G.OneHot(srcIdx, P+q, dtypes.Float32), fwd, posW),
		softCE(G.OneHot(srcIdx, P, dtypes.Float32), bwd, posW))
	if train {
		keep := G.AxisRange(0, q-P)
		qEmbV.SetValueGraph(G.Concatenate([]*G.Node{G.StopGradient(ds), G.Slice(qEmb, keep)}, 0))
		qLogqV.SetValueGraph(G.Concatenate([]*G.Node{logq, G.Slice(qLogq, keep)}, 0))
		qKeyV.SetValueGraph(G.Concatenate([]*G.Node{key, G.Slice(qKey, keep)}, 0))
	}
	return loss
}

// coldAlignLoss is alignLoss across views, averaged over both ways: the
// sources' student embeddings against the destinations' teacher ones, and
// the sources' teacher embeddings against the destinations' student ones.
// A student view is often the anchor alone (graph.ViewOptions.AnchorOnly),
// so this places a user or ad that has no edges yet from its content.
func coldAlignLoss(teacher, student, label, logq *G.Node, P int, temp float64) *G.Node {
	g := teacher.Graph()
	A := teacher.Shape().Dimensions[0]
	// mix takes the student rows where sel is 1 (a constant [A,1] mask;
	// arithmetic, since Slice has no gradient on SimpleGo).
	mix := func(srcStudent bool) *G.Node {
		sel := make([]float32, A)
		for i := range sel {
			if (i < P) == srcStudent {
				sel[i] = 1
			}
		}
		m := G.Const(g, sel)
		m = G.Reshape(m, A, 1)
		return G.Add(G.Mul(student, m), G.Mul(teacher, G.OneMinus(m)))
	}
	return G.MulScalar(G.Add(alignLoss(mix(true), label, logq, P, temp), alignLoss(mix(false), label, logq, P, temp)), 0.5)
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

// encodeSplit encodes a view featurised in two batches (see
// featurizeSplit): the embeddings [A,E] of the full batch's rows and the
// one-token batch's rows, in the order perm [A] gives.
func encodeSplit(ctx *context.Context, c Config, full, one []*G.Node, perm *G.Node) *G.Node {
	both := G.Concatenate([]*G.Node{encode(ctx, c, full), encode(ctx, c, one)}, 0)
	return gatherRows(both, perm)
}

// lossGraph builds the losses of one step. in holds the teacher batch, the
// student batch in two parts and their row order (see featurizeSplit; A
// anchors each view: P event sources, P destinations, and P random nodes
// when queue is 0), then src, dst, etype, tbucket [3P] int32,
// label and weight [3P] float32 (three scored pairs per event) and rowWeight
// [A] float32 (0 for bucket padding rows); with queue > 0 (the size of the
// queue of earlier destinations, see retrievalLoss) also the destinations'
// log sampling probabilities [P] float32 and node keys [P] int32; with queue
// 0 and logQ set, the candidates' log shares [2P] float32 (see alignLoss). With
// train set (the training step, not evaluation) it also updates the
// prototypes when c.ProtoMomentum > 0, and the queue.
func lossGraph(ctx *context.Context, c Config, w LossWeights, queue int, logQ bool, in []*G.Node, train bool) (total *G.Node, outs []*G.Node) {
	teacher := encode(ctx, c, in[:numBatchInputs])
	student := encodeSplit(ctx, c, in[numBatchInputs:2*numBatchInputs], in[2*numBatchInputs:3*numBatchInputs], in[3*numBatchInputs])
	// The prototype losses see the interest part only; the alignment and
	// engagement losses the whole embedding.
	teacherI, studentI := interest(c, teacher), interest(c, student)
	p := in[3*numBatchInputs+1:]
	src, dst, etype, tbucket, label, pw, rowW := p[0], p[1], p[2], p[3], p[4], p[5], p[6]
	g := teacher.Graph()
	P := src.Shape().Dimensions[0] / 3

	L := len(c.Prototypes)
	distill := make([]*G.Node, L)
	argmaxes := make([]*G.Node, L)
	protos := make([]*G.Node, L)
	studentLogP := make([]*G.Node, L)
	total = G.ScalarZero(g, dtypes.Float32)
	for l := range L {
		protos[l] = prototypes(ctx, c, g, l)
		ts := G.DivScalar(cosines(teacherI, protos[l]), c.TeacherTemp)
		ss := G.DivScalar(cosines(studentI, protos[l]), c.StudentTemp)
		q := sinkhorn(ts, c.SinkhornIters)
		if train && c.ProtoMomentum > 0 {
			updatePrototypes(ctx, c, l, protos[l], teacherI, q, rowW)
		}
		studentLogP[l] = G.LogSoftmax(ss, -1)
		distill[l] = softCE(q, studentLogP[l], rowW)
		argmaxes[l] = G.ArgMax(G.StopGradient(ts), -1, dtypes.Int32)
		total = G.Add(total, G.MulScalar(distill[l], w.Distill))
	}
	hier := G.ScalarZero(g, dtypes.Float32)
	for l := 0; l+1 < L; l++ {
		m := parents(protos[l+1], protos[l])
		agg := G.Einsum("bf,fc->bc", G.Exp(studentLogP[l+1]), m)
		hier = G.Add(hier, softCE(agg, studentLogP[l], rowW))
	}
	total = G.Add(total, G.MulScalar(hier, w.Hierarchy))

	var align, logq *G.Node
	if queue == 0 && logQ {
		logq = p[7]
	}
	if queue > 0 {
		align = retrievalLoss(ctx, c, queue, teacher, label, p[7], p[8], c.AlignTemp, train)
	} else {
		align = alignLoss(teacher, label, logq, P, c.AlignTemp)
	}
	total = G.Add(total, G.MulScalar(align, w.Align))
	cold := coldAlignLoss(teacher, student, label, logq, P, c.AlignTemp)
	total = G.Add(total, G.MulScalar(cold, w.ColdAlign))

	logits := engagementLogits(ctx, c, teacher, src, dst, etype, tbucket)
	bce := G.Sub(softplus(logits), G.Mul(label, logits))
	engage := weightedMean(bce, pw)
	total = G.Add(total, G.MulScalar(engage, w.Engagement))

	outs = []*G.Node{total, engage, hier, align, cold}
	outs = append(outs, distill...)
	outs = append(outs, argmaxes...)
	outs = append(outs, logits)
	return total, outs
}
