package index

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// ErrBadQuantizer is returned by [NewQuantizer] for invalid options.
var ErrBadQuantizer = errors.New("bad quantizer options")

// BagOptions shapes a bag: how many tokens a vector takes per level.
type BagOptions struct {
	// Margin keeps, at each prototype level, the prototypes whose similarity
	// is at least best-Margin.
	Margin float32
	// MaxPerLevel caps the prototypes kept per level; it also caps the
	// finest-level tokens that get residual codes.
	MaxPerLevel int
	// MaxTokens caps the whole bag. Tokens are kept rank-major (every
	// level's best first, then every level's second, ...).
	MaxTokens int
}

// QuantizerOptions configures a [Quantizer]. Zero fields take defaults.
type QuantizerOptions struct {
	// Levels holds the prototypes per level, coarse to fine:
	// Levels[l][code] is an L2-normalised row of the model's codebook l.
	// Required; the slices are retained and must not be modified.
	Levels [][][]float32
	// Margin, MaxPerLevel and MaxTokens shape document (ad) bags; defaults
	// 0.05, 3 and 16.
	Margin      float32
	MaxPerLevel int
	MaxTokens   int
	// Query shapes query (user) bags, which are wider than doc bags;
	// defaults Margin 0.5, MaxPerLevel 32, MaxTokens 128.
	Query BagOptions
	// ResidualLevels is the number of residual-quantization levels fitted
	// on what the finest prototype leaves unexplained (default 1; set -1 for
	// none). ResidualCodes is the codebook size per residual level (default
	// 16).
	ResidualLevels int
	ResidualCodes  int
	// Residual optionally holds already fitted residual codebooks (as
	// returned by [Quantizer.Residual]); [Quantizer.Fit] is then optional.
	Residual [][][]float32
	// ProductSubspaces is the number of subspaces of the product code that
	// [Quantizer.Fit] fits on what the residual levels leave (one byte
	// each, 256 codewords a subspace): with the path code it is a doc's
	// first-stage code, from which SearchOptions.ErrorBand scores docs
	// approximately. Default Dim/4, at most 64; -1: none (the band then
	// reads the path code alone).
	ProductSubspaces int
	// Product optionally holds already fitted product codebooks: per
	// subspace, its codewords.
	Product [][][]float32
	// WholeCodes is the codebook size of the whole-vector level, the last
	// level, after the residual ones: a partition of the docs by k-means
	// over their whole embeddings, every coordinate included, fitted by
	// [Quantizer.Fit]. The prototype levels read only the coordinates the
	// model's prototypes span (zero on its collaborative factors), so a
	// query whose best docs owe their score to the other coordinates finds
	// them through this level. A doc's bag holds its nearest code (L2); a
	// query bag none: a similarity-only search takes the postings of the
	// cells of largest dot product with the query beside the prototype
	// levels' (SearchOptions.WholeShare). 0 or negative: none.
	WholeCodes int
	// Whole optionally holds an already fitted whole-vector codebook of
	// WholeCodes codes.
	Whole [][]float32
	// Seed, Iterations and Workers drive the k-means of [Quantizer.Fit].
	Seed       uint64
	Iterations int
	Workers    int
	// FitSample bounds the vectors Fit clusters (default 200000), taken as
	// an evenly spaced subsample.
	FitSample int
}

// Quantizer turns embeddings into Bag-of-Meaning bags. Bag and QueryBag are
// safe for concurrent use once Fit (if called) has returned; Fit must not
// run concurrently with them.
type Quantizer struct {
	opts   QuantizerOptions
	dim    int
	flat   [][]float32 // per level, K*dim row-major prototypes
	parent [][]int32   // per level > 0, nearest coarser prototype of each code
	res    [][]float32 // per residual level, ResidualCodes*dim codewords
	whole  []float32   // WholeCodes*dim codewords of the whole-vector level; nil before Fit
	pq     *productQuantizer
}

