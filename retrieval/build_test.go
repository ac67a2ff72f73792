package retrieval

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
)

// TestBuildEmbedWorkers checks that a generation's embeddings do not
// depend on how many model calls run at once nor on their batch size.
func TestBuildEmbedWorkers(t *testing.T) {
	ctx := context.Background()
	store := graph.NewStore(graph.Options{})
	for i := range 40 {
		if _, err := store.UpsertEntity(graph.Entity{Type: graph.NodeAd, ID: fmt.Sprintf("a%d", i), Text: fmt.Sprintf("topic%d item%d", i%4, i)}); err != nil {
			t.Fatal(err)
		}
	}
	for u := range 30 {
		for j := range 6 {
			ev := graph.Event{Src: graph.Ref{Type: graph.NodeUser, ID: fmt.Sprintf("u%d", u)},
				Dst: graph.Ref{Type: graph.NodeAd, ID: fmt.Sprintf("a%d", (u*7+j*3)%40)}, Type: graph.EdgeClick,
				TS: 1_700_000_000_000 + int64(u*100+j)*60_000, Weight: 1}
			if _, err := store.AddEvent(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	var cfg model.TrainConfig
	cfg.Model = model.Config{Dim: 16, Heads: 2, Layers: 1, FFNDim: 32, EmbedDim: 16, HashK: 8, HashDim: 16,
		TextBkts: 512, TextLen: 8, AttrBkts: 64, AttrLen: 4, VectorDim: 4, Prototypes: []int{4, 8}}
	cfg.Sampler.Teacher = graph.ViewOptions{MaxNodes: 8, Hops: 2}
	cfg.Sampler.Student = graph.ViewOptions{MaxNodes: 4, Hops: 1}
	cfg.Pairs, cfg.Steps, cfg.EvalEvery = 8, 2, 2
	dir := t.TempDir()
	if _, err := model.Train(ctx, store, cfg, dir, nil); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	build := func(workers, batch int) *Served {
		s, err := Build(ctx, m, store, store.MaxTS(), BuildOptions{EmbedWorkers: workers, EmbedBatch: batch,
			Quantizer: index.QuantizerOptions{ResidualCodes: 4, Seed: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	one, many := build(1, 5), build(3, 7)
	for _, nt := range []graph.NodeType{graph.NodeUser, graph.NodeAd} {
		a, b := one.Gen.Embeddings[nt], many.Gen.Embeddings[nt]
		if a == nil || len(a.Idx) == 0 || !slices.Equal(a.Idx, b.Idx) || !slices.Equal(a.Data, b.Data) {
			t.Errorf("%s embeddings differ between 1 worker, batch 5 and 3 workers, batch 7", nt)
		}
	}
}
