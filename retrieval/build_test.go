package retrieval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
		a, b := one.gen.Embeddings[nt], many.gen.Embeddings[nt]
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
	store, dir, _ := trainedTiny(t)
	opts := BuildOptions{Quantizer: index.QuantizerOptions{ResidualCodes: 4, Seed: 1}}
	st, err := os.Stat(filepath.Join(dir, model.FileMetrics))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(dir))
	rel := filepath.Base(dir)

	s, err := OpenVersion(ctx, store, rel, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.gen.Dir != dir || !s.gen.TrainedAt.Equal(st.ModTime()) || s.gen.Metrics["steps"] != 2 || s.gen.Metrics["train_events"] == 0 {
		t.Errorf("opened: dir %q (want %q), trained at %v (want %v), metrics %v", s.gen.Dir, dir, s.gen.TrainedAt, st.ModTime(), s.gen.Metrics)
	}

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err = OpenVersion(ctx, store, dir, &Announced{TrainedAt: at, Metrics: map[string]float64{"val_window_auc": 0.7, "steps": 99}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !s.gen.TrainedAt.Equal(at) || s.gen.Metrics["val_window_auc"] != 0.7 || s.gen.Metrics["steps"] != 2 {
		t.Errorf("announced: trained at %v, metrics %v; want the announcement's time and val_window_auc, the checkpoint's steps", s.gen.TrainedAt, s.gen.Metrics)
	}

	if err := os.WriteFile(filepath.Join(dir, model.FileConfig), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenVersion(ctx, store, dir, nil, opts); !errors.Is(err, ErrBadVersion) || !errors.Is(err, model.ErrCorrupt) {
		t.Errorf("a damaged model: err %v, want ErrBadVersion and model.ErrCorrupt", err)
	}
}

// TestCatalogueFile checks that a load reads the token catalogue saved
// with the generation's files instead of building it, the same catalogue,
// and builds it again when the ads' text changed since the files were
// written or the file is damaged.
func TestCatalogueFile(t *testing.T) {
	ctx := context.Background()
	store, dir, m := trainedTiny(t)
	opts := BuildOptions{Quantizer: index.QuantizerOptions{ResidualCodes: 4, Seed: 1}}
	built, err := Build(ctx, m, store, store.MaxTS(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := Save(built, store, dir); err != nil {
		t.Fatal(err)
	}
	load := func() (*Served, LoadStats) {
		t.Helper()
		s, st, err := Load(ctx, m, store, dir, store.MaxTS(), opts)
		if err != nil {
			t.Fatal(err)
		}
		return s, st
	}
	s, st := load()
	if !st.CatalogueLoaded {
		t.Fatal("the catalogue was built, want it read from its file")
	}
	if diff := cmp.Diff(built.gen.Catalogue.Infos(), s.gen.Catalogue.Infos()); diff != "" {
		t.Errorf("catalogue read differs from the one built (-built +read):\n%s", diff)
	}
	// An ad retitled since: the labels must be read from the text anew.
	if _, err := store.UpsertEntity(graph.Entity{Type: graph.NodeAd, ID: "a3", Text: "topic3 renamed"}); err != nil {
		t.Fatal(err)
	}
	if _, st := load(); st.CatalogueLoaded || st.Changed() {
		t.Errorf("after an ad's text changed: catalogue loaded %v, load changed %v; want the catalogue built, the load unchanged", st.CatalogueLoaded, st.Changed())
	}
	if err := Save(built, store, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileCatalogue), []byte(`{"tokens":[`), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, st := load(); st.CatalogueLoaded || s.gen.Catalogue == nil {
		t.Errorf("damaged catalogue file: loaded %v, catalogue %v; want one built", st.CatalogueLoaded, s.gen.Catalogue != nil)
	}
	// Files without a usable catalogue (an older build's): Open writes the
	// catalogue it built, and the next load reads it.
	popts := opts
	popts.PersistDir = dir
	if _, err := Open(ctx, m, store, dir, store.MaxTS(), popts); err != nil {
		t.Fatal(err)
	}
	if _, st := load(); !st.CatalogueLoaded {
		t.Error("after Open: the catalogue was built again, want it read from the file Open wrote")
	}
}

// TestDefaultWholeCodes checks the whole-vector level's size by catalogue
// size: none below 4,096 ads, about the square root from there.
func TestDefaultWholeCodes(t *testing.T) {
	for _, tc := range []struct{ ads, want int }{
		{0, -1}, {4095, -1}, {4096, 64}, {20_000, 141}, {100_000, 316}, {1_000_000, 1000},
	} {
		if got := DefaultWholeCodes(tc.ads); got != tc.want {
			t.Errorf("DefaultWholeCodes(%d) = %d, want %d", tc.ads, got, tc.want)
		}
	}
}
