package model

import (
	gocontext "context"
	"fmt"
	"math"
	"sync"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/viterin/vek/vek32"

	"github.com/hir-ads/hir/graph"
)

// nativeEncoder is encode's forward pass in plain Go over a loaded model's
// trained weights: what Model runs for inference on the pure-Go backend.
// That backend executes the encoder graph op by op with a scalar matrix
// kernel, so one request-time embedding (a 16-node subgraph, ~1 MFLOP)
// costs ~3 ms, most of it per-op overhead; this computes the same function
// with github.com/viterin/vek's AVX2 matrix products and dot products in
// ~0.2 ms (BenchmarkEmbed).
// GoMLX remains what defines, trains and checkpoints the model (and
// what runs inference on other backends); TestNativeEncoder checks that
// both give the same embeddings for every form of Config.
//
// It computes only what the anchor's embedding depends on: padding tokens
// are skipped (their keys are masked out of every softmax) and the last
// layer attends and transforms the anchor's row only.
type nativeEncoder struct {
	c Config
	// Tables [rows, cols], flat.
	typ, hop, edgeType, timeBucket, text, attr, idRows, actType []float32
	biasSPD, biasType                                           []float32 // [rows, Heads]
	hash1, hash2, vector, walk, edgeWeight, project             nativeDense
	actTok1, actTok2, act1, act2                                nativeDense
	histText, histAttr                                          nativeDense
	layers                                                      []nativeLayer
	lnOut                                                       nativeNorm
	scratch                                                     sync.Pool // *nativeScratch
}

type nativeLayer struct {
	lnAttn, lnFFN nativeNorm
	q, k, v, out  nativeDense
	ffn1, ffn2    nativeDense
}

// nativeDense is a dense layer: w holds layers.Dense's [in, out] weights,
// row-major.
type nativeDense struct {
	w       []float32
	b       []float32 // nil: no bias
	in, out int
}

// denseChunk bounds the multiply-adds of one vek32.MatMul_Into call: vek
// runs calls below 100,000 in the caller's goroutine and splits larger
// ones across new goroutines, which a request should not spawn.
const denseChunk = 99_999

// apply writes into dst[:rows*out] the layer's outputs for the rows
// x[:rows*in] (row-major).
func (d *nativeDense) apply(dst, x []float32, rows int) {
	dst = dst[:rows*d.out]
	if d.in == 0 {
		clear(dst)
	} else {
		step := max(1, denseChunk/(d.in*d.out))
		for r := 0; r < rows; r += step {
			n := min(step, rows-r)
			vek32.MatMul_Into(dst[r*d.out:(r+n)*d.out], x[r*d.in:(r+n)*d.in], d.w, d.in)
		}
	}
	if d.b != nil {
		for r := range rows {
			vek32.Add_Inplace(dst[r*d.out:(r+1)*d.out], d.b)
		}
	}
}

// nativeNorm is layers.LayerNormalization over the last axis with its
// defaults: epsilon 1e-3, learned gain and offset.
type nativeNorm struct{ gain, offset []float32 }

const layerNormEpsilon = 1e-3

func (n *nativeNorm) apply(dst, x []float32) {
	var mean float32
	for _, v := range x {
		mean += v
	}
	mean /= float32(len(x))
	var variance float32
	for _, v := range x {
		d := v - mean
		variance += d * d
	}
	variance /= float32(len(x))
	inv := 1 / float32(math.Sqrt(float64(variance+layerNormEpsilon)))
	for i, v := range x {
		dst[i] = (v-mean)*inv*n.gain[i] + n.offset[i]
	}
}

// nativeScratch holds one forward pass's buffers.
type nativeScratch struct {
	x, y, q, k, v, o, f, in []float32
	bias, logits            []float32
	tok                     []int // the subgraph's unmasked tokens, anchor first
}

