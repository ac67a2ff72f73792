package graph

import (
	"errors"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

func TestSplitByTime(t *testing.T) {
	tests := []struct {
		name    string
		lo, hi  int64
		fr      []float64
		want    []Window
		wantErr error
	}{
		{"80/10/10", 0, 99, []float64{0.8, 0.1, 0.1}, []Window{{0, 80}, {80, 90}, {90, 100}}, nil},
		{"halves", 1000, 1999, []float64{0.5, 0.5}, []Window{{1000, 1500}, {1500, 2000}}, nil},
		{"leading part", 0, 99, []float64{0.3}, []Window{{0, 30}}, nil},
		{"single instant", 5, 5, []float64{0.5, 0.5}, []Window{{5, 6}, {6, 6}}, nil},
		{"sum over one", 0, 99, []float64{0.8, 0.3}, nil, ErrBadSplit},
		{"zero fraction", 0, 99, []float64{0.5, 0}, nil, ErrBadSplit},
		{"no fractions", 0, 99, nil, nil, ErrBadSplit},
		{"reversed range", 10, 9, []float64{1}, nil, ErrBadSplit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SplitByTime(tc.lo, tc.hi, tc.fr...)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("SplitByTime error = %v, want %v", err, tc.wantErr)
			}
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SplitByTime(%d, %d, %v) (-want +got):\n%s", tc.lo, tc.hi, tc.fr, diff)
			}
			for ts := tc.lo; err == nil && len(tc.fr) > 1 && ts <= tc.hi; ts++ {
				n := 0
				for _, w := range got {
					if w.Contains(ts) {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("ts %d is in %d windows, want 1", ts, n)
				}
			}
		})
	}
}

type item struct {
	ts int64
	id int
}

func TestShuffleInBlocks(t *testing.T) {
	const block = 100
	var items []item
	for i := range 1000 {
		items = append(items, item{ts: int64((i * 7919) % 1000), id: i})
	}
	shuffle := func(in []item, seed uint64) []item {
		out := slices.Clone(in)
		ShuffleInBlocks(out, func(it item) int64 { return it.ts }, block, seed)
		return out
	}
	a := shuffle(items, 1)
	// Same multiset in another order, same seed: same result.
	rev := slices.Clone(items)
	slices.Reverse(rev)
	if diff := gocmp.Diff(a, shuffle(rev, 1), gocmp.AllowUnexported(item{})); diff != "" {
		t.Errorf("ShuffleInBlocks depends on input order (-a +b):\n%s", diff)
	}
	// Blocks are in time order and every item is kept.
	for i := 1; i < len(a); i++ {
		if a[i].ts/block < a[i-1].ts/block {
			t.Fatalf("block order broken at %d: %d after %d", i, a[i].ts, a[i-1].ts)
		}
	}
	ids := make([]int, len(a))
	for i, it := range a {
		ids[i] = it.id
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != i {
			t.Fatalf("items lost or duplicated: sorted ids[%d] = %d", i, id)
		}
	}
	// Within a block the order is shuffled (not by ts), and depends on seed.
	sortedWithin := true
	for i := 1; i < block; i++ {
		if a[i].ts < a[i-1].ts {
			sortedWithin = false
		}
	}
	if sortedWithin {
		t.Errorf("first block still sorted by ts after shuffle")
	}
	if gocmp.Equal(a, shuffle(items, 2), gocmp.AllowUnexported(item{})) {
		t.Errorf("seeds 1 and 2 give the same order")
	}
}
