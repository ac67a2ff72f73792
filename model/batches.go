package model

import (
	gocontext "context"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/hir-ads/hir/graph"
)

// stepBatch is everything one step feeds the graph.
type stepBatch struct {
	step    int
	inputs  []*tensors.Tensor
	labels  []float32
	weights []float32
	err     error
}

func anySlice(ts []*tensors.Tensor) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}

// buildStep samples and featurises the batch of the given events.
func (tr *trainer) buildStep(step int, evs []event, asOf int64, salt uint64) *stepBatch {
	P := len(evs)
	rng := rand.New(rand.NewPCG(seedFor(tr.cfg.Seed, salt, uint64(step)), 11))
	queue := tr.cfg.Negatives > 0
	na := 3 * P // sources, destinations, random nodes of the destinations' types
	if queue {
		na = 2 * P // the queue of earlier destinations replaces the random nodes
	}
	anchors := make([]graph.NodeID, na)
	for i, ev := range evs {
		anchors[i] = ev.src
		anchors[P+i] = ev.dst
		if !queue {
			nn := tr.store.NumNodes(ev.dst.Type)
			anchors[2*P+i] = graph.NodeID{Type: ev.dst.Type, Idx: uint32(rng.IntN(max(nn, 1)))}
		}
	}
	sb := &stepBatch{step: step}
	teacher := make([]*graph.Subgraph, len(anchors))
	student := make([]*graph.Subgraph, len(anchors))
	for i, a := range anchors {
		teacher[i] = tr.sampler.Sample(a, asOf, graph.ViewTeacher, seedFor(tr.cfg.Seed, salt, uint64(step), uint64(i), 0))
		student[i] = tr.sampler.Sample(a, asOf, graph.ViewStudent, seedFor(tr.cfg.Seed, salt, uint64(step), uint64(i), 1))
	}
	tb, err := tr.feat.featurize(tr.store, teacher, 0)
	if err != nil {
		sb.err = err
		return sb
	}
	sfull, sone, perm, err := tr.feat.featurizeSplit(tr.store, student)
	if err != nil {
		sb.err = err
		return sb
	}
	n := 3 * P
	src, dst, et, tbk := make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	label, pw := make([]float32, n), make([]float32, n)
	for i, ev := range evs {
		typ, lab := ev.typ, float32(1)
		if typ.IsNegative() {
			typ, lab = graph.EdgeInterested, 0 // explicit negative: never pulls together
		}
		bucket := int32(graph.TimeBucket(ev.ts - asOf))
		third := 2*P + i // a random node
		if queue {
			third = P + (i+2)%P // another event's destination
		}
		for k, d := range []int{P + i, P + (i+1)%P, third} {
			j := k*P + i
			src[j], dst[j], et[j], tbk[j] = int32(i), int32(d), int32(typ), bucket
			if k == 0 {
				label[j], pw[j] = lab, 1
			} else {
				label[j], pw[j] = 0, 0.5
			}
		}
	}
	rowW := make([]float32, na)
	for i := range rowW {
		rowW[i] = 1
	}
	mc := tr.cfg.Model
	sb.inputs = append(tb.tensors(mc), sfull.tensors(mc)...)
	sb.inputs = append(sb.inputs, sone.tensors(mc)...)
	sb.inputs = append(sb.inputs, tensors.FromFlatDataAndDimensions(perm, na),
		tensors.FromFlatDataAndDimensions(src, n), tensors.FromFlatDataAndDimensions(dst, n),
		tensors.FromFlatDataAndDimensions(et, n), tensors.FromFlatDataAndDimensions(tbk, n),
		tensors.FromFlatDataAndDimensions(label, n), tensors.FromFlatDataAndDimensions(pw, n),
		tensors.FromFlatDataAndDimensions(rowW, na))
	if queue {
		logq, key := make([]float32, P), make([]int32, P)
		for i, ev := range evs {
			logq[i] = tr.logSampling(ev.dst)
			key[i] = nodeKey(ev.dst)
		}
		sb.inputs = append(sb.inputs, tensors.FromFlatDataAndDimensions(logq, P), tensors.FromFlatDataAndDimensions(key, P))
	} else if tr.cfg.LogQ.on() {
		logq := make([]float32, 2*P)
		for i, a := range anchors[P:] {
			logq[i] = tr.logCandidate(a)
		}
		sb.inputs = append(sb.inputs, tensors.FromFlatDataAndDimensions(logq, 2*P))
	}
	sb.labels, sb.weights = label, pw
	return sb
}

// aloneQuantum is the granularity of the part of a student batch encoded
// at one token per row (see featurizeSplit): its row count is a multiple of
// it, so that a training run compiles few graph shapes.
const aloneQuantum = 16

