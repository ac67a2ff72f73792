package retrieval

import (
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/hir-ads/hir/index"
)

// TestInterleaveNewAds checks where a new-ad share places new ads: every
// prefix of p candidates holds at least floor(p*share) of them, a new ad
// that is a hit on its score keeps its place and counts, none is placed
// twice, and either list running out leaves its slots to the other.
func TestInterleaveNewAds(t *testing.T) {
	hits := func(ids ...uint32) []index.Hit {
		out := make([]index.Hit, len(ids))
		for i, id := range ids {
			out[i] = index.Hit{ID: id}
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		hits, new   []index.Hit
		k           int
		share       float32
		want, isNew []uint32
	}{
		{"every 4th", hits(1, 2, 3, 4, 5, 6, 7, 8), hits(10, 11, 12), 8, 0.25,
			[]uint32{1, 2, 3, 10, 4, 5, 6, 11}, []uint32{10, 11}},
		{"share under 1/k places none", hits(1, 2, 3), hits(10), 3, 0.2, []uint32{1, 2, 3}, nil},
		{"a hit that is new keeps its place and counts", hits(1, 10, 2, 3), hits(10, 11), 4, 0.5,
			[]uint32{1, 10, 2, 11}, []uint32{11}},
		{"new ads placed on their scores fill the share", hits(10, 11, 1, 2), hits(10, 11, 12), 4, 0.5,
			[]uint32{10, 11, 1, 2}, nil},
		{"a new ad moved up is not placed again", hits(1, 2, 3, 11), hits(11, 12), 4, 0.5,
			[]uint32{1, 11, 2, 12}, []uint32{11, 12}},
		{"few new ads: the hits fill their slots", hits(1, 2, 3, 4), hits(10), 4, 0.5,
			[]uint32{1, 10, 2, 3}, []uint32{10}},
		{"few hits: new ads fill the rest", hits(1), hits(10, 11, 12), 4, 0.25,
			[]uint32{1, 10, 11, 12}, []uint32{10, 11, 12}},
		{"no new ads", hits(1, 2), nil, 5, 0.5, []uint32{1, 2}, nil},
	} {
		newSet := map[uint32]bool{}
		for _, h := range tc.new {
			newSet[h.ID] = true
		}
		got, isNew := interleaveNewAds(tc.hits, tc.new, func(id uint32) bool { return newSet[id] }, tc.k, tc.share)
		ids := make([]uint32, len(got))
		for i, h := range got {
			ids[i] = h.ID
		}
		var marked []uint32
		for id, ok := range isNew {
			if ok {
				marked = append(marked, id)
			}
		}
		slices.Sort(marked)
		if !slices.Equal(ids, tc.want) || !slices.Equal(marked, tc.isNew) {
			t.Errorf("%s: got %v (new %v), want %v (new %v)", tc.name, ids, marked, tc.want, tc.isNew)
		}
	}
	if got := newAdSlots(50, 0.1); got != 5 {
		t.Errorf("newAdSlots(50, 0.1) = %d, want 5", got)
	}
}

// TestNewAdQuery checks the query of the new-ad search: restricted to the
// new ads that pass the request's own restriction, asking for the share's
// slots plus the new ads already among the hits (not for the whole answer
// again), and re-ranking whole only up to newAdExhaustiveMax new ads, so
// that a catalogue with thousands of new ads does not score all of them
// on every request.
func TestNewAdQuery(t *testing.T) {
	ads := roaring.New()
	ads.AddRange(0, 10000) // 10,000 new ads
	hits := []index.Hit{{ID: 20000}, {ID: 3}, {ID: 20001}, {ID: 7}}
	for _, tc := range []struct {
		name        string
		q           index.Query
		wantK       int
		wantAllowed uint64
		wantExhaust int
	}{
		{"unrestricted", index.Query{K: 100}, 5 + 2, 10000, newAdExhaustiveMax},
		{"restricted", index.Query{K: 100, Restrict: roaring.BitmapOf(1, 2, 3, 20000)}, 5 + 1, 3, newAdExhaustiveMax},
		{"a smaller bound is kept", index.Query{K: 100, Options: index.SearchOptions{ExhaustiveMax: 100}}, 5 + 2, 10000, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newAdQuery(tc.q, ads.Clone(), 5, hits)
			if q.K != tc.wantK {
				t.Errorf("K = %d, want %d", q.K, tc.wantK)
			}
			if got := q.Restrict.GetCardinality(); got != tc.wantAllowed {
				t.Errorf("restricted to %d ads, want %d", got, tc.wantAllowed)
			}
			if q.Options.ExhaustiveMax != tc.wantExhaust {
				t.Errorf("ExhaustiveMax = %d, want %d", q.Options.ExhaustiveMax, tc.wantExhaust)
			}
		})
	}
}
