package model

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	_ "github.com/blevesearch/bleve/v2/analysis/lang/en" // registers the "en" analyzer
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/hir-ads/hir/graph"
)

// Entities gives the content of a node, or nil when it has none.
// *graph.Store satisfies it.
type Entities interface {
	Entity(id graph.NodeID) *graph.Entity
}

// nodeFeatures are the per-node inputs of the node encoder, before batching.
type nodeFeatures struct {
	entity *graph.Entity // the entity these were computed from (cache key check)
	hash   []float32     // [HashK] in [-1, 1]
	idRows [2]int32      // two hashed rows of the per-id table (0 and 0 without an id)
	text   []int32       // <= TextLen bucket ids
	attrs  []int32       // <= AttrLen bucket ids
	vec    []float32     // [VectorDim] or nil
	spec   int32         // the ad's row of the spectral table, or -1
}

// featurizer turns subgraphs into fixed-shape batch tensors. It caches the
// analysed content of each node. Safe for concurrent use.
type featurizer struct {
	cfg      Config
	analyzer analysis.Analyzer
	// spec is the model's spectral table (Config.Spectral), set before
	// the first featurisation and not changed after; nil gives zeros.
	spec *spectralTable

	mu    sync.RWMutex
	cache map[graph.NodeID]*nodeFeatures // mu must be held
}

func newFeaturizer(cfg Config) (*featurizer, error) {
	a, err := registry.NewCache().AnalyzerNamed("en")
	if err != nil {
		return nil, fmt.Errorf("load en analyzer: %w", err)
	}
	return &featurizer{cfg: cfg, analyzer: a, cache: make(map[graph.NodeID]*nodeFeatures)}, nil
}

// hash64 is FNV-1a over a seed and the given strings.
func hash64(seed uint64, parts ...string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	_, _ = h.Write(b[:])
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	// Finalise (splitmix64) so that close inputs spread over all bits.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// idHash returns the k deep-hash-embedding inputs of an external id, each in [-1, 1].
func idHash(t graph.NodeType, id string, k int) []float32 {
	out := make([]float32, k)
	ts := t.String()
	for i := range out {
		u := hash64(uint64(i)+1, ts, id)
		out[i] = float32(float64(u>>11)/float64(1<<53)*2 - 1)
	}
	return out
}

// idTableRows returns the two rows of the per-id hashed table of an
// external id, in [1, rows) (row 0 is the row of nodes without an id: the
// virtual anchor of a cold-start subgraph). With rows < 2 both are 0.
func idTableRows(t graph.NodeType, id string, rows int) [2]int32 {
	if rows < 2 {
		return [2]int32{}
	}
	ts := t.String()
	var out [2]int32
	for i := range out {
		out[i] = int32(1 + hash64(uint64(201+i), ts, id)%uint64(rows-1))
	}
	return out
}

// textBuckets analyses text with bleve's English analyzer and returns the
// hashed buckets of its words and word bigrams, deduplicated, in order of first
// appearance, at most max.
func textBuckets(a analysis.Analyzer, text string, buckets, max int) []int32 {
	if text == "" {
		return nil
	}
	toks := a.Analyze([]byte(text))
	out := make([]int32, 0, min(max, 2*len(toks)))
	seen := make(map[int32]struct{}, cap(out))
	add := func(b int32) bool {
		if _, ok := seen[b]; ok {
			return true
		}
		seen[b] = struct{}{}
		out = append(out, b)
		return len(out) < max
	}
	// Words first (they matter most), then bigrams.
	for _, tk := range toks {
		if !add(int32(hash64(101, "w", string(tk.Term)) % uint64(buckets))) {
			return out
		}
	}
	for i := 1; i < len(toks); i++ {
		if !add(int32(hash64(102, "b", string(toks[i-1].Term), string(toks[i].Term)) % uint64(buckets))) {
			return out
		}
	}
	return out
}

// attrBuckets hashes the type-qualified key=value pairs, sorted by key.
func attrBuckets(t graph.NodeType, attrs map[string]string, buckets, max int) []int32 {
	if len(attrs) == 0 {
		return nil
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > max {
		keys = keys[:max]
	}
	out := make([]int32, len(keys))
	ts := t.String()
	for i, k := range keys {
		out[i] = int32(hash64(103, ts, k, attrs[k]) % uint64(buckets))
	}
	return out
}

// adKey is a key of the spectral table's attribute rows
// (spectralTable.Attr): an attribute value of an ad, or a word of its
// text, and the group it belongs to (the attribute's name, or textGroup).
type adKey struct {
	key   uint64
	group string
}

// textGroup is the group of an ad's text words among its keys (adKeys).
// It starts with a NUL byte, which attribute names do not hold in
// practice; one that did would only share the words' group weight.
const textGroup = "\x00text"

// attrKeys returns one key per attribute value of an ad (key and value
// hashed whole, 64 bits, so that distinct values practically never share
// one, unlike the encoder's attribute buckets), in the order of the
// attribute names.
func attrKeys(attrs map[string]string) []adKey {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]adKey, 0, len(attrs))
	for k, v := range attrs {
		out = append(out, adKey{key: hash64(107, k, v), group: k})
	}
	slices.SortFunc(out, func(a, b adKey) int { return strings.Compare(a.group, b.group) })
	return out
}

