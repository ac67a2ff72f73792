package model

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	G "github.com/gomlx/gomlx/pkg/core/graph" // aliased: the project has its own graph package
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"

	"github.com/hir-ads/hir/graph"
)

// Variable scopes.
const (
	scopeEncoder    = "encoder"
	scopePrototypes = "prototypes"
	scopeEngage     = "engagement"
)

// encoderInputs names the batch tensors inside a graph (see batch.tensors).
type encoderInputs struct {
	nodeType, hash, text, textMask, attr, attrMask, vec *G.Node
	hop, edgeType, timeBucket, weight, walk, mask       *G.Node
	spd, typePair, idRows, activity                     *G.Node
	histText, histTextW, histAttr, histAttrW            *G.Node
}

func splitInputs(in []*G.Node) encoderInputs {
	if len(in) != numBatchInputs {
		panic(fmt.Sprintf("model: encoder wants %d inputs, got %d", numBatchInputs, len(in)))
	}
	return encoderInputs{in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10], in[11], in[12], in[13], in[14], in[15], in[16],
		in[17], in[18], in[19], in[20]}
}

// gatherRows gathers rows of table [V, D] for integer indices of any shape,
// flattening the indices first (SimpleGo's Gather takes one index axis).
func gatherRows(table, idx *G.Node) *G.Node {
	dims := idx.Shape().Dimensions
	n := idx.Shape().Size()
	flat := G.Reshape(idx, n, 1)
	out := G.Gather(table, flat) // [n, D]
	return G.Reshape(out, append(append([]int{}, dims...), table.Shape().Dimensions[1])...)
}

// dense is a linear layer on the last axis (layers.Dense; its variables).
func dense(ctx *context.Context, name string, x *G.Node, useBias bool, out int) *G.Node {
	return layers.Dense(ctx.In(name), x, useBias, out)
}

// layerNorm normalises the last axis, with learned gain and offset.
func layerNorm(ctx *context.Context, name string, x *G.Node) *G.Node {
	return layers.LayerNormalization(ctx.In(name), x, -1).Done()
}

