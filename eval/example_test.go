package eval_test

import (
	"fmt"

	"github.com/hir-ads/hir/eval"
)

// Example_metrics scores one ranked list against its relevant items. NDCG@4:
// (1/log2(3) + 1/log2(5)) / (1 + 1/log2(3) + 1/log2(4)) = 1.0616/2.1309.
func Example_metrics() {
	ranked := []int32{7, 3, 9, 1}
	relevant := map[int32]bool{3: true, 1: true, 5: true}
	fmt.Printf("recall@2=%.3f ndcg@4=%.3f hit@1=%.0f rr=%.2f\n",
		eval.Recall(ranked, relevant, 2), eval.NDCG(ranked, relevant, 4),
		eval.HitRate(ranked, relevant, 1), eval.ReciprocalRank(ranked, relevant))
	// Output: recall@2=0.333 ndcg@4=0.498 hit@1=0 rr=0.50
}