// adKeys returns the keys of e's attribute rows (spectralTable.Attr): its
// attribute values (attrKeys), then the distinct words of its analysed
// text (each hashed whole, 64 bits, in textGroup). They are computed when
// asked, not cached: only an ad without factors of its own needs them.
func (f *featurizer) adKeys(e *graph.Entity) []adKey {
	if e == nil {
		return nil
	}
	out := attrKeys(e.Attrs)
	if e.Text == "" {
		return out
	}
	seen := make(map[uint64]struct{})
	for _, tk := range f.analyzer.Analyze([]byte(e.Text)) {
		key := hash64(109, "w", string(tk.Term))
		if _, ok := seen[key]; ok {
			continue
		}
		seen[key] = struct{}{}
		out = append(out, adKey{key: key, group: textGroup})
	}
	return out
}

// adKeysOf returns a function giving an ad's keys from src (adKeys;
// fitSpectral's attribute rows). It reads the entities directly: the
// featurizer's cache holds each ad's row of the spectral table, which the
// fit is about to make.
func (f *featurizer) adKeysOf(src Entities) func(id graph.NodeID) []adKey {
	return func(id graph.NodeID) []adKey { return f.adKeys(src.Entity(id)) }
}

// contentBuckets returns a function giving a node's content buckets from
// src: its text buckets, then its attribute buckets after them (offset by
// Config.TextBkts), one space for both (fitSpectral's content).
func (f *featurizer) contentBuckets(src Entities) func(id graph.NodeID) []int32 {
	return func(id graph.NodeID) []int32 { return f.profileBuckets(f.node(src, id)) }
}

// profileBuckets returns nf's content buckets: its text buckets, then its
// attribute buckets offset by Config.TextBkts (contentBuckets).
func (f *featurizer) profileBuckets(nf *nodeFeatures) []int32 {
	out := make([]int32, 0, len(nf.text)+len(nf.attrs))
	out = append(out, nf.text...)
	for _, b := range nf.attrs {
		out = append(out, int32(f.cfg.TextBkts)+b)
	}
	return out
}

// node returns the features of id, computing and caching them on first use.
// Without an entity, the node gets only its id hash.
func (f *featurizer) node(src Entities, id graph.NodeID) *nodeFeatures {
	var ent *graph.Entity
	if src != nil {
		ent = src.Entity(id)
	}
	f.mu.RLock()
	nf := f.cache[id]
	f.mu.RUnlock()
	if nf != nil && nf.entity == ent {
		return nf
	}
	nf = &nodeFeatures{entity: ent, spec: -1}
	if ent != nil {
		if f.spec != nil && ent.Type == graph.NodeAd {
			nf.spec = f.spec.row(ent.ID)
		}
		nf.hash = idHash(ent.Type, ent.ID, f.cfg.HashK)
		nf.idRows = idTableRows(ent.Type, ent.ID, f.cfg.IDRows)
		nf.text = textBuckets(f.analyzer, ent.Text, f.cfg.TextBkts, f.cfg.TextLen)
		nf.attrs = attrBuckets(ent.Type, ent.Attrs, f.cfg.AttrBkts, f.cfg.AttrLen)
		if len(ent.Vector) > 0 {
			nf.vec = make([]float32, f.cfg.VectorDim)
			copy(nf.vec, ent.Vector)
		}
	} else if id.Idx == graph.VirtualIdx {
		nf.hash = make([]float32, f.cfg.HashK) // cold-start anchor: no id information
	} else {
		// Unknown content: hash the dense id so distinct nodes still differ.
		nf.hash = idHash(id.Type, fmt.Sprintf("#%d", id.Idx), f.cfg.HashK)
		nf.idRows = idTableRows(id.Type, fmt.Sprintf("#%d", id.Idx), f.cfg.IDRows)
	}
	f.mu.Lock()
	f.cache[id] = nf
	f.mu.Unlock()
	return nf
}

