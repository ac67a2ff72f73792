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

// TestTextIndexReuse checks that a keyword index closed cleanly is reopened,
// not rebuilt: only the ads whose text changed since are re-indexed (a
// changed title, an ad the store no longer holds), and a doc the index
// holds beyond what the record covers stays, which a rebuild would drop.
// Without the record (what kill -9 leaves) or with a damaged one, the
// index is rebuilt from the store.
func TestTextIndexReuse(t *testing.T) {
	ctx := context.Background()
	newStore := func(ents ...graph.Entity) *graph.Store {
		store := graph.NewStore(graph.Options{})
		for _, ent := range ents {
			if _, err := store.UpsertEntity(ent); err != nil {
				t.Fatal(err)
			}
		}
		return store
	}
	ad := func(id, text string) graph.Entity { return graph.Entity{Type: graph.NodeAd, ID: id, Text: text} }
	opts := func(dir string) Options {
		return Options{Rank: rank.DefaultOptions(), Weights: rank.DefaultWeights(), TextIndexDir: dir}
	}
	search := func(e *Engine, q string) []uint32 {
		t.Helper()
		hits, err := e.text.Search(ctx, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		return hits.ToArray()
	}
	dir := t.TempDir() + "/text"
	record := dir + textHashesSuffix
	e, err := NewEngine(newStore(ad("a1", "red running shoes"), ad("a2", "espresso machine"), ad("a3", "trail shoes")), opts(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("no record after Close: %v", err)
	}
	// A doc beyond the record's ads, put in behind the engine's back.
	raw, err := index.NewTextIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Index(ctx, map[uint32]index.TextDoc{99: {Title: "old boots"}}); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	// The store now: a2 retitled, a3 gone.
	now := newStore(ad("a1", "red running shoes"), ad("a2", "green tea"))
	e, err = NewEngine(now, opts(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(record); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record still there while the index is open: %v", err)
	}
	for q, want := range map[string][]uint32{"shoes": {0}, "tea": {1}, "espresso": nil, "trail": nil, "boots": {99}} {
		if got := search(e, q); !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
			t.Errorf("reopened: search %q = %v, want %v", q, got, want)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		damage func() error
	}{
		{"no record", func() error { return os.Remove(record) }},
		{"damaged record", func() error {
			b, err := os.ReadFile(record)
			if err != nil {
				return err
			}
			b[len(b)-5] ^= 1
			return os.WriteFile(record, b, 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.damage(); err != nil {
				t.Fatal(err)
			}
			e, err := NewEngine(now, opts(dir))
			if err != nil {
				t.Fatal(err)
			}
			if got := search(e, "boots"); len(got) != 0 {
				t.Errorf("search \"boots\" = %v after a rebuild, want nothing", got)
			}
			if got := search(e, "tea"); !slices.Equal(got, []uint32{1}) {
				t.Errorf("search \"tea\" = %v, want [1]", got)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestTextHashesCodec(t *testing.T) {
	for _, hashes := range [][]uint64{nil, {0}, {1, 0, 0xffffffffffffffff}} {
		got, err := decodeTextHashes(encodeTextHashes(hashes))
		if err != nil || !slices.Equal(got, hashes) && len(got)+len(hashes) > 0 {
			t.Errorf("round trip of %v = %v, %v", hashes, got, err)
		}
	}
	b := encodeTextHashes([]uint64{1, 2, 3})
	for i := range b {
		bad := slices.Clone(b)
		bad[i] ^= 0x10
		if _, err := decodeTextHashes(bad); !errors.Is(err, errBadTextHashes) {
			t.Errorf("byte %d flipped: error %v, want errBadTextHashes", i, err)
		}
	}
	for n := range len(b) {
		if _, err := decodeTextHashes(b[:n]); !errors.Is(err, errBadTextHashes) {
			t.Errorf("truncated to %d bytes: error %v, want errBadTextHashes", n, err)
		}
	}
}

func FuzzDecodeTextHashes(f *testing.F) {
	f.Add(encodeTextHashes([]uint64{1, 2, 3}))
	f.Add([]byte("HIRTXH1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hashes, err := decodeTextHashes(b)
		if err != nil {
			return
		}
		if !slices.Equal(encodeTextHashes(hashes), b) {
			t.Errorf("decoded %v does not encode back to the input", hashes)
		}
	})
}
