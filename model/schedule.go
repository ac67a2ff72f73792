package model

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/hir-ads/hir/graph"
)

// event is one engagement edge used for training.
type event struct {
	src, dst graph.NodeID
	typ      graph.EdgeType
	ts       int64
}

// loadEvents collects the engagement events and splits them by time.
func (tr *trainer) loadEvents() error {
	var all, weak []event
	tr.store.ForEachEdge(tr.store.MinTS(), tr.store.MaxTS()+1, func(src graph.NodeID, e graph.Edge) bool {
		ev := event{src: src, dst: e.Nbr, typ: e.Type, ts: e.TS}
		switch {
		case e.Type.IsPositive() || e.Type.IsNegative():
			all = append(all, ev)
		case e.Type == graph.EdgeImpression:
			weak = append(weak, ev)
		}
		return true
	})
	if len(all) == 0 {
		all = weak // impressions only: better than nothing
	}
	if len(all) < 2*tr.cfg.Pairs {
		return fmt.Errorf("load events: %w: %d engagement events, want >= %d", ErrNoData, len(all), 2*tr.cfg.Pairs)
	}
	slices.SortFunc(all, func(a, b event) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.src.Type, b.src.Type), cmp.Compare(a.src.Idx, b.src.Idx),
			cmp.Compare(a.dst.Type, b.dst.Type), cmp.Compare(a.dst.Idx, b.dst.Idx), cmp.Compare(a.typ, b.typ))
	})
	cut := int(float64(len(all)) * (1 - tr.cfg.ValFraction))
	cut = max(cut, tr.cfg.Pairs)
	// Keep equal timestamps on one side of the split.
	for cut < len(all) && cut > 0 && all[cut].ts == all[cut-1].ts {
		cut++
	}
	tr.train, tr.val = all[:cut], all[cut:]
	if cut < len(all) {
		tr.splitTS = all[cut].ts
	} else {
		tr.splitTS = all[len(all)-1].ts + 1
	}
	return nil
}

// seedFor derives a deterministic seed from the run seed and some integers.
func seedFor(seed uint64, parts ...uint64) uint64 {
	x := seed ^ 0x9e3779b97f4a7c15
	for _, p := range parts {
		x ^= p + 0x9e3779b97f4a7c15 + (x << 6) + (x >> 2)
		x ^= x >> 31
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 29
	}
	return x
}

// schedule returns the length in events of a time block and the steps of
// an epoch (every block once).
func (tr *trainer) schedule() (blockLen, epochSteps int) {
	P := tr.cfg.Pairs
	blockLen = tr.cfg.BlockSteps * P
	n := len(tr.train)
	blocks := max(1, n/blockLen)
	epochSteps = max(1, (blocks*blockLen)/P)
	if n < blockLen {
		blockLen = n - n%P
		epochSteps = max(1, n/P)
	}
	return blockLen, epochSteps
}

// endOnNewest sets the schedule's offset so that the step before end is
// the last step of an epoch: a run shorter than an epoch trains on the
// newest blocks, and every run, a resumed one too, ends on the newest
// events, which the served model has to be fresh on.
func (tr *trainer) endOnNewest(end int) {
	_, e := tr.schedule()
	tr.shift = (e - end%e) % e
}

// eventsForStep returns the events of a step: the train events are cut into
// time blocks of BlockSteps*Pairs events, from the newest back; each epoch visits the blocks in time
// order and shuffles events only inside a block. Steps are offset by
// tr.shift (endOnNewest).
func (tr *trainer) eventsForStep(step int) (evs []event, asOf int64) {
	P := tr.cfg.Pairs
	n := len(tr.train)
	blockLen, epochSteps := tr.schedule()
	step += tr.shift
	epoch := step / epochSteps
	inEpoch := step % epochSteps
	stepsPerBlock := max(1, blockLen/P)
	block := inEpoch / stepsPerBlock
	// Blocks are cut from the newest event back; the oldest events that
	// do not fill a block are left out.
	lo := n - (epochSteps/stepsPerBlock-block)*blockLen
	hi := lo + blockLen
	idx := make([]int, hi-lo)
	for i := range idx {
		idx[i] = lo + i
	}
	rng := rand.New(rand.NewPCG(seedFor(tr.cfg.Seed, 1, uint64(epoch), uint64(block)), 7))
	rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	off := (inEpoch % stepsPerBlock) * P
	evs = make([]event, P)
	for i := range P {
		evs[i] = tr.train[idx[(off+i)%len(idx)]]
	}
	return evs, tr.train[lo].ts - 1 // the graph as of just before the block
}