// NewQuantizer validates opts, applies defaults and precomputes the
// prototype hierarchy (the parent of a prototype is the nearest prototype of
// the next coarser level).
func NewQuantizer(opts QuantizerOptions) (*Quantizer, error) {
	if opts.Margin == 0 {
		opts.Margin = 0.05
	}
	if opts.MaxPerLevel <= 0 {
		opts.MaxPerLevel = 3
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = 16
	}
	if opts.Query.Margin == 0 {
		opts.Query.Margin = 0.5
	}
	if opts.Query.MaxPerLevel <= 0 {
		opts.Query.MaxPerLevel = 32
	}
	if opts.Query.MaxTokens <= 0 {
		opts.Query.MaxTokens = 128
	}
	if opts.ResidualLevels == 0 {
		opts.ResidualLevels = 1
	}
	if opts.ResidualLevels < 0 {
		opts.ResidualLevels = 0
	}
	if opts.ResidualCodes <= 0 {
		opts.ResidualCodes = 16
	}
	if opts.FitSample <= 0 {
		opts.FitSample = 200_000
	}
	opts.WholeCodes = max(opts.WholeCodes, 0)
	if opts.WholeCodes > MaxTokenCode {
		return nil, fmt.Errorf("new quantizer: %d whole-vector codes: %w", opts.WholeCodes, ErrBadQuantizer)
	}
	L := len(opts.Levels)
	if L == 0 || L+opts.ResidualLevels+min(opts.WholeCodes, 1) > MaxTokenLevels {
		return nil, fmt.Errorf("new quantizer: %d levels + %d residual levels, want 1..%d in all: %w",
			L, opts.ResidualLevels, MaxTokenLevels, ErrBadQuantizer)
	}
	q := &Quantizer{opts: opts}
	for l, protos := range opts.Levels {
		dim, err := checkVectors(protos, q.dim)
		if err != nil {
			return nil, fmt.Errorf("new quantizer: level %d: %w", l, err)
		}
		if len(protos) > MaxTokenCode {
			return nil, fmt.Errorf("new quantizer: level %d has %d prototypes: %w", l, len(protos), ErrBadQuantizer)
		}
		q.dim = dim
		q.flat = append(q.flat, flatten(protos, dim))
	}
	codes := len(opts.Levels[L-1])
	for range opts.ResidualLevels {
		codes *= opts.ResidualCodes
		if codes > MaxTokenCode {
			return nil, fmt.Errorf("new quantizer: residual codes overflow %d token bits: %w", TokenCodeBits, ErrBadQuantizer)
		}
	}
	q.parent = make([][]int32, L)
	for l := 1; l < L; l++ {
		q.parent[l] = make([]int32, len(opts.Levels[l]))
		for c, p := range opts.Levels[l] {
			q.parent[l][c], _ = q.argmaxDot(l-1, p)
		}
	}
	if opts.Residual != nil {
		if len(opts.Residual) != opts.ResidualLevels {
			return nil, fmt.Errorf("new quantizer: %d residual codebooks, want %d: %w", len(opts.Residual), opts.ResidualLevels, ErrBadQuantizer)
		}
		for j, cb := range opts.Residual {
			if len(cb) != opts.ResidualCodes {
				return nil, fmt.Errorf("new quantizer: residual codebook %d has %d codes, want %d: %w", j, len(cb), opts.ResidualCodes, ErrBadQuantizer)
			}
			if _, err := checkVectors(cb, q.dim); err != nil {
				return nil, fmt.Errorf("new quantizer: residual codebook %d: %w", j, err)
			}
			q.res = append(q.res, flatten(cb, q.dim))
		}
	}
	if opts.Whole != nil {
		if len(opts.Whole) != opts.WholeCodes {
			return nil, fmt.Errorf("new quantizer: whole-vector codebook of %d codes, want %d: %w", len(opts.Whole), opts.WholeCodes, ErrBadQuantizer)
		}
		if _, err := checkVectors(opts.Whole, q.dim); err != nil {
			return nil, fmt.Errorf("new quantizer: whole-vector codebook: %w", err)
		}
		q.whole = flatten(opts.Whole, q.dim)
	}
	if opts.ProductSubspaces == 0 {
		q.opts.ProductSubspaces = min(max(q.dim/4, 1), 64)
	}
	if opts.Product != nil {
		pq, err := newProductQuantizer(q.dim, opts.Product)
		if err != nil {
			return nil, fmt.Errorf("new quantizer: %w", err)
		}
		q.pq = pq
		q.opts.ProductSubspaces = pq.subspaces()
	}
	return q, nil
}