// featurizeSplit featurises a view's subgraphs as two batches that encode
// to the same anchor embeddings as one batch of all of them (padding tokens
// are masked out), at less cost: one holds a multiple of aloneQuantum of the
// subgraphs of the anchor alone (Len 1: the student view's cold-start
// draws, nodes without edges) at one token each, the other the rest at
// their N. perm[i] is subgraph i's row in the concatenation of the two
// (full rows first). With fewer than aloneQuantum anchors alone, the
// one-token batch is a single row that perm does not use.
func (f *featurizer) featurizeSplit(src Entities, sgs []*graph.Subgraph) (full, one *batch, perm []int32, err error) {
	alone := 0
	for _, sg := range sgs {
		if sg.Len == 1 {
			alone++
		}
	}
	alone -= alone % aloneQuantum
	perm = make([]int32, len(sgs))
	inOne := make([]bool, len(sgs))
	var fullSGs, oneSGs []*graph.Subgraph
	for i, sg := range sgs {
		if alone > 0 && sg.Len == 1 {
			inOne[i] = true
			alone--
			continue
		}
		perm[i] = int32(len(fullSGs))
		fullSGs = append(fullSGs, sg)
	}
	for i, sg := range sgs {
		if !inOne[i] {
			continue
		}
		p, err := sg.Padded(1)
		if err != nil {
			return nil, nil, nil, err
		}
		perm[i] = int32(len(fullSGs) + len(oneSGs))
		oneSGs = append(oneSGs, p)
	}
	if len(oneSGs) == 0 {
		// An unused row keeps the graph's inputs the same.
		oneSGs = append(oneSGs, anchorAlone(sgs[0]))
	}
	if full, err = f.featurize(src, fullSGs, 0); err != nil {
		return nil, nil, nil, err
	}
	if one, err = f.featurize(src, oneSGs, 0); err != nil {
		return nil, nil, nil, err
	}
	return full, one, perm, nil
}

// anchorAlone is a one-token view of g's anchor alone, without activity or
// history.
func anchorAlone(g *graph.Subgraph) *graph.Subgraph {
	return &graph.Subgraph{
		Anchor: g.Anchor, AsOf: g.AsOf, View: g.View, N: 1, Len: 1,
		Nodes: []graph.NodeID{g.Anchor}, Mask: []bool{true}, Hop: []uint8{0}, EdgeType: []graph.EdgeType{graph.EdgeNone},
		TimeBucket: []uint8{0}, EdgeWeight: []float32{0}, EdgeTS: []int64{0}, WalkFreq: []float32{1}, DropFeat: []bool{false},
		SPD: []uint8{0},
	}
}

// loader returns next, which delivers the batches of steps [from, to) in
// order, and stop, which releases the goroutines. In pipelined mode Workers
// goroutines prepare up to Queue batches ahead while the caller trains; in
// synchronous mode next builds each batch on the caller's goroutine. The
// batches are identical in both modes.
func (tr *trainer) loader(ctx gocontext.Context, from, to int) (next func() *stepBatch, stop func()) {
	build := func(s int) *stepBatch {
		evs, asOf := tr.eventsForStep(s)
		return tr.buildStep(s, evs, asOf, 2)
	}
	if tr.cfg.Synchronous {
		s := from
		return func() *stepBatch {
			if s >= to || ctx.Err() != nil {
				return nil
			}
			s++
			return build(s - 1)
		}, func() {}
	}
	out := make(chan *stepBatch)
	done := make(chan struct{})
	var wg sync.WaitGroup
	futures := make(chan chan *stepBatch, tr.cfg.Queue)
	sem := make(chan struct{}, tr.cfg.Workers)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(futures)
		for s := from; s < to; s++ {
			f := make(chan *stepBatch, 1)
			select {
			case futures <- f:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
			select {
			case sem <- struct{}{}:
			case <-done:
				return
			}
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				defer func() { <-sem }()
				f <- build(s)
			}(s)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		for f := range futures {
			var b *stepBatch
			select {
			case b = <-f:
			case <-done:
				return
			}
			select {
			case out <- b:
			case <-done:
				return
			}
		}
	}()
	return func() *stepBatch {
			select {
			case b := <-out:
				return b
			case <-ctx.Done():
				return nil
			}
		}, func() {
			close(done)
			wg.Wait()
		}
}

// logCandidate is the log of id's expected share of the 2P candidates of
// the in-batch alignment loss: P destinations drawn by popularity and P
// nodes of a destination's type drawn uniformly.
func (tr *trainer) logCandidate(id graph.NodeID) float32 {
	pop := float64(tr.dstCount[id]) / float64(max(len(tr.train), 1))
	uni := 1 / float64(max(tr.store.NumNodes(id.Type), 1))
	return float32(math.Log(pop + uni))
}

// nodeKey is an int32 identity of a node for in-graph comparisons.
func nodeKey(id graph.NodeID) int32 {
	return int32(id.Idx)*int32(graph.NumNodeTypes) + int32(id.Type)
}

// countDestinations counts how often each node is the destination of a
// training event: the sampling frequency of the retrieval loss's candidates.
func (tr *trainer) countDestinations() {
	tr.dstCount = make(map[graph.NodeID]int, 1024)
	for _, ev := range tr.train {
		tr.dstCount[ev.dst]++
	}
}

// logSampling is the log of the probability that a training event's
// destination is id (a node seen in no training event counts once).
func (tr *trainer) logSampling(id graph.NodeID) float32 {
	c := max(tr.dstCount[id], 1)
	return float32(math.Log(float64(c) / float64(max(len(tr.train), 1))))
}