// batch holds a featurised batch of B subgraphs of N tokens each, flattened
// row-major. Token 0 of every row is its anchor.
type batch struct {
	B, N int

	nodeType   []int32   // [B,N]
	hash       []float32 // [B,N,HashK]
	idRows     []int32   // [B,N,2] rows of the per-id hashed table
	text       []int32   // [B,N,TextLen]
	textMask   []float32 // [B,N,TextLen]
	attr       []int32   // [B,N,AttrLen]
	attrMask   []float32 // [B,N,AttrLen]
	vec        []float32 // [B,N,VectorDim]
	hop        []int32   // [B,N] clipped to maxHop
	edgeType   []int32   // [B,N]
	timeBucket []int32   // [B,N]
	weight     []float32 // [B,N] log1p(decayed weight)
	walk       []float32 // [B,N]
	activity   []float32 // [B,2] the anchor's log1p recent and total engagement counts
	histText   []int32   // [B,2*TextLen] the anchor's history's pooled text buckets (Config.History)
	histTextW  []float32 // [B,2*TextLen] their weights, summing to 1 (or all 0)
	histAttr   []int32   // [B,2*AttrLen] the pooled attribute buckets
	histAttrW  []float32 // [B,2*AttrLen]
	spec       []float32 // [B,Spectral] the anchors' spectral factors (see spectral); not an encoder input
	specHas    []bool    // [B] whether spectral gave the anchor factors
	mask       []bool    // [B,N]
	spd        []int32   // [B,N,N]
	typePair   []int32   // [B,N,N] type(i)*NumNodeTypes + type(j)
}

const maxHop = 7

// numBatchInputs is the number of tensors a batch contributes to a graph.
const numBatchInputs = 21

// histLens are the lengths of the pooled history bags: twice a token's own.
func histLens(c Config) (text, attr int) { return 2 * c.TextLen, 2 * c.AttrLen }

// featurize builds a batch from the content of src (see featurizeFrom).
func (f *featurizer) featurize(src Entities, sgs []*graph.Subgraph, rows int) (*batch, error) {
	return f.featurizeFrom(func(int) Entities { return src }, sgs, rows)
}

