package index_test

import (
	"context"
	"fmt"

	"github.com/hir-ads/hir/index"
)

func Example_search() {
	ctx := context.Background()
	// Two prototype levels in 2-d: 2 coarse, 4 fine directions.
	q, err := index.NewQuantizer(index.QuantizerOptions{
		Levels: [][][]float32{
			{{1, 0}, {0, 1}},
			{{1, 0}, {0.8, 0.6}, {0.6, 0.8}, {0, 1}},
		},
		ResidualLevels: -1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ix, _ := index.New(index.Options{Quantizer: q})
	_ = ix.Upsert(ctx,
		index.Doc{ID: 1, Embedding: []float32{1, 0}, Attrs: map[string][]string{index.AttrStatus: {"active"}}},
		index.Doc{ID: 2, Embedding: []float32{0.8, 0.6}, Attrs: map[string][]string{index.AttrStatus: {"paused"}}},
		index.Doc{ID: 3, Embedding: []float32{0, 1}, Attrs: map[string][]string{index.AttrStatus: {"active"}}},
	)
	f, err := index.ParseFilter([]byte(`{"not":{"attr":"status","eq":"paused"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _ := ix.Snapshot().Search(ctx, index.Query{Vector: []float32{0.8, 0.6}, K: 2, Filter: f})
	for _, h := range res.Hits {
		fmt.Printf("doc %d score %.2f\n", h.ID, h.Score)
	}
	_, err = index.ParseFilter([]byte(`{"and":[]}`))
	fmt.Println(err)
	// Output:
	// doc 1 score 0.80
	// doc 3 score 0.60
	// bad filter: and needs at least one operand
}