// Dim returns the embedding dimension.
func (q *Quantizer) Dim() int { return q.dim }

// NumLevels returns the number of prototype levels (residual levels excluded).
func (q *Quantizer) NumLevels() int { return len(q.flat) }

// Options returns the options with defaults applied.
func (q *Quantizer) Options() QuantizerOptions { return q.opts }

// NumTokenLevels returns the number of token levels: prototype, residual
// and, with WholeCodes, the whole-vector level.
func (q *Quantizer) NumTokenLevels() int {
	return len(q.flat) + q.opts.ResidualLevels + min(q.opts.WholeCodes, 1)
}

// WholeLevel returns the level of the whole-vector tokens
// (QuantizerOptions.WholeCodes) and whether the quantizer has one.
func (q *Quantizer) WholeLevel() (int, bool) {
	return len(q.flat) + q.opts.ResidualLevels, q.opts.WholeCodes > 0
}

// LevelSize returns the number of codes at level (prototype, residual or
// whole-vector).
func (q *Quantizer) LevelSize(level int) int {
	L := len(q.flat)
	if level < L {
		return len(q.flat[level]) / q.dim
	}
	if w, ok := q.WholeLevel(); ok && level == w {
		return q.opts.WholeCodes
	}
	n := len(q.flat[L-1]) / q.dim
	for range level - L + 1 {
		n *= q.opts.ResidualCodes
	}
	return n
}

// Fitted reports whether the residual and whole-vector codebooks are
// available.
func (q *Quantizer) Fitted() bool {
	return len(q.res) == q.opts.ResidualLevels && (q.opts.WholeCodes == 0 || q.whole != nil)
}

// Residual returns copies of the fitted residual codebooks, for persistence.
func (q *Quantizer) Residual() [][][]float32 {
	out := make([][][]float32, len(q.res))
	for j, flat := range q.res {
		out[j] = unflatten(flat, q.dim)
	}
	return out
}

// Parent returns the token of the nearest coarser prototype of a prototype
// token, or the token a residual token refines. It reports false for
// level-0 tokens and unknown tokens.
func (q *Quantizer) Parent(t Token) (Token, bool) {
	l, c := t.Level(), t.Code()
	L := len(q.flat)
	switch {
	case l == 0 || l >= L+q.opts.ResidualLevels || c >= q.LevelSize(l):
		return 0, false
	case l < L:
		return mustToken(l-1, int(q.parent[l][c])), true
	default:
		return mustToken(l-1, c/q.opts.ResidualCodes), true
	}
}

// residualOrder returns the codes of the first residual level best first
// for vec: by vec's dot product with their codewords, the part of the
// similarity to a reconstruction (prototype plus codeword) that differs
// between the codewords of one prototype (ties by code). One codebook
// serves every prototype, so the order holds under each of them. It
// returns nil without fitted residual levels or for a vector of another
// dimension.
func (q *Quantizer) residualOrder(vec []float32) []int32 {
	if len(q.res) == 0 || len(vec) != q.dim {
		return nil
	}
	sims := make([]scored, q.opts.ResidualCodes)
	for c := range sims {
		sims[c] = scored{int32(c), Dot(vec, q.res[0][c*q.dim:(c+1)*q.dim])}
	}
	slices.SortStableFunc(sims, func(a, b scored) int { return cmp.Compare(b.sim, a.sim) })
	order := make([]int32, len(sims))
	for i, s := range sims {
		order[i] = s.code
	}
	return order
}