// featurizeFrom builds a batch; src(b) supplies the content of sgs[b]'s
// nodes. All subgraphs must have the same N; rows beyond
// len(sgs) up to rows (bucket padding) are all-padding except a masked-in dummy
// anchor, so that no softmax row is empty.
func (f *featurizer) featurizeFrom(src func(b int) Entities, sgs []*graph.Subgraph, rows int) (*batch, error) {
	if len(sgs) == 0 {
		return nil, fmt.Errorf("featurize: %w: empty batch", ErrBadConfig)
	}
	n := sgs[0].N
	for i, sg := range sgs {
		if sg == nil || sg.N != n || len(sg.Nodes) != n || len(sg.Mask) != n || len(sg.SPD) != n*n ||
			len(sg.Hop) != n || len(sg.EdgeType) != n || len(sg.TimeBucket) != n || len(sg.EdgeWeight) != n ||
			len(sg.WalkFreq) != n {
			return nil, fmt.Errorf("featurize: subgraph %d: %w: inconsistent shape (N=%d)", i, ErrBadConfig, n)
		}
		if n == 0 || !sg.Mask[0] {
			return nil, fmt.Errorf("featurize: subgraph %d: %w: no anchor (token 0 masked out)", i, ErrBadConfig)
		}
	}
	rows = max(rows, len(sgs))
	c := f.cfg
	ht, ha := histLens(c)
	sd := max(c.Spectral, 0)
	bt := &batch{
		B: rows, N: n,
		nodeType: make([]int32, rows*n), hash: make([]float32, rows*n*c.HashK), idRows: make([]int32, rows*n*2),
		text: make([]int32, rows*n*c.TextLen), textMask: make([]float32, rows*n*c.TextLen),
		attr: make([]int32, rows*n*c.AttrLen), attrMask: make([]float32, rows*n*c.AttrLen),
		vec: make([]float32, rows*n*c.VectorDim), hop: make([]int32, rows*n), edgeType: make([]int32, rows*n),
		timeBucket: make([]int32, rows*n), weight: make([]float32, rows*n), walk: make([]float32, rows*n),
		activity: make([]float32, rows*2),
		histText: make([]int32, rows*ht), histTextW: make([]float32, rows*ht),
		histAttr: make([]int32, rows*ha), histAttrW: make([]float32, rows*ha), spec: make([]float32, rows*sd), specHas: make([]bool, rows),
		mask: make([]bool, rows*n), spd: make([]int32, rows*n*n), typePair: make([]int32, rows*n*n),
	}
	var pool []bucketWeight
	var specRows []int32
	for b := range rows {
		if b >= len(sgs) {
			bt.mask[b*n] = true // dummy row: a lone anchor of invalid type
			for i := range n * n {
				bt.spd[b*n*n+i] = graph.SPDPad
			}
			bt.spd[b*n*n] = 0
			continue
		}
		sg := sgs[b]
		bt.activity[2*b], bt.activity[2*b+1] = sg.Activity[0], sg.Activity[1]
		if c.History > 0 {
			f.history(src(b), sg, &pool, bt.histText[b*ht:(b+1)*ht], bt.histTextW[b*ht:(b+1)*ht],
				bt.histAttr[b*ha:(b+1)*ha], bt.histAttrW[b*ha:(b+1)*ha])
		}
		if f.spec != nil {
			specRows, bt.specHas[b] = f.spectral(src(b), sg, bt.spec[b*sd:(b+1)*sd], specRows)
		}
		for i := range n {
			t := b*n + i
			bt.mask[t] = sg.Mask[i]
			if !sg.Mask[i] {
				continue
			}
			id := sg.Nodes[i]
			bt.nodeType[t] = int32(id.Type)
			bt.hop[t] = int32(min(int(sg.Hop[i]), maxHop))
			bt.edgeType[t] = int32(min(int(sg.EdgeType[i]), graph.NumEdgeTypes-1))
			bt.timeBucket[t] = int32(min(int(sg.TimeBucket[i]), graph.NumTimeBuckets-1))
			w := float64(sg.EdgeWeight[i])
			if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
				w = 0
			}
			bt.weight[t] = float32(math.Log1p(w))
			bt.walk[t] = sg.WalkFreq[i]
			nf := f.node(src(b), id)
			copy(bt.hash[t*c.HashK:], nf.hash)
			bt.idRows[2*t], bt.idRows[2*t+1] = nf.idRows[0], nf.idRows[1]
			if len(sg.DropFeat) == n && sg.DropFeat[i] {
				continue // content hidden: id, type, position and edge remain
			}
			for j, v := range nf.text {
				bt.text[t*c.TextLen+j] = v
				bt.textMask[t*c.TextLen+j] = 1
			}
			for j, v := range nf.attrs {
				bt.attr[t*c.AttrLen+j] = v
				bt.attrMask[t*c.AttrLen+j] = 1
			}
			copy(bt.vec[t*c.VectorDim:], nf.vec)
		}
		for i := range n {
			for j := range n {
				p := b*n*n + i*n + j
				s := int32(sg.SPD[i*n+j])
				if !sg.Mask[i] || !sg.Mask[j] || s > graph.SPDPad {
					s = graph.SPDPad
				}
				bt.spd[p] = s
				bt.typePair[p] = bt.nodeType[b*n+i]*int32(graph.NumNodeTypes) + bt.nodeType[b*n+j]
			}
		}
	}
	return bt, nil
}

// spectral writes the spectral factors of sg's anchor into out [K]
// (Config.Spectral; f.spec is set): an anchor without a row of its own (a
// user) the fold-in of its history's rows (graph.Subgraph.History,
// weighted by HistoryW); an ad anchor its row when it has a history as of
// the subgraph's time, or when the row came from its content alone (it had
// no engagement at the fit), as an ad met when serving has none before its
// first engagement (an anchor-only view has none either); any other ad the
// attribute rows of its attribute values (spectralTable.attrFold: the ads
// of its campaign, advertiser or brand that had engagement). Otherwise out
// stays zero. It reports whether the anchor got factors. rows is scratch,
// returned for reuse.
func (f *featurizer) spectral(src Entities, sg *graph.Subgraph, out []float32, rows []int32) ([]int32, bool) {
	k := f.spec.K
	anchor := f.node(src, sg.Nodes[0])
	switch {
	case anchor.spec >= 0 && (len(sg.History) > 0 || f.spec.contentOnly(anchor.spec)):
		copy(out[:k], f.spec.Rows[int(anchor.spec)*k:(int(anchor.spec)+1)*k])
		return rows, true
	case anchor.spec < 0 && sg.Nodes[0].Type != graph.NodeAd && len(sg.History) > 0 && len(sg.HistoryW) == len(sg.History):
		rows = rows[:0]
		for _, h := range sg.History {
			rows = append(rows, f.node(src, h).spec)
		}
		return rows, f.spec.fold(out[:k], rows, sg.HistoryW)
	case anchor.spec < 0 && sg.Nodes[0].Type == graph.NodeUser && len(sg.History) == 0 && len(f.spec.Profile) > 0:
		return rows, f.spec.profileFold(out[:k], f.profileBuckets(anchor))
	case sg.Nodes[0].Type == graph.NodeAd && len(f.spec.Attr) > 0:
		return rows, f.spec.attrFold(out[:k], f.adKeys(anchor.entity))
	}
	return rows, false
}