// gelu is activations.Gelu, x·Φ(x), with erf32 for its error function.
func gelu(x float32) float32 {
	return x * 0.5 * (1 + erf32(x*(1/math.Sqrt2)))
}

// erf32 is the error function within 5e-7 (Abramowitz and Stegun
// 7.1.26: 1.5e-7, plus float32 rounding), at less than half the cost of
// math.Erf, which took a third of a forward pass.
func erf32(x float32) float32 {
	sign := float32(1)
	if x < 0 {
		sign, x = -1, -x
	}
	t := 1 / (1 + 0.3275911*x)
	p := ((((1.061405429*t-1.453152027)*t+1.421413741)*t-0.284496736)*t + 0.254829592) * t
	return sign * (1 - p*float32(math.Exp(float64(-x*x))))
}

// newNativeEncoder reads c's encoder weights from ctx (a loaded model's).
func newNativeEncoder(ctx *context.Context, c Config) (*nativeEncoder, error) {
	r := weightReader{ctx: ctx}
	ne := &nativeEncoder{c: c}
	D := c.Dim
	tbl := func(name string, cols int) []float32 { return r.table("/"+scopeEncoder+"/"+name, cols) }
	ne.typ = tbl("type", D)
	ne.hop = tbl("hop", D)
	ne.edgeType = tbl("edge_type", D)
	ne.timeBucket = tbl("time_bucket", D)
	ne.text = tbl("text", D)
	ne.attr = tbl("attr", D)
	ne.biasSPD = tbl("bias_spd", c.Heads)
	ne.biasType = tbl("bias_type", c.Heads)
	if c.IDRows > 1 {
		ne.idRows = tbl("id_rows", D)
	}
	dn := func(scope string, bias bool) nativeDense { return r.dense("/"+scopeEncoder+"/"+scope, bias) }
	ne.hash1, ne.hash2 = dn("hash_1", true), dn("hash_2", true)
	ne.vector, ne.walk, ne.edgeWeight = dn("vector", false), dn("walk", false), dn("edge_weight", false)
	ne.project = dn("project", true)
	if c.Activity == ActivityShared {
		ne.actTok1, ne.actTok2 = dn("activity_token_1", true), dn("activity_token_2", false)
	}
	if c.History > 0 {
		ne.histText, ne.histAttr = dn("history_text", false), dn("history_attr", false)
	}
	if c.Activity.on() {
		ne.act1, ne.act2 = dn("activity_1", true), dn("activity_2", true)
		if c.Activity == ActivityTyped {
			ne.actType = tbl("activity_type", activityHidden)
		}
	}
	for l := range c.Layers {
		p := fmt.Sprintf("layer_%d/", l)
		ne.layers = append(ne.layers, nativeLayer{
			lnAttn: r.norm("/" + scopeEncoder + "/" + p + "ln_attn"), lnFFN: r.norm("/" + scopeEncoder + "/" + p + "ln_ffn"),
			q: dn(p+"q", true), k: dn(p+"k", true), v: dn(p+"v", true), out: dn(p+"out", true),
			ffn1: dn(p+"ffn_1", true), ffn2: dn(p+"ffn_2", true),
		})
	}
	ne.lnOut = r.norm("/" + scopeEncoder + "/ln_out")
	if r.err != nil {
		return nil, fmt.Errorf("native encoder: %w", r.err)
	}
	return ne, nil
}

// weightReader copies variables out of a context, keeping the first error.
type weightReader struct {
	ctx *context.Context
	err error
}

func (r *weightReader) read(scope, name string) ([]float32, []int) {
	if r.err != nil {
		return nil, nil
	}
	v := r.ctx.InAbsPath(scope).GetVariable(name)
	if v == nil {
		r.err = fmt.Errorf("no variable %s/%s", scope, name)
		return nil, nil
	}
	t, err := v.Value()
	if err != nil {
		r.err = fmt.Errorf("%s/%s: %w", scope, name, err)
		return nil, nil
	}
	flat, err := tensors.CopyFlatData[float32](t)
	if err != nil {
		r.err = fmt.Errorf("%s/%s: %w", scope, name, err)
		return nil, nil
	}
	return flat, t.Shape().Dimensions
}

