package eval

import (
	"fmt"
	"math"
	"sort"

	"github.com/hir-ads/hir/graph"
)

// Window is a chronological train/evaluation split of [Data.Interactions]:
// events [0, TrainEnd) are visible to fitting (all at or before AsOf) and
// events [TrainEnd, EvalEnd) form the evaluation window (all after AsOf).
type Window struct {
	Name     string `json:"name"` // "test" or "validation"
	AsOf     int64  `json:"as_of_ms"`
	TrainEnd int    `json:"train_events"`
	EvalEnd  int    `json:"eval_end"`
}

// EvalEvents returns the number of events in the evaluation window.
func (w Window) EvalEvents() int { return w.EvalEnd - w.TrainEnd }

// ChronoWindows splits time-sorted interactions: the latest testFraction of
// the events is the test window; the latest valFraction of the remaining
// (training) events is the validation window, whose own training part ends
// before it. Events sharing the cut's timestamp stay on the training side, so
// every evaluated event is strictly later than its window's AsOf. Tune on the
// validation window; never on the test window.
func ChronoWindows(ins []Interaction, testFraction, valFraction float64) (test, val Window, err error) {
	test, err = cut(ins, len(ins), testFraction)
	if err != nil {
		return Window{}, Window{}, fmt.Errorf("cut test window: %w", err)
	}
	test.Name = "test"
	val, err = cut(ins, test.TrainEnd, valFraction)
	if err != nil {
		return Window{}, Window{}, fmt.Errorf("cut validation window: %w", err)
	}
	val.Name = "validation"
	return test, val, nil
}

// cut puts the latest fraction of ins[:end] in the evaluation window.
func cut(ins []Interaction, end int, fraction float64) (Window, error) {
	if !(fraction > 0 && fraction < 1) {
		return Window{}, fmt.Errorf("%w: fraction %v not in (0,1)", ErrBadConfig, fraction)
	}
	nEval := int(math.Round(float64(end) * fraction))
	if nEval < 1 || nEval >= end {
		return Window{}, fmt.Errorf("%w: %d events cannot be split at %v", ErrNoQueries, end, fraction)
	}
	trainEnd := end - nEval
	asOf := ins[trainEnd-1].TS
	for trainEnd < end && ins[trainEnd].TS <= asOf {
		trainEnd++
	}
	if trainEnd == end {
		return Window{}, fmt.Errorf("%w: every event of the window shares time %d", ErrNoQueries, asOf)
	}
	return Window{AsOf: asOf, TrainEnd: trainEnd, EvalEnd: end}, nil
}

// TrainView is everything a method may fit on: the catalog and the events at
// or before AsOf. Nothing later is reachable from it. The slices are shared
// and must not be modified.
type TrainView struct {
	Catalog      *Catalog
	AsOf         int64
	Interactions []Interaction // time order, all TS <= AsOf
	Structure    []graph.Event // time order, all TS <= AsOf
}

// View returns the training view of window w.
func (d *Data) View(w Window) *TrainView {
	ins := d.Interactions[:w.TrainEnd:w.TrainEnd]
	ns := sort.Search(len(d.Structure), func(i int) bool { return d.Structure[i].TS > w.AsOf })
	return &TrainView{Catalog: d.Catalog, AsOf: w.AsOf, Interactions: ins, Structure: d.Structure[:ns:ns]}
}

// histories groups interactions by user, keeping time order.
func histories(ins []Interaction, nUsers int) [][]Interaction {
	h := make([][]Interaction, nUsers)
	for _, in := range ins {
		h[in.User] = append(h[in.User], in)
	}
	return h
}