// bucketWeight is a content bucket and its pooled weight.
type bucketWeight struct {
	bucket int32
	w      float32
}

// history pools the content of sg's first Config.History history entries:
// each entry spreads its weight evenly over its text buckets and over its
// attribute buckets (as the bag mean of its own token does); the heaviest
// buckets are kept, as many as the outputs hold, with weights that sum to 1.
// A subgraph without history leaves the outputs zero. pool is scratch.
func (f *featurizer) history(src Entities, sg *graph.Subgraph, pool *[]bucketWeight, text []int32, textW []float32, attr []int32, attrW []float32) {
	n := min(f.cfg.History, len(sg.History), len(sg.HistoryW))
	if n == 0 {
		return
	}
	nfs := make([]*nodeFeatures, n)
	for k := range n {
		nfs[k] = f.node(src, sg.History[k])
	}
	for _, attrs := range []bool{false, true} {
		p := (*pool)[:0]
		for k, nf := range nfs {
			bs := nf.text
			if attrs {
				bs = nf.attrs
			}
			for _, bk := range bs {
				p = append(p, bucketWeight{bk, sg.HistoryW[k] / float32(len(bs))})
			}
		}
		if attrs {
			topBuckets(p, attr, attrW)
		} else {
			topBuckets(p, text, textW)
		}
		*pool = p
	}
}

// topBuckets merges p's entries by bucket and writes the heaviest (ties:
// the lower bucket) into ids and ws, weights normalised to sum 1.
func topBuckets(p []bucketWeight, ids []int32, ws []float32) {
	if len(p) == 0 {
		return
	}
	slices.SortFunc(p, func(a, b bucketWeight) int { return cmp.Compare(a.bucket, b.bucket) })
	m := 0
	for _, e := range p[1:] {
		if e.bucket == p[m].bucket {
			p[m].w += e.w
		} else {
			m++
			p[m] = e
		}
	}
	p = p[:m+1]
	slices.SortStableFunc(p, func(a, b bucketWeight) int { return cmp.Compare(b.w, a.w) })
	p = p[:min(len(p), len(ids))]
	var sum float32
	for _, e := range p {
		sum += e.w
	}
	if !(sum > 0) {
		return
	}
	for i, e := range p {
		ids[i], ws[i] = e.bucket, e.w/sum
	}
}

// tensors returns the batch as GoMLX inputs in the order encode expects.
func (bt *batch) tensors(c Config) []*tensors.Tensor {
	B, N := bt.B, bt.N
	return []*tensors.Tensor{
		tensors.FromFlatDataAndDimensions(bt.nodeType, B, N),
		tensors.FromFlatDataAndDimensions(bt.hash, B, N, c.HashK),
		tensors.FromFlatDataAndDimensions(bt.text, B, N, c.TextLen),
		tensors.FromFlatDataAndDimensions(bt.textMask, B, N, c.TextLen),
		tensors.FromFlatDataAndDimensions(bt.attr, B, N, c.AttrLen),
		tensors.FromFlatDataAndDimensions(bt.attrMask, B, N, c.AttrLen),
		tensors.FromFlatDataAndDimensions(bt.vec, B, N, c.VectorDim),
		tensors.FromFlatDataAndDimensions(bt.hop, B, N),
		tensors.FromFlatDataAndDimensions(bt.edgeType, B, N),
		tensors.FromFlatDataAndDimensions(bt.timeBucket, B, N),
		tensors.FromFlatDataAndDimensions(bt.weight, B, N),
		tensors.FromFlatDataAndDimensions(bt.walk, B, N),
		tensors.FromFlatDataAndDimensions(bt.mask, B, N),
		tensors.FromFlatDataAndDimensions(bt.spd, B, N, N),
		tensors.FromFlatDataAndDimensions(bt.typePair, B, N, N),
		tensors.FromFlatDataAndDimensions(bt.idRows, B, N, 2),
		tensors.FromFlatDataAndDimensions(bt.activity, B, 2),
		tensors.FromFlatDataAndDimensions(bt.histText, B, len(bt.histText)/B),
		tensors.FromFlatDataAndDimensions(bt.histTextW, B, len(bt.histTextW)/B),
		tensors.FromFlatDataAndDimensions(bt.histAttr, B, len(bt.histAttr)/B),
		tensors.FromFlatDataAndDimensions(bt.histAttrW, B, len(bt.histAttrW)/B),
	}
}
