package eval

import (
	"fmt"
	"math"
	"slices"
)

// DefaultKs are the cut-offs reported for every ranking metric.
var defaultKs = [...]int{10, 20, 50, 100}

// DefaultKs returns the cut-offs reported by default: 10, 20, 50 and 100.
func DefaultKs() []int { return slices.Clone(defaultKs[:]) }

// Recall returns |top-k ∩ relevant| / |relevant|: the share of the relevant
// items found in the first k entries of ranked. It is 0 when relevant is empty.
// ranked must not repeat an item.
func Recall(ranked []int32, relevant map[int32]bool, k int) float64 {
	if len(relevant) == 0 {
		return 0
	}
	return float64(hits(ranked, relevant, k)) / float64(len(relevant))
}

// HitRate returns 1 when at least one of the first k entries of ranked is
// relevant, else 0.
func HitRate(ranked []int32, relevant map[int32]bool, k int) float64 {
	if hits(ranked, relevant, k) > 0 {
		return 1
	}
	return 0
}

// NDCG returns the normalised discounted cumulative gain of the first k
// entries of ranked with binary relevance: DCG = Σ rel_i / log2(i+2) over
// positions i = 0..k-1, divided by the DCG of an ideal ranking that puts
// min(k, |relevant|) relevant items first. It is 0 when relevant is empty.
func NDCG(ranked []int32, relevant map[int32]bool, k int) float64 {
	if len(relevant) == 0 || k <= 0 {
		return 0
	}
	var dcg float64
	for i, it := range ranked[:min(k, len(ranked))] {
		if relevant[it] {
			dcg += 1 / math.Log2(float64(i)+2)
		}
	}
	var idcg float64
	for i := range min(k, len(relevant)) {
		idcg += 1 / math.Log2(float64(i)+2)
	}
	return dcg / idcg
}

// ReciprocalRank returns 1/(r+1) for the position r of the first relevant item
// in ranked, or 0 when ranked holds none. Averaged over queries it is the MRR
// (truncated at len(ranked)).
func ReciprocalRank(ranked []int32, relevant map[int32]bool) float64 {
	for i, it := range ranked {
		if relevant[it] {
			return 1 / float64(i+1)
		}
	}
	return 0
}

// Overlap returns |approx[:k] ∩ exact[:k]| / min(k, len(exact)): the recall of
// an approximate top-k against an exact one. It is 1 when exact is empty.
func Overlap(approx, exact []int32, k int) float64 {
	exact = exact[:min(k, len(exact))]
	if len(exact) == 0 {
		return 1
	}
	in := make(map[int32]bool, len(exact))
	for _, it := range exact {
		in[it] = true
	}
	return float64(hits(approx, in, k)) / float64(len(exact))
}

func hits(ranked []int32, relevant map[int32]bool, k int) int {
	n := 0
	for _, it := range ranked[:max(0, min(k, len(ranked)))] {
		if relevant[it] {
			n++
		}
	}
	return n
}

// Metric names used as keys of [Result.Metrics].
const (
	MetricRecall  = "recall"
	MetricNDCG    = "ndcg"
	MetricHitRate = "hit"
	MetricMRR     = "mrr"
	// MetricOverlap is the recall of a method's top-K against the top-K of
	// the exact method it approximates (see [Approximator]).
	MetricOverlap = "recall_vs_exact"
)

// MetricKey returns the key of a metric at a cut-off, e.g. "recall@20".
func MetricKey(name string, k int) string { return fmt.Sprintf("%s@%d", name, k) }

// accumulator averages per-query metric values.
type accumulator struct {
	sums  map[string]float64
	count int
}

func (a *accumulator) add(vals map[string]float64) {
	if a.sums == nil {
		a.sums = make(map[string]float64, len(vals))
	}
	for k, v := range vals {
		a.sums[k] += v
	}
	a.count++
}

func (a *accumulator) means() map[string]float64 {
	out := make(map[string]float64, len(a.sums))
	for k, v := range a.sums {
		out[k] = v / float64(max(a.count, 1))
	}
	return out
}

// rankingMetrics computes every metric of one query for the given cut-offs.
// With full set, recall and NDCG are included (chrono protocol); replay has
// one relevant item per query and reports hit rate and MRR only.
func rankingMetrics(ranked []int32, relevant map[int32]bool, ks []int, full bool, dst map[string]float64) {
	for _, k := range ks {
		dst[MetricKey(MetricHitRate, k)] = HitRate(ranked, relevant, k)
		if full {
			dst[MetricKey(MetricRecall, k)] = Recall(ranked, relevant, k)
			dst[MetricKey(MetricNDCG, k)] = NDCG(ranked, relevant, k)
		}
	}
	dst[MetricMRR] = ReciprocalRank(ranked, relevant)
}