// children appends to out the tokens of the first residual level that
// refine the finest-level prototype token t, in order (residualOrder's).
// A doc whose bag holds t holds exactly one of them, so their postings
// partition t's. It returns out unchanged for a token of another level.
func (q *Quantizer) children(order []int32, t Token, out []Token) []Token {
	L := len(q.flat)
	if t.Level() != L-1 || t.Code() >= q.LevelSize(L-1) {
		return out
	}
	for _, c := range order {
		out = append(out, mustToken(L, t.Code()*len(order)+int(c)))
	}
	return out
}

// finer appends to out the prototype tokens of the next finer level whose
// parent is the token t of a level above the finest, nearest to vec
// first. Their postings cover most of t's: a doc's tokens at the finer
// level mostly descend from its tokens at t's. It returns out unchanged
// for a token of the finest level or past it.
func (q *Quantizer) finer(vec []float32, t Token, out []Token) []Token {
	l := t.Level()
	if l+1 >= len(q.flat) || t.Code() >= q.LevelSize(l) {
		return out
	}
	for _, k := range q.nearest(l+1, vec) {
		if int(q.parent[l+1][k.Code()]) == t.Code() {
			out = append(out, k)
		}
	}
	return out
}

// nearest returns the prototype tokens of level, nearest to vec first
// (nil for a level out of range or a vector of another dimension).
func (q *Quantizer) nearest(level int, vec []float32) []Token {
	if level < 0 || level >= len(q.flat) || len(vec) != q.dim {
		return nil
	}
	sims := make([]scored, q.LevelSize(level))
	for c := range sims {
		sims[c] = scored{int32(c), Dot(vec, q.proto(level, c))}
	}
	slices.SortStableFunc(sims, func(a, b scored) int { return cmp.Compare(b.sim, a.sim) })
	out := make([]Token, len(sims))
	for i, s := range sims {
		out[i] = mustToken(level, int(s.code))
	}
	return out
}

// Fit fits the residual codebooks, then the product code's, on vectors
// (k-means++ then Lloyd,
// deterministic for the seed). vectors is not retained.
func (q *Quantizer) Fit(ctx context.Context, vectors [][]float32) error {
	if _, err := checkVectors(vectors, q.dim); err != nil {
		return fmt.Errorf("fit quantizer: %w", err)
	}
	sample := vectors
	if len(sample) > q.opts.FitSample {
		sample = make([][]float32, q.opts.FitSample)
		for i := range sample {
			sample[i] = vectors[i*len(vectors)/q.opts.FitSample]
		}
	}
	L := len(q.flat)
	resid := make([][]float32, len(sample))
	for i, v := range sample {
		c, _ := q.argmaxDot(L-1, v)
		resid[i] = subtract(v, q.proto(L-1, int(c)))
	}
	q.res = q.res[:0]
	for j := range q.opts.ResidualLevels {
		cb, err := KMeans(ctx, resid, KMeansOptions{
			K: q.opts.ResidualCodes, Iterations: q.opts.Iterations,
			Seed: q.opts.Seed + uint64(j), Workers: q.opts.Workers,
		})
		if err != nil {
			return fmt.Errorf("fit quantizer: residual level %d: %w", j, err)
		}
		flat := flatten(cb, q.dim)
		for _, r := range resid {
			c, _ := nearestL2(flat, q.dim, r)
			sub(r, flat[int(c)*q.dim:(int(c)+1)*q.dim])
		}
		q.res = append(q.res, flat)
	}
	q.whole = nil
	if c := q.opts.WholeCodes; c > 0 {
		// Its own, smaller sample: k-means over the whole vectors costs
		// n*c*dim per iteration; wholeSample points per code suffice.
		ws := sample
		if n := wholeSample * c; len(ws) > n {
			ws = make([][]float32, n)
			for i := range ws {
				ws[i] = sample[i*len(sample)/n]
			}
		}
		cb, err := KMeans(ctx, ws, KMeansOptions{K: c, Iterations: q.opts.Iterations,
			Seed: q.opts.Seed + 1<<32, Workers: q.opts.Workers})
		if err != nil {
			return fmt.Errorf("fit quantizer: whole-vector level: %w", err)
		}
		q.whole = flatten(cb, q.dim)
	}
	q.pq = nil
	if m := q.opts.ProductSubspaces; m > 0 {
		pq, err := fitProduct(ctx, resid, q.dim, min(m, q.dim), q.opts.Seed+uint64(len(q.res)), q.opts.Iterations, q.opts.Workers)
		if err != nil {
			return fmt.Errorf("fit quantizer: %w", err)
		}
		q.pq = pq
	}
	return nil
}

