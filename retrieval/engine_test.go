package retrieval

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/rank"
)

// TestTextIndexDir checks the keyword index kept on disk: NewEngine builds
// it from the stored ads' text into the directory, and a directory that
// holds an earlier index (here with an ad the store does not have) is
// rebuilt, not trusted.
func TestTextIndexDir(t *testing.T) {
	ctx := context.Background()
	store := graph.NewStore(graph.Options{})
	for _, ent := range []graph.Entity{
		{Type: graph.NodeAd, ID: "a1", Text: "red running shoes"},
		{Type: graph.NodeAd, ID: "a2", Text: "espresso machine"},
		{Type: graph.NodeAd, ID: "a3", Text: "trail shoes"},
	} {
		if _, err := store.UpsertEntity(ent); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir() + "/text"
	stale, err := index.NewTextIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Index(ctx, map[uint32]index.TextDoc{99: {Title: "old shoes"}}); err != nil {
		t.Fatal(err)
	}
	if err := stale.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dir  string
	}{{"in memory", ""}, {"on disk", dir}} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEngine(store, Options{Rank: rank.DefaultOptions(), Weights: rank.DefaultWeights(), TextIndexDir: tc.dir})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := e.Close(); err != nil {
					t.Error(err)
				}
			}()
			for q, want := range map[string][]uint32{"shoes": {0, 2}, "espresso": {1}, "old": nil} {
				hits, err := e.text.Search(ctx, q, 10)
				if err != nil {
					t.Fatal(err)
				}
				if got := hits.ToArray(); !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
					t.Errorf("search %q = %v, want %v", q, got, want)
				}
			}
			if tc.dir != "" {
				if ents, err := os.ReadDir(tc.dir); err != nil || len(ents) == 0 {
					t.Errorf("text index directory: %v entries, error %v", len(ents), err)
				}
			}
		})
	}
	// A directory that holds other files is not removed.
	other := t.TempDir()
	keep := filepath.Join(other, "precious.txt")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEngine(store, Options{Rank: rank.DefaultOptions(), Weights: rank.DefaultWeights(), TextIndexDir: other}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("NewEngine over a directory of other files: error %v, want ErrBadOptions", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the other file is gone: %v", err)
	}
}
