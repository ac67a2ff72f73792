package eval

import (
	"math"
	"testing"
)

func set(items ...int32) map[int32]bool {
	m := make(map[int32]bool, len(items))
	for _, it := range items {
		m[it] = true
	}
	return m
}

func TestRankingMetrics(t *testing.T) {
	l2 := func(i int) float64 { return 1 / math.Log2(float64(i)+2) } // discount at 0-based position i
	tests := []struct {
		name       string
		ranked     []int32
		relevant   map[int32]bool
		k          int
		recall     float64
		ndcg       float64
		hit        float64
		reciprocal float64
	}{
		{"empty relevant", []int32{1, 2, 3}, set(), 2, 0, 0, 0, 0},
		{"empty ranked", nil, set(1), 2, 0, 0, 0, 0},
		{"first of one", []int32{1, 2, 3}, set(1), 2, 1, 1, 1, 1},
		{"second of one", []int32{2, 1, 3}, set(1), 2, 1, l2(1), 1, 0.5},
		{"outside k", []int32{2, 3, 1}, set(1), 2, 0, 0, 0, 1.0 / 3},
		{"two of three", []int32{5, 1, 6, 2}, set(1, 2, 3), 4, 2.0 / 3, (l2(1) + l2(3)) / (l2(0) + l2(1) + l2(2)), 1, 0.5},
		// |relevant| > k: the ideal DCG has only k terms, so a perfect list scores 1.
		{"all hits, more relevant than k", []int32{1, 2}, set(1, 2, 3, 4), 2, 0.5, 1, 1, 1},
		{"k beyond list", []int32{9, 1}, set(1), 10, 1, l2(1), 1, 0.5},
		{"k zero", []int32{1}, set(1), 0, 0, 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check := func(name string, got, want float64) {
				t.Helper()
				if math.Abs(got-want) > 1e-12 {
					t.Errorf("%s(%v, %v, %d) = %v, want %v", name, tc.ranked, tc.relevant, tc.k, got, want)
				}
			}
			check("Recall", Recall(tc.ranked, tc.relevant, tc.k), tc.recall)
			check("NDCG", NDCG(tc.ranked, tc.relevant, tc.k), tc.ndcg)
			check("HitRate", HitRate(tc.ranked, tc.relevant, tc.k), tc.hit)
			check("ReciprocalRank", ReciprocalRank(tc.ranked, tc.relevant), tc.reciprocal)
		})
	}
}

func TestOverlap(t *testing.T) {
	tests := []struct {
		name          string
		approx, exact []int32
		k             int
		want          float64
	}{
		{"identical", []int32{1, 2, 3}, []int32{1, 2, 3}, 3, 1},
		{"reordered", []int32{3, 2, 1}, []int32{1, 2, 3}, 3, 1},
		{"half", []int32{1, 9}, []int32{1, 2}, 2, 0.5},
		{"disjoint", []int32{7, 8}, []int32{1, 2}, 2, 0},
		{"exact shorter than k", []int32{1, 5, 6}, []int32{1}, 3, 1},
		{"approx shorter", []int32{1}, []int32{1, 2}, 2, 0.5},
		{"empty exact", []int32{1}, nil, 2, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Overlap(tc.approx, tc.exact, tc.k); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Overlap(%v, %v, %d) = %v, want %v", tc.approx, tc.exact, tc.k, got, tc.want)
			}
		})
	}
}

func TestTopKScores(t *testing.T) {
	inf := float32(math.Inf(-1))
	tests := []struct {
		name    string
		scores  []float32
		exclude []bool
		k       int
		want    []int32
	}{
		{"order", []float32{0.1, 0.9, 0.5}, nil, 3, []int32{1, 2, 0}},
		{"truncate", []float32{0.1, 0.9, 0.5}, nil, 2, []int32{1, 2}},
		{"ties to lower id", []float32{1, 1, 2, 1}, nil, 3, []int32{2, 0, 1}},
		{"exclude", []float32{0.1, 0.9, 0.5}, []bool{false, true, false}, 3, []int32{2, 0}},
		{"skip -inf and NaN", []float32{inf, 0.2, float32(math.NaN()), -5}, nil, 4, []int32{1, 3}},
		{"k zero", []float32{1}, nil, 0, []int32{}},
		{"no items", nil, nil, 5, []int32{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := &Query{K: tc.k, exclude: tc.exclude}
			got := topKScores(tc.scores, q, make([]int32, 7))
			if len(got) != len(tc.want) {
				t.Fatalf("topKScores(%v, k=%d) = %v, want %v", tc.scores, tc.k, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("topKScores(%v, k=%d) = %v, want %v", tc.scores, tc.k, got, tc.want)
				}
			}
		})
	}
}

func TestAgreement(t *testing.T) {
	tests := []struct {
		name        string
		truth, pred []int
		nmi, purity float64
	}{
		{"identical up to renaming", []int{0, 0, 1, 1, 2}, []int{7, 7, 3, 3, 9}, 1, 1},
		// Every cluster holds one of each label: MI = 0.
		{"independent", []int{0, 1, 0, 1}, []int{0, 0, 1, 1}, 0, 0.5},
		// One cluster, two equal labels: H(pred) = 0, MI = 0.
		{"one cluster", []int{0, 0, 1, 1}, []int{5, 5, 5, 5}, 0, 0.5},
		{"both single block", []int{3, 3}, []int{1, 1}, 1, 1},
		// Finer clustering than truth: purity 1, MI = H(truth) = ln 2,
		// H(pred) = ln 4, NMI = 2 ln2 / (ln2 + ln4) = 2/3.
		{"refinement", []int{0, 0, 1, 1}, []int{0, 1, 2, 3}, 2.0 / 3, 1},
		{"empty", nil, nil, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nmi, pur, err := Agreement(tc.truth, tc.pred)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(nmi-tc.nmi) > 1e-12 || math.Abs(pur-tc.purity) > 1e-12 {
				t.Errorf("Agreement(%v, %v) = %v, %v, want %v, %v", tc.truth, tc.pred, nmi, pur, tc.nmi, tc.purity)
			}
		})
	}
	if _, _, err := Agreement([]int{1}, nil); err == nil {
		t.Error("Agreement with mismatched lengths: got nil error")
	}
}