// CodeBytes returns the bytes of a doc's first-stage code: its path code
// (4), its product code (ProductSubspaces, once fitted) and the norm of
// what they leave (4).
func (q *Quantizer) CodeBytes() int {
	n := 8
	if q.pq != nil {
		n += q.pq.subspaces()
	}
	return n
}

// wholeSample is the number of vectors per code that Fit clusters for the
// whole-vector level.
const wholeSample = 64

// Whole returns a copy of the fitted whole-vector codebook (nil before
// Fit or without one), for persistence.
func (q *Quantizer) Whole() [][]float32 { return unflatten(q.whole, q.dim) }

// unflatten returns copies of the rows of flat, dim floats each (flatten's
// inverse; nil for an empty flat).
func unflatten(flat []float32, dim int) [][]float32 {
	var out [][]float32
	for c := 0; c*dim < len(flat); c++ {
		out = append(out, slices.Clone(flat[c*dim:(c+1)*dim]))
	}
	return out
}

// Bag returns the document bag of vec (see [QuantizerOptions]). It returns
// nil when len(vec) != Dim(). The result is unordered in meaning but
// deterministic: rank-major, coarse level first within a rank.
func (q *Quantizer) Bag(vec []float32) []WeightedToken {
	return q.bagWith(vec, BagOptions{Margin: q.opts.Margin, MaxPerLevel: q.opts.MaxPerLevel, MaxTokens: q.opts.MaxTokens}, false)
}

// QueryBag returns the wider query bag of vec, per QuantizerOptions.Query.
func (q *Quantizer) QueryBag(vec []float32) []WeightedToken {
	return q.bagWith(vec, q.opts.Query, true)
}

// BagWith returns the document bag of vec shaped by o.
func (q *Quantizer) BagWith(vec []float32, o BagOptions) []WeightedToken {
	return q.bagWith(vec, o, false)
}

// bagWith returns the bag of vec shaped by o: a query's (without
// whole-vector tokens: the search picks the cells it reads, wholeNearest)
// or a document's (with its cell).
func (q *Quantizer) bagWith(vec []float32, o BagOptions, query bool) []WeightedToken {
	if len(vec) != q.dim || o.MaxPerLevel <= 0 || o.MaxTokens <= 0 {
		return nil
	}
	L := len(q.flat)
	perLevel := make([][]WeightedToken, 0, L+len(q.res))
	var finest []scored
	top := make([]scored, 0, o.MaxPerLevel+1)
	all := make([]WeightedToken, 0, L*o.MaxPerLevel) // backs perLevel[:L]
	for l := range L {
		top = q.topWithinMargin(l, vec, o.Margin, o.MaxPerLevel, top[:0])
		if l == L-1 {
			finest = top
		}
		lo := len(all)
		for _, s := range top {
			all = append(all, WeightedToken{Token: mustToken(l, int(s.code)), Weight: s.sim})
		}
		perLevel = append(perLevel, all[lo:len(all):len(all)])
	}
	if len(q.res) > 0 {
		resTok := make([][]WeightedToken, len(q.res))
		for j := range resTok {
			resTok[j] = make([]WeightedToken, 0, len(finest))
		}
		scratch := make([]float32, 2*q.dim)
		r, recon := scratch[:q.dim], scratch[q.dim:]
		for _, f := range finest {
			p := q.proto(L-1, int(f.code))
			copy(r, vec)
			sub(r, p)
			copy(recon, p)
			code := int(f.code)
			for j, flat := range q.res {
				c, _ := nearestL2(flat, q.dim, r)
				cw := flat[int(c)*q.dim : (int(c)+1)*q.dim]
				code = code*q.opts.ResidualCodes + int(c)
				sub(r, cw)
				for i, x := range cw {
					recon[i] += x
				}
				// The weight is the similarity to the reconstruction
				// prototype + codewords, comparable across parents.
				resTok[j] = append(resTok[j], WeightedToken{Token: mustToken(L+j, code), Weight: cosine(vec, recon)})
			}
		}
		perLevel = append(perLevel, resTok...)
	}
	if q.whole != nil && !query {
		c, _ := nearestL2(q.whole, q.dim, vec)
		w, _ := q.WholeLevel()
		cw := q.whole[int(c)*q.dim : (int(c)+1)*q.dim]
		perLevel = append(perLevel, []WeightedToken{{Token: mustToken(w, int(c)), Weight: cosine(vec, cw)}})
	}
	out := make([]WeightedToken, 0, o.MaxTokens)
	for rank := 0; len(out) < o.MaxTokens; rank++ {
		added := false
		for _, lv := range perLevel {
			if rank < len(lv) && len(out) < o.MaxTokens {
				out = append(out, lv[rank])
				added = true
			}
		}
		if !added {
			break
		}
	}
	return out
}

