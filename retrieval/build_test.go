package retrieval

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
)

// TestBuildEmbedWorkers checks that a generation's embeddings do not
// depend on how many model calls run at once nor on their batch size.
func TestBuildEmbedWorkers(t *testing.T) {
	ctx := context.Background()
	store, _, m := trainedTiny(t)
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

// trainedTiny trains a tiny model for 2 steps on a world of 40 ads and 30
// users into a temporary directory, and returns the version's checkpoint
// directory.
func trainedTiny(t *testing.T) (*graph.Store, string, *model.Model) {
	t.Helper()
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
	ck, err := model.Train(context.Background(), store, cfg, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(ck.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return store, ck.Dir, m
}

// TestOpenVersion checks that a version opened for serving is described by
// its checkpoint (absolute directory, training metrics, trained-at time of
// its metrics file), and that what a registry announced fills in the rest
// without overriding the checkpoint.
func TestOpenVersion(t *testing.T) {
	ctx := context.Background()
	store, dir, m := trainedTiny(t)
	opts := BuildOptions{Quantizer: index.QuantizerOptions{ResidualCodes: 4, Seed: 1}}
	st, err := os.Stat(filepath.Join(dir, model.FileMetrics))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(dir))
	rel := filepath.Base(dir)

	s, err := OpenVersion(ctx, m, store, rel, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Gen.Dir != dir || !s.Gen.TrainedAt.Equal(st.ModTime()) || s.Gen.Metrics["steps"] != 2 || s.Gen.Metrics["train_events"] == 0 {
		t.Errorf("opened: dir %q (want %q), trained at %v (want %v), metrics %v", s.Gen.Dir, dir, s.Gen.TrainedAt, st.ModTime(), s.Gen.Metrics)
	}

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err = OpenVersion(ctx, m, store, dir, &Announced{TrainedAt: at, Metrics: map[string]float64{"val_window_auc": 0.7, "steps": 99}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Gen.TrainedAt.Equal(at) || s.Gen.Metrics["val_window_auc"] != 0.7 || s.Gen.Metrics["steps"] != 2 {
		t.Errorf("announced: trained at %v, metrics %v; want the announcement's time and val_window_auc, the checkpoint's steps", s.Gen.TrainedAt, s.Gen.Metrics)
	}
}