func (r *weightReader) table(scope string, cols int) []float32 {
	flat, dims := r.read(scope, "table")
	if r.err == nil && (len(dims) != 2 || dims[1] != cols) {
		r.err = fmt.Errorf("%s/table: shape %v, want [_, %d]", scope, dims, cols)
	}
	return flat
}

func (r *weightReader) dense(scope string, bias bool) nativeDense {
	w, dims := r.read(scope+"/dense", "weights")
	if r.err != nil {
		return nativeDense{}
	}
	if len(dims) != 2 {
		r.err = fmt.Errorf("%s/dense/weights: shape %v, want rank 2", scope, dims)
		return nativeDense{}
	}
	d := nativeDense{in: dims[0], out: dims[1], w: w}
	if bias {
		d.b, _ = r.read(scope+"/dense", "biases")
	}
	return d
}

func (r *weightReader) norm(scope string) nativeNorm {
	gain, _ := r.read(scope+"/layer_normalization", "gain")
	offset, _ := r.read(scope+"/layer_normalization", "offset")
	return nativeNorm{gain: gain, offset: offset}
}

// embed writes into out[:EmbedDim] the embedding of row b of bt.
func (ne *nativeEncoder) embed(bt *batch, b int, out []float32) {
	c := ne.c
	N, D, H := bt.N, c.Dim, c.Heads
	dh := D / H
	wide := max(D, c.FFNDim, c.HashDim, c.HashK, c.VectorDim, c.EmbedDim, activityHidden)
	s, _ := ne.scratch.Get().(*nativeScratch)
	if s == nil || len(s.x) < N*D {
		s = &nativeScratch{
			x: make([]float32, N*D), y: make([]float32, N*D), q: make([]float32, N*D), k: make([]float32, N*D),
			v: make([]float32, N*D), o: make([]float32, N*wide), f: make([]float32, N*wide), in: make([]float32, N*wide),
			bias: make([]float32, H*N*N), logits: make([]float32, N), tok: make([]int, 0, N),
		}
	}
	defer ne.scratch.Put(s)
	s.tok = s.tok[:0]
	for i := range N {
		if bt.mask[b*N+i] {
			s.tok = append(s.tok, i) // token 0, the anchor, first (featurize checks it is unmasked)
		}
	}
	T := len(s.tok)
	row := func(tbl []float32, r int32, cols int) []float32 { return tbl[int(r)*cols : (int(r)+1)*cols] }
	// gather copies the unmasked tokens' rows of a [N, cols] input of row b
	// into s.in, token a at s.in[a*cols:].
	gather := func(src []float32, cols int) []float32 {
		for a, i := range s.tok {
			copy(s.in[a*cols:(a+1)*cols], src[(b*N+i)*cols:(b*N+i+1)*cols])
		}
		return s.in[:T*cols]
	}
	// Node, position and edge encoders, for the unmasked tokens (x[a*D:]
	// is the a-th of them).
	ne.hash1.apply(s.f, gather(bt.hash, c.HashK), T)
	geluAll(s.f[:T*c.HashDim])
	ne.hash2.apply(s.o, s.f, T)
	copy(s.x[:T*D], s.o[:T*D])
	ne.vector.apply(s.o, gather(bt.vec, c.VectorDim), T)
	vek32.Add_Inplace(s.x[:T*D], s.o[:T*D])
	for a, i := range s.tok {
		t := b*N + i
		x := s.x[a*D : (a+1)*D]
		vek32.Add_Inplace(x, row(ne.typ, bt.nodeType[t], D))
		if ne.idRows != nil {
			vek32.Add_Inplace(x, row(ne.idRows, bt.idRows[2*t], D))
			vek32.Add_Inplace(x, row(ne.idRows, bt.idRows[2*t+1], D))
		}
		ne.bagMean(x, ne.text, bt.text[t*c.TextLen:(t+1)*c.TextLen], bt.textMask[t*c.TextLen:(t+1)*c.TextLen])
		ne.bagMean(x, ne.attr, bt.attr[t*c.AttrLen:(t+1)*c.AttrLen], bt.attrMask[t*c.AttrLen:(t+1)*c.AttrLen])
		vek32.Add_Inplace(x, row(ne.hop, bt.hop[t], D))
		walk, weight := bt.walk[t], bt.weight[t]
		for j := range D {
			x[j] += walk*ne.walk.w[j] + weight*ne.edgeWeight.w[j]
		}
		vek32.Add_Inplace(x, row(ne.edgeType, bt.edgeType[t], D))
		vek32.Add_Inplace(x, row(ne.timeBucket, bt.timeBucket[t], D))
	}
	if c.History > 0 {
		// The anchor's propagated content (encode's history pools).
		ht, ha := histLens(c)
		ne.pool(s, ne.text, ne.histText, bt.histText[b*ht:(b+1)*ht], bt.histTextW[b*ht:(b+1)*ht])
		ne.pool(s, ne.attr, ne.histAttr, bt.histAttr[b*ha:(b+1)*ha], bt.histAttrW[b*ha:(b+1)*ha])
	}
	activity := bt.activity[2*b : 2*b+2]
	if c.Activity == ActivityShared {
		ne.actTok1.apply(s.f, activity, 1)
		geluAll(s.f[:activityHidden])
		ne.actTok2.apply(s.o, s.f, 1)
		vek32.Add_Inplace(s.x[:D], s.o[:D])
	}
	// Structural attention bias of every pair of unmasked tokens: [H, T, T].
	for a, i := range s.tok {
		for z, j := range s.tok {
			p := b*N*N + i*N + j
			spd, tp := row(ne.biasSPD, bt.spd[p], H), row(ne.biasType, bt.typePair[p], H)
			for h := range H {
				s.bias[(h*T+a)*T+z] = spd[h] + tp[h]
			}
		}
	}
	scale := float32(1 / math.Sqrt(float64(dh)))
	for l := range ne.layers {
		L := &ne.layers[l]
		rows := T // query rows this layer must update
		if l == len(ne.layers)-1 {
			rows = 1 // the anchor's is the only one read after the last layer
		}
		for a := range T {
			L.lnAttn.apply(s.y[a*D:(a+1)*D], s.x[a*D:(a+1)*D])
		}
		L.k.apply(s.k, s.y, T)
		L.v.apply(s.v, s.y, T)
		L.q.apply(s.q, s.y, rows)
		for a := range rows {
			o := s.o[a*D : (a+1)*D]
			for h := range H {
				qh := s.q[a*D+h*dh : a*D+(h+1)*dh]
				lg := s.logits[:T]
				mx := float32(math.Inf(-1))
				for z := range T {
					lg[z] = vek32.Dot(qh, s.k[z*D+h*dh:z*D+(h+1)*dh])*scale + s.bias[(h*T+a)*T+z]
					mx = max(mx, lg[z])
				}
				var sum float32
				for z := range T {
					lg[z] = float32(math.Exp(float64(lg[z] - mx)))
					sum += lg[z]
				}
				oh := o[h*dh : (h+1)*dh]
				clear(oh)
				for z := range T {
					w := lg[z] / sum
					for d, v := range s.v[z*D+h*dh : z*D+(h+1)*dh] {
						oh[d] += w * v
					}
				}
			}
		}
		L.out.apply(s.f, s.o, rows)
		vek32.Add_Inplace(s.x[:rows*D], s.f[:rows*D])
		for a := range rows {
			L.lnFFN.apply(s.y[a*D:(a+1)*D], s.x[a*D:(a+1)*D])
		}
		L.ffn1.apply(s.f, s.y, rows)
		geluAll(s.f[:rows*c.FFNDim])
		L.ffn2.apply(s.o, s.f, rows)
		vek32.Add_Inplace(s.x[:rows*D], s.o[:rows*D])
	}
	ne.lnOut.apply(s.y[:D], s.x[:D])
	e := out[:c.EmbedDim]
	ne.project.apply(e, s.y[:D], 1)
	if c.Activity.on() {
		ne.act1.apply(s.f, activity, 1)
		if ne.actType != nil {
			vek32.Add_Inplace(s.f[:activityHidden], row(ne.actType, bt.nodeType[b*N], activityHidden))
		}
		geluAll(s.f[:activityHidden])
		ne.act2.apply(s.o, s.f, 1)
		axis := popularityAxis(c)
		e[axis] = 0
		if c.Activity == ActivityTyped {
			l2Normalize(e)
		}
		e[axis] = s.o[0]
	}
	l2Normalize(e)
}