// wholeNearest returns the tokens of the m whole-vector cells of largest
// dot product with vec (the cells whose docs score highest for it), best
// first (ties by code), each weighing that dot product; nil without a
// fitted whole-vector level or for a vector of another dimension.
func (q *Quantizer) wholeNearest(vec []float32, m int) []WeightedToken {
	w, ok := q.WholeLevel()
	if !ok || q.whole == nil || len(vec) != q.dim || m <= 0 {
		return nil
	}
	// The m best of WholeCodes (a thousand at a million ads) in a min-heap
	// of m: a sort of them all would cost more than their dot products.
	top := make([]Hit, 0, min(m, q.opts.WholeCodes))
	for c := range q.opts.WholeCodes {
		top = pushTop(top, m, Hit{ID: uint32(c), Score: Dot(vec, q.whole[c*q.dim:(c+1)*q.dim])})
	}
	slices.SortFunc(top, bestFirst)
	out := make([]WeightedToken, 0, len(top))
	for _, h := range top {
		out = append(out, WeightedToken{Token: mustToken(w, int(h.ID)), Weight: h.Score})
	}
	return out
}

type scored struct {
	code int32
	sim  float32
}

func (q *Quantizer) proto(level, code int) []float32 {
	return q.flat[level][code*q.dim : (code+1)*q.dim]
}

func (q *Quantizer) argmaxDot(level int, v []float32) (int32, float32) {
	flat := q.flat[level]
	best, bestS := int32(0), float32(math.Inf(-1))
	for c := 0; c*q.dim < len(flat); c++ {
		if s := Dot(flat[c*q.dim:(c+1)*q.dim], v); s > bestS {
			best, bestS = int32(c), s
		}
	}
	return best, bestS
}

// topWithinMargin returns up to m prototypes of level whose similarity to v
// is within margin of the best, best first (ties by code), in top (which it
// may grow; pass top[:0] to reuse a buffer).
func (q *Quantizer) topWithinMargin(level int, v []float32, margin float32, m int, top []scored) []scored {
	flat := q.flat[level]
	for c := 0; c*q.dim < len(flat); c++ {
		s := Dot(flat[c*q.dim:(c+1)*q.dim], v)
		if len(top) == m && s <= top[m-1].sim {
			continue
		}
		i := len(top)
		top = append(top, scored{})
		for i > 0 && top[i-1].sim < s {
			top[i] = top[i-1]
			i--
		}
		top[i] = scored{int32(c), s}
		if len(top) > m {
			top = top[:m]
		}
	}
	cut := top[0].sim - margin
	for i, s := range top {
		if s.sim < cut {
			return top[:i]
		}
	}
	return top
}

func subtract(a, b []float32) []float32 {
	out := slices.Clone(a)
	sub(out, b)
	return out
}

func sub(a, b []float32) {
	b = b[:len(a)]
	for i := range a {
		a[i] -= b[i]
	}
}

