package serving

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/retrieval"
)

// persistEnv is a server over a small ingested world and a tiny model
// trained on it, checkpoint in ckpt.
type persistEnv struct {
	*testEnv
	m    *model.Model
	ckpt string
	opts retrieval.BuildOptions
}

func newPersistEnv(t *testing.T) *persistEnv {
	t.Helper()
	env := newEnv(t, Options{})
	env.ingest(newWorld(24, 40, 12, 5))
	ck, err := model.Train(context.Background(), env.srv.Store(), tinyTrain(), env.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(ck.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return &persistEnv{testEnv: env, m: m, ckpt: ck.Dir,
		opts: retrieval.BuildOptions{Quantizer: tinyQuantizer(), Logger: env.srv.logger}}
}

// candidates publishes snap and retrieves k candidates for each user
// through the HTTP API.
func (e *persistEnv) candidates(t *testing.T, snap *retrieval.Served, users []string, k int) map[string][]api.Candidate {
	t.Helper()
	if err := e.srv.Publish(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	out := map[string][]api.Candidate{}
	for _, u := range users {
		res, err := e.client.RetrieveCandidatesWithResponse(context.Background(),
			api.RetrieveRequest{User: &api.Ref{Type: api.User, Id: u}, K: ptr(k)})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("retrieve %s: %v %d %s", u, err, res.StatusCode(), res.Body)
		}
		out[u] = res.JSON200.Candidates
	}
	return out
}

func numNodes(store *graph.Store) int {
	n := 0
	for t := graph.NodeType(1); int(t) < graph.NumNodeTypes; t++ {
		n += store.NumNodes(t)
	}
	return n
}

func TestPersistedSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	env := newPersistEnv(t)
	ctx := context.Background()
	store := env.srv.Store()
	asOf := store.MaxTS()
	users := []string{"u0", "u1", "u2", "u5", "u7"}

	opts := env.opts
	opts.PersistDir = env.ckpt
	fresh, err := retrieval.Build(ctx, env.m, store, asOf, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{retrieval.FileEmbeddings, retrieval.FileIndex} {
		if _, err := os.Stat(filepath.Join(env.ckpt, f)); err != nil {
			t.Fatalf("BuildSnapshot with PersistDir did not write %s: %v", f, err)
		}
	}
	want := env.candidates(t, fresh, users, 10)

	t.Run("load gives the fresh build's results", func(t *testing.T) {
		loaded, st, err := retrieval.Load(ctx, env.m, store, env.ckpt, asOf, env.opts)
		if err != nil {
			t.Fatal(err)
		}
		if st.Loaded != numNodes(store) || st.Embedded != 0 || st.Upserted != 0 || st.IndexRebuilt {
			t.Errorf("stats = %+v, want all %d nodes loaded and nothing recomputed", st, numNodes(store))
		}
		for nt := range graph.NodeType(graph.NumNodeTypes) {
			if diff := cmp.Diff(fresh.Embeddings(nt), loaded.Embeddings(nt), cmpopts.IgnoreUnexported(retrieval.Matrix{})); diff != "" {
				t.Errorf("%v embeddings differ (-fresh +loaded):\n%s", nt, diff)
			}
		}
		if loaded.IndexSize() != fresh.IndexSize() || loaded.AsOf() != fresh.AsOf() {
			t.Errorf("loaded index size %d as of %d, fresh %d as of %d", loaded.IndexSize(), loaded.AsOf(), fresh.IndexSize(), fresh.AsOf())
		}
		if diff := cmp.Diff(fresh.Catalogue().Tokens(), loaded.Catalogue().Tokens()); diff != "" {
			t.Errorf("catalogue tokens differ:\n%s", diff)
		}
		got := env.candidates(t, loaded, users, 10)
		for _, u := range users {
			if len(want[u]) == 0 {
				t.Fatalf("no candidates for %s: the comparison would be empty", u)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("retrieval differs (-fresh +loaded):\n%s", diff)
		}
	})

	t.Run("nodes added after the save are embedded", func(t *testing.T) {
		text := "espresso grinder latte"
		res, err := env.client.PostEntitiesWithResponse(ctx, api.EntitiesRequest{Entities: []api.Entity{
			{Type: api.Ad, Id: "ad-new", Text: &text, Attrs: &map[string]string{"status": "active"}},
			{Type: api.Ad, Id: "ad0", Text: &text, Attrs: &map[string]string{"status": "paused"}}, // was active
		}})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("post entities: %v %s", err, res.Body)
		}
		evs := []api.Event{apiEvent("s-ad-new", api.Ad, "ad-new", api.Campaign, "camp1", api.InCampaign, worldT0)}
		for i := range 6 {
			evs = append(evs, apiEvent(fmt.Sprintf("e-new-%d", i), api.User, "u-new", api.Ad, fmt.Sprintf("ad%d", 1+4*i), api.Click, asOf+int64(i)))
		}
		if r, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: evs}); err != nil || r.JSON200 == nil {
			t.Fatalf("post events: %v %s", err, r.Body)
		}
		now := store.MaxTS()
		loaded, st, err := retrieval.Load(ctx, env.m, store, env.ckpt, now, env.opts)
		if err != nil {
			t.Fatal(err)
		}
		if want := numNodes(store) - st.Loaded; st.Embedded != want || want != 2 {
			t.Errorf("embedded %d new nodes, want %d (the new ad and the new user)", st.Embedded, want)
		}
		if st.Upserted != 2 {
			t.Errorf("upserted %d ads, want 2 (the new one and the re-labelled ad0)", st.Upserted)
		}
		for _, ref := range []graph.Ref{{Type: graph.NodeUser, ID: "u-new"}, {Type: graph.NodeAd, ID: "ad-new"}} {
			id, ok := store.Lookup(ref)
			if !ok {
				t.Fatalf("%v not in the graph", ref)
			}
			got, ok := loaded.Embeddings(ref.Type).Vector(id.Idx)
			if !ok {
				t.Fatalf("%v has no embedding in the loaded snapshot", ref)
			}
			vecs, err := env.m.Embed(ctx, store, []graph.NodeID{id}, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(vecs[0], got); diff != "" {
				t.Errorf("%v embedding is not the model's as of load time:\n%s", ref, diff)
			}
		}
		adNew, _ := store.Lookup(graph.Ref{Type: graph.NodeAd, ID: "ad-new"})
		ad, ok := loaded.Ad(adNew.Idx)
		if !ok || len(ad.Attrs[index.AttrCampaign]) != 1 || ad.Attrs[index.AttrCampaign][0] != "camp1" {
			t.Errorf("new ad in index = %v, %v; want it with campaign camp1", ok, ad.Attrs)
		}
		ad0, _ := store.Lookup(graph.Ref{Type: graph.NodeAd, ID: "ad0"})
		if a0, _ := loaded.Ad(ad0.Idx); len(a0.Attrs["status"]) != 1 || a0.Attrs["status"][0] != "paused" {
			t.Errorf("ad0 attributes in the loaded index = %v, want status paused", a0.Attrs)
		}

		// OpenSnapshot persists the caught-up state: the next load
		// recomputes nothing.
		o := env.opts
		o.PersistDir = env.ckpt
		if _, err := retrieval.Open(ctx, env.m, store, env.ckpt, now, o); err != nil {
			t.Fatal(err)
		}
		_, st, err = retrieval.Load(ctx, env.m, store, env.ckpt, now, env.opts)
		if err != nil {
			t.Fatal(err)
		}
		if st.Changed() || st.Loaded != numNodes(store) {
			t.Errorf("after OpenSnapshot re-saved, load stats = %+v, want all %d loaded and nothing recomputed", st, numNodes(store))
		}
	})

	good, err := os.ReadFile(filepath.Join(env.ckpt, retrieval.FileEmbeddings))
	if err != nil {
		t.Fatal(err)
	}
	reencode := func(edit func(f *retrieval.EmbeddingsFile)) []byte {
		f, err := retrieval.DecodeEmbeddings(good)
		if err != nil {
			t.Fatal(err)
		}
		edit(f)
		b, err := f.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x10
	badMagic := append([]byte(nil), good...)
	badMagic[0] = 'X'
	tests := []struct {
		name     string
		content  []byte
		sentinel error
		warning  string
	}{
		{"truncated", good[:len(good)-100], retrieval.ErrCorruptEmbeddings, "checksum mismatch"},
		{"empty", nil, retrieval.ErrCorruptEmbeddings, "truncated"},
		{"flipped bit", flipped, retrieval.ErrCorruptEmbeddings, "checksum mismatch"},
		{"bad magic", badMagic, retrieval.ErrCorruptEmbeddings, "bad magic"},
		{"other model version", reencode(func(f *retrieval.EmbeddingsFile) { f.Version = "v99" }), retrieval.ErrStaleFiles, "v99"},
		{"other graph", reencode(func(f *retrieval.EmbeddingsFile) { f.Fingerprints[graph.NodeUser] ^= 1 }), retrieval.ErrStaleFiles, "other entities"},
	}
	for _, tt := range tests {
		t.Run("fallback on "+tt.name, func(t *testing.T) {
			path := filepath.Join(env.ckpt, retrieval.FileEmbeddings)
			if err := os.WriteFile(path, tt.content, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, _, err := retrieval.Load(ctx, env.m, store, env.ckpt, store.MaxTS(), env.opts); !errors.Is(err, tt.sentinel) ||
				!strings.Contains(err.Error(), tt.warning) {
				t.Fatalf("LoadSnapshot error = %v, want %v mentioning %q", err, tt.sentinel, tt.warning)
			}
			before := len(env.logBuf.String())
			o := env.opts
			o.PersistDir = env.ckpt
			snap, err := retrieval.Open(ctx, env.m, store, env.ckpt, store.MaxTS(), o)
			if err != nil {
				t.Fatalf("OpenSnapshot did not fall back: %v", err)
			}
			logged := env.logBuf.String()[before:]
			if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, "persisted snapshot files unusable") ||
				!strings.Contains(logged, tt.warning) {
				t.Errorf("no warning naming the defect %q; log:\n%s", tt.warning, logged)
			}
			if _, ok := snap.Metrics()["build_seconds"]; !ok || snap.IndexSize() != store.NumNodes(graph.NodeAd) {
				t.Errorf("fallback snapshot metrics %v, index size %d: want a full build", snap.Metrics(), snap.IndexSize())
			}
			if _, st, err := retrieval.Load(ctx, env.m, store, env.ckpt, store.MaxTS(), env.opts); err != nil || st.Changed() {
				t.Errorf("after the fallback the files were not rewritten: %v %+v", err, st)
			}
		})
	}

	t.Run("corrupt index is rebuilt from the embeddings", func(t *testing.T) {
		path := filepath.Join(env.ckpt, retrieval.FileIndex)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		before := len(env.logBuf.String())
		snap, st, err := retrieval.Load(ctx, env.m, store, env.ckpt, store.MaxTS(), env.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !st.IndexRebuilt || st.Embedded != 0 || snap.IndexSize() != store.NumNodes(graph.NodeAd) {
			t.Errorf("stats %+v, index size %d: want the index rebuilt with every ad, nothing embedded", st, snap.IndexSize())
		}
		if logged := env.logBuf.String()[before:]; !strings.Contains(logged, "persisted index unusable") ||
			!strings.Contains(logged, index.ErrCorrupt.Error()) {
			t.Errorf("no warning about the corrupt index; log:\n%s", logged)
		}
	})
}

// TestShortGraphKeepsFiles opens the persisted snapshot of a model over a
// graph that holds fewer nodes than the files name (a graph replayed from a
// shortened log): the snapshot is built, but the good files must not be
// replaced by a snapshot of less.
func TestShortGraphKeepsFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	env := newPersistEnv(t)
	ctx := context.Background()
	store := env.srv.Store()
	opts := env.opts
	opts.PersistDir = env.ckpt
	if _, err := retrieval.Build(ctx, env.m, store, store.MaxTS(), opts); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range []string{retrieval.FileEmbeddings, retrieval.FileIndex} {
		b, err := os.ReadFile(filepath.Join(env.ckpt, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	for _, tc := range []struct {
		name string
		keep int // nodes of each type kept in the short graph
	}{{"half the nodes", 6}, {"empty graph", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			short := graph.NewStore(graphOptions())
			for typ := graph.NodeType(1); int(typ) < graph.NumNodeTypes; typ++ {
				for i := range min(tc.keep, store.NumNodes(typ)) {
					id := graph.NodeID{Type: typ, Idx: uint32(i)}
					e := graph.Entity{Type: typ, ID: store.Ref(id).ID}
					if full := store.Entity(id); full != nil {
						e = *full
					}
					if _, err := short.UpsertEntity(e); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := len(env.logBuf.String())
			if _, err := retrieval.Open(ctx, env.m, short, env.ckpt, store.MaxTS(), opts); err != nil {
				t.Fatalf("OpenSnapshot over a short graph = %v", err)
			}
			if logged := env.logBuf.String()[before:]; !strings.Contains(logged, "leaving the files as they are") {
				t.Errorf("no warning that the files were kept; log:\n%s", logged)
			}
			for f, want := range files {
				got, err := os.ReadFile(filepath.Join(env.ckpt, f))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s changed (%d bytes, want %d; %v)", f, len(got), len(want), err)
				}
			}
		})
	}
}