// encode builds the hierarchical encoder and returns the L2-normalised anchor
// embeddings [B, EmbedDim]. ctx should be unchecked (variables shared between
// the teacher and student calls).
func encode(ctx *context.Context, c Config, inputs []*G.Node) *G.Node {
	in := splitInputs(inputs)
	g := in.nodeType.Graph()
	ctx = ctx.In(scopeEncoder)
	B, N := in.nodeType.Shape().Dimensions[0], in.nodeType.Shape().Dimensions[1]
	D := c.Dim
	tbl := func(name string, rows, cols int) *G.Node {
		return ctx.In(name).VariableWithShape("table", shapes.Make(dtypes.Float32, rows, cols)).ValueGraph(g)
	}
	// Content tables (hashed text and attribute buckets) start at unit scale:
	// the default initializer scales by the table's size, which would leave a
	// 16384-row bag ~100x weaker than the type and position tables, so the
	// model would not see content at all.
	contentTbl := func(name string, rows, cols int) *G.Node {
		c := ctx.In(name).WithInitializer(initializers.RandomNormalFn(ctx, contentInitStddev))
		return c.VariableWithShape("table", shapes.Make(dtypes.Float32, rows, cols)).ValueGraph(g)
	}
	maskF := G.ConvertDType(in.mask, dtypes.Float32) // [B,N]

	// Node encoder.
	x := gatherRows(tbl("type", graph.NumNodeTypes, D), in.nodeType)
	// Deep hash embedding: k hashes in [-1,1] -> shared MLP. No per-id table.
	h := activations.Gelu(dense(ctx, "hash_1", in.hash, true, c.HashDim))
	x = G.Add(x, dense(ctx, "hash_2", h, true, D))
	// Per-id rows: the sum of the two hashed rows of the node's id.
	if c.IDRows > 1 {
		idc := ctx.In("id_rows").WithInitializer(initializers.RandomNormalFn(ctx, idInitStddev))
		idTbl := idc.VariableWithShape("table", shapes.Make(dtypes.Float32, c.IDRows, D)).ValueGraph(g)
		x = G.Add(x, G.ReduceSum(gatherRows(idTbl, in.idRows), 2))
	}
	// Text EmbeddingBag: masked mean of hashed word / bigram bucket embeddings.
	textTbl, attrTbl := contentTbl("text", c.TextBkts, D), contentTbl("attr", c.AttrBkts, D)
	x = G.Add(x, bagMean(gatherRows(textTbl, in.text), in.textMask))
	// Per-type attributes: hashed key=value buckets, masked mean.
	x = G.Add(x, bagMean(gatherRows(attrTbl, in.attr), in.attrMask))
	// Client content vector: linear projection (zero when absent).
	x = G.Add(x, dense(ctx, "vector", in.vec, false, D))

	// Position encoder: hop distance + random-walk frequency.
	x = G.Add(x, gatherRows(tbl("hop", maxHop+1, D), in.hop))
	x = G.Add(x, dense(ctx, "walk", G.InsertAxes(in.walk, -1), false, D))
	// Edge encoder: reaching edge type, decayed weight, time bucket.
	x = G.Add(x, gatherRows(tbl("edge_type", graph.NumEdgeTypes, D), in.edgeType))
	x = G.Add(x, gatherRows(tbl("time_bucket", graph.NumTimeBuckets, D), in.timeBucket))
	x = G.Add(x, dense(ctx, "edge_weight", G.InsertAxes(in.weight, -1), false, D))
	// The anchor is token 0; it is selected by one-hot products (Slice has
	// no gradient on SimpleGo).
	anchorSel := G.Reshape(G.OneHot(G.Const(g, []int32{0}), N, dtypes.Float32), N)
	if c.Activity == ActivityShared {
		// The anchor's counts also enter its token, so that the
		// transformer can weigh its neighbourhood by them. (The typed
		// form leaves them out: through the token popularity leaks into
		// the interest part, and the hierarchy clusters by it.)
		a := activations.Gelu(dense(ctx, "activity_token_1", in.activity, true, activityHidden))
		at := dense(ctx, "activity_token_2", a, false, D) // [B,D]
		x = G.Add(x, G.Mul(G.InsertAxes(at, 1), G.Reshape(anchorSel, 1, N, 1)))
	}
	if c.History > 0 {
		// Propagated content: the anchor's history's pooled buckets
		// (weights summing to 1) read from the same tables, each pool
		// through its own linear map, into the anchor's token. The
		// tables learn from the tokens' own content only: a gradient
		// through the pools would scatter into both tables for every
		// anchor and slowed training by a sixth (BenchmarkTrainStep).
		ht := G.Einsum("btd,bt->bd", G.StopGradient(gatherRows(textTbl, in.histText)), in.histTextW)
		ha := G.Einsum("btd,bt->bd", G.StopGradient(gatherRows(attrTbl, in.histAttr)), in.histAttrW)
		hist := G.Add(dense(ctx, "history_text", ht, false, D), dense(ctx, "history_attr", ha, false, D)) // [B,D]
		x = G.Add(x, G.Mul(G.InsertAxes(hist, 1), G.Reshape(anchorSel, 1, N, 1)))
	}
	x = G.Mul(x, G.InsertAxes(maskF, -1)) // padding tokens carry zeros

	// Structural attention biases, gathered from small tables: [B,H,N,N].
	H := c.Heads
	bias := G.Add(
		gatherRows(tbl("bias_spd", graph.NumSPD, H), in.spd),
		gatherRows(tbl("bias_type", graph.NumNodeTypes*graph.NumNodeTypes, H), in.typePair))
	bias = G.TransposeAllAxes(bias, 0, 3, 1, 2)
	keyMask := G.BroadcastToDims(G.Reshape(in.mask, B, 1, 1, N), B, H, N, N)

	for l := range c.Layers {
		lc := ctx.In(fmt.Sprintf("layer_%d", l))
		x = G.Add(x, attention(lc, c, layerNorm(lc, "ln_attn", x), bias, keyMask))
		f := layerNorm(lc, "ln_ffn", x)
		f = activations.Gelu(dense(lc, "ffn_1", f, true, c.FFNDim))
		x = G.Add(x, dense(lc, "ffn_2", f, true, D))
	}
	x = layerNorm(ctx, "ln_out", x)

	anchor := G.Einsum("bnd,n->bd", x, anchorSel)
	e := dense(ctx, "project", anchor, true, c.EmbedDim)
	m := G.Reshape(G.Const(g, interestMask(c)), 1, c.EmbedDim)
	if c.Activity.on() {
		// The anchor's recent and total engagement counts (as of the
		// subgraph's time, graph.Subgraph.Activity) become the last
		// coordinate through a small MLP: how popular an ad is now, how
		// new a user is. The other coordinates are the interest part that
		// the prototypes see (see interest); the dot product sees both.
		h := dense(ctx, "activity_1", in.activity, true, activityHidden)
		if c.Activity == ActivityTyped {
			// Per anchor type: the same counts mean popularity for an
			// ad and experience for a user, and the user's coordinate
			// is the weight that user gives popularity.
			h = G.Add(h, G.Einsum("bnh,n->bh", gatherRows(tbl("activity_type", graph.NumNodeTypes, activityHidden), in.nodeType), anchorSel))
		}
		pop := dense(ctx, "activity_2", activations.Gelu(h), true, 1) // [B,1]
		if c.Activity == ActivityTyped {
			// Against a unit interest part, so that the coordinate's
			// share of the norm is learnt at the scale of its weights.
			e = G.L2Normalize(G.Mul(e, m), -1)
		}
		e = G.Add(G.Mul(e, m), G.Mul(pop, G.OneMinus(m)))
	}
	return G.L2Normalize(e, -1)
}