func cosine(a, b []float32) float32 {
	na, nb := Dot(a, a), Dot(b, b)
	if na == 0 || nb == 0 {
		return 0
	}
	return Dot(a, b) / float32(math.Sqrt(float64(na)*float64(nb)))
}

// pathCode returns the code of vec's reconstruction path: its most similar
// finest prototype (the first of its bag at that level) and, per residual
// level, the codeword nearest to what the levels before leave, the code
// of its bag's first token at the last residual level
// (finest*ResidualCodes^levels + codewords). Without fitted residual
// levels it is the finest prototype's code.
func (q *Quantizer) pathCode(vec []float32) uint32 {
	L := len(q.flat)
	c, _ := q.argmaxDot(L-1, vec)
	code := uint32(c)
	if len(q.res) == 0 {
		return code
	}
	r := slices.Clone(vec)
	sub(r, q.proto(L-1, int(c)))
	for _, flat := range q.res {
		w, _ := nearestL2(flat, q.dim, r)
		code = code*uint32(q.opts.ResidualCodes) + uint32(w)
		sub(r, flat[int(w)*q.dim:(int(w)+1)*q.dim])
	}
	return code
}

// residual writes to out what the reconstruction of path code leaves of
// vec: vec minus its finest prototype and residual codewords.
func (q *Quantizer) residual(vec []float32, code uint32, out []float32) {
	copy(out, vec)
	R := uint32(q.opts.ResidualCodes)
	for j := len(q.res) - 1; j >= 0; j-- {
		w := int(code % R)
		sub(out, q.res[j][w*q.dim:(w+1)*q.dim])
		code /= R
	}
	sub(out, q.proto(len(q.flat)-1, int(code)))
}

// bagPathCode returns the path code that a bag of Bag (in its rank order)
// holds: the code of its first token at the last level, residual or
// finest without fitted residual levels; false when the bag has none.
func (q *Quantizer) bagPathCode(bag []WeightedToken) (uint32, bool) {
	last := len(q.flat) + len(q.res) - 1
	for _, wt := range bag {
		if wt.Token.Level() == last {
			return uint32(wt.Token.Code()), true
		}
	}
	return 0, false
}

// adcTable holds one query's dot products with the finest prototypes and
// with every residual codeword: a doc's approximate similarity is then a
// sum of table entries read off its path code (asymmetric distance
// computation, as in product-quantisation search), without reading its
// embedding.
type adcTable struct {
	proto []float32   // by finest prototype
	res   [][]float32 // per residual level, by codeword
	codes uint32      // ResidualCodes
	shift uint32      // log2(codes) when codes is a power of two (the default 16), else 0
}

// adc returns vec's table.
func (q *Quantizer) adc(vec []float32) *adcTable {
	L := len(q.flat)
	n := q.LevelSize(L - 1)
	buf := make([]float32, n+len(q.res)*q.opts.ResidualCodes)
	t := &adcTable{proto: buf[:n:n], res: make([][]float32, len(q.res)), codes: uint32(q.opts.ResidualCodes)}
	if c := t.codes; c > 1 && c&(c-1) == 0 {
		t.shift = uint32(bits.TrailingZeros32(c))
	}
	for c := range n {
		t.proto[c] = Dot(q.proto(L-1, c), vec)
	}
	off := n
	for j, flat := range q.res {
		t.res[j] = buf[off : off+q.opts.ResidualCodes]
		for c := range t.res[j] {
			t.res[j][c] = Dot(flat[c*q.dim:(c+1)*q.dim], vec)
		}
		off += q.opts.ResidualCodes
	}
	return t
}

// sim returns the dot product of the query and the reconstruction of a
// doc with this path code.
func (t *adcTable) sim(code uint32) float32 {
	var s float32
	if t.shift > 0 { // the codes' divisions are shifts
		mask := t.codes - 1
		for j := len(t.res) - 1; j >= 0; j-- {
			s += t.res[j][code&mask]
			code >>= t.shift
		}
		return s + t.proto[code]
	}
	for j := len(t.res) - 1; j >= 0; j-- {
		s += t.res[j][code%t.codes]
		code /= t.codes
	}
	return s + t.proto[code]
}