// geluAll applies gelu to every element of x.
func geluAll(x []float32) {
	for i, v := range x {
		x[i] = gelu(v)
	}
}

// bagMean adds to x the mean of tbl's rows idx where mask is set (nothing
// when none is).
func (ne *nativeEncoder) bagMean(x, tbl []float32, idx []int32, mask []float32) {
	D := len(x)
	var n float32
	for _, m := range mask {
		n += m
	}
	if n == 0 {
		return
	}
	inv := 1 / max(n, 1)
	for j, m := range mask {
		if m == 0 {
			continue
		}
		r := tbl[int(idx[j])*D : (int(idx[j])+1)*D]
		w := m * inv
		for d, v := range r {
			x[d] += w * v
		}
	}
}

// pool adds to the anchor's token (s.x[:Dim]) d applied to the
// w-weighted sum of tbl's rows idx.
func (ne *nativeEncoder) pool(s *nativeScratch, tbl []float32, d nativeDense, idx []int32, w []float32) {
	D := ne.c.Dim
	sum := s.y[:D]
	clear(sum)
	for j, wj := range w {
		if wj != 0 {
			vek32.MulNumber_Into(s.o[:D], tbl[int(idx[j])*D:(int(idx[j])+1)*D], wj)
			vek32.Add_Inplace(sum, s.o[:D])
		}
	}
	d.apply(s.o, sum, 1)
	vek32.Add_Inplace(s.x[:D], s.o[:D])
}