// popularityAxis is the coordinate of c's embeddings that carries the
// anchor's engagement counts (the last one, when c.Activity.on()), or -1.
func popularityAxis(c Config) int {
	if !c.Activity.on() {
		return -1
	}
	return c.EmbedDim - 1
}

// interestMask is 1 on the interest coordinates of an embedding and 0 on
// the popularity coordinate (see popularityAxis).
func interestMask(c Config) []float32 {
	m := make([]float32, c.EmbedDim)
	for i := range m {
		m[i] = 1
	}
	if a := popularityAxis(c); a >= 0 {
		m[a] = 0
	}
	return m
}

// interest returns the L2-normalised interest part of embeddings [B,E]:
// what the prototypes (the interest hierarchy and the BoM tokens) are
// fitted on and compared with. Without activity features it is emb.
func interest(c Config, emb *G.Node) *G.Node {
	if !c.Activity.on() {
		return emb
	}
	mask := G.Reshape(G.Const(emb.Graph(), interestMask(c)), 1, c.EmbedDim)
	return G.L2Normalize(G.Mul(emb, mask), -1)
}

// activityHidden is the hidden width of the activity MLP.
const activityHidden = 16

// contentInitStddev is the initial scale of the content bucket embeddings.
const contentInitStddev = 2.0

// idInitStddev is the initial scale of the per-id hashed rows: small, so
// that an id seen in no training event (a new ad) adds little noise.
const idInitStddev = 0.05

// bagMean is the masked mean over the bag axis: emb [B,N,T,D], mask [B,N,T].
func bagMean(emb, mask *G.Node) *G.Node {
	s := G.Einsum("bntd,bnt->bnd", emb, mask)
	cnt := G.Max(G.ReduceSum(mask, -1), G.OnesLike(G.ReduceSum(mask, -1)))
	return G.Div(s, G.InsertAxes(cnt, -1))
}

// attention is multi-head self-attention whose logits add the structural
// bias [B,H,N,N]; keys that are padding get zero weight.
func attention(ctx *context.Context, c Config, x, bias, keyMask *G.Node) *G.Node {
	B, N, D := x.Shape().Dimensions[0], x.Shape().Dimensions[1], x.Shape().Dimensions[2]
	H := c.Heads
	dh := D / H
	q := G.Reshape(dense(ctx, "q", x, true, D), B, N, H, dh)
	k := G.Reshape(dense(ctx, "k", x, true, D), B, N, H, dh)
	v := G.Reshape(dense(ctx, "v", x, true, D), B, N, H, dh)
	logits := G.MulScalar(G.Einsum("bqhd,bkhd->bhqk", q, k), 1/math.Sqrt(float64(dh)))
	logits = G.Add(logits, bias)
	attn := G.MaskedSoftmax(logits, keyMask, -1)
	out := G.Reshape(G.Einsum("bhqk,bkhd->bqhd", attn, v), B, N, D)
	return dense(ctx, "out", out, true, D)
}

// newModelContext returns a context configured with the seed and initialiser.
func newModelContext(seed int64) *context.Context {
	ctx := context.New()
	ctx.SetParam(context.ParamInitialSeed, seed)
	return ctx.Checked(false)
}
