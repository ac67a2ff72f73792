package graph

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// ErrBadSplit is returned by SplitByTime for invalid fractions or ranges.
var ErrBadSplit = errors.New("bad time split")

// Window is the half-open time range [From, To) in unix ms.
type Window struct {
	From, To int64
}

// Contains reports whether ts is in [From, To).
func (w Window) Contains(ts int64) bool { return ts >= w.From && ts < w.To }

// Duration returns To - From in ms.
func (w Window) Duration() int64 { return w.To - w.From }

// String returns "[from,to)".
func (w Window) String() string { return fmt.Sprintf("[%d,%d)", w.From, w.To) }

// SplitByTime splits the closed range [minTS, maxTS] into consecutive windows
// whose durations are proportional to fractions (each > 0, summing to at most
// 1; the windows cover the leading sum(fractions) of the range). When the
// fractions sum to 1 the last window ends at maxTS+1, so every ts of the range
// falls in exactly one window. For example SplitByTime(lo, hi, 0.8, 0.1, 0.1)
// gives train, validation and test windows.
func SplitByTime(minTS, maxTS int64, fractions ...float64) ([]Window, error) {
	if maxTS < minTS {
		return nil, fmt.Errorf("split by time: %w: maxTS %d < minTS %d", ErrBadSplit, maxTS, minTS)
	}
	if len(fractions) == 0 {
		return nil, fmt.Errorf("split by time: %w: no fractions", ErrBadSplit)
	}
	sum := 0.0
	for _, f := range fractions {
		if !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("split by time: %w: fraction %v must be > 0", ErrBadSplit, f)
		}
		sum += f
	}
	if sum > 1+1e-9 {
		return nil, fmt.Errorf("split by time: %w: fractions sum to %v > 1", ErrBadSplit, sum)
	}
	span := float64(maxTS - minTS + 1)
	ws := make([]Window, len(fractions))
	from, acc := minTS, 0.0
	for i, f := range fractions {
		acc += f
		to := minTS + int64(math.Round(span*acc))
		if i == len(fractions)-1 && sum > 1-1e-9 {
			to = maxTS + 1
		}
		to = max(to, from)
		ws[i] = Window{From: from, To: to}
		from = to
	}
	return ws, nil
}

// ShuffleInBlocks reorders items by fixed time block (floor(ts/blockMS),
// blocks in time order) and shuffles the items within each block, so that
// batches cut from the result never mix far-apart times. The result depends
// only on the items' order-independent content, ts and seed: the same
// multiset of items in any input order with distinct ts yields the same
// output. blockMS <= 0 puts all items in one block.
func ShuffleInBlocks[T any](items []T, ts func(T) int64, blockMS int64, seed uint64) {
	block := func(t int64) int64 {
		if blockMS <= 0 {
			return 0
		}
		b := t / blockMS
		if t%blockMS < 0 {
			b--
		}
		return b
	}
	// Sort by (block, ts) so the shuffle input is canonical.
	slices.SortStableFunc(items, func(a, b T) int {
		ta, tb := ts(a), ts(b)
		if c := cmp.Compare(block(ta), block(tb)); c != 0 {
			return c
		}
		return cmp.Compare(ta, tb)
	})
	for lo := 0; lo < len(items); {
		b := block(ts(items[lo]))
		hi := lo + 1
		for hi < len(items) && block(ts(items[hi])) == b {
			hi++
		}
		h := splitmix(splitmix(seed) ^ uint64(b))
		rng := rand.New(rand.NewPCG(h, splitmix(h)))
		part := items[lo:hi]
		rng.Shuffle(len(part), func(i, j int) { part[i], part[j] = part[j], part[i] })
		lo = hi
	}
}