// l2Normalize scales v to unit length (a zero v stays zero, as
// G.L2Normalize leaves it).
func l2Normalize(v []float32) {
	n := vek32.Dot(v, v)
	if n == 0 {
		return
	}
	vek32.MulNumber_Inplace(v, float32(1/math.Sqrt(float64(n))))
}

// embedNative embeds sgs with ne; src(i) supplies the content of sgs[i].
func (m *Model) embedNative(ctx gocontext.Context, src func(i int) Entities, sgs []*graph.Subgraph) ([][]float32, error) {
	out := make([][]float32, len(sgs))
	e := m.cfg.Model.ServedDim()
	flat := make([]float32, len(sgs)*e)
	maxB := batchBuckets[len(batchBuckets)-1] // featurised at a time, as exec's calls are
	for lo := 0; lo < len(sgs); {
		hi := lo + 1
		for hi < len(sgs) && hi-lo < maxB && sgs[hi].N == sgs[lo].N {
			hi++
		}
		bt, err := m.feat.featurizeFrom(func(k int) Entities { return src(lo + k) }, sgs[lo:hi], hi-lo)
		if err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		for k := range hi - lo {
			if k%64 == 63 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			v := flat[(lo+k)*e : (lo+k+1)*e : (lo+k+1)*e]
			m.native.embed(bt, k, v)
			m.appendSpectral(bt, k, v)
			out[lo+k] = v
		}
		lo = hi
	}
	return out, nil
}
