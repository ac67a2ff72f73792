package model

import (
	gocontext "context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// anchorContent gives a virtual anchor its own content beside the store's.
type anchorContent struct {
	store   *graph.Store
	content *graph.Entity
}

func (a anchorContent) Entity(id graph.NodeID) *graph.Entity {
	if id.Idx == graph.VirtualIdx {
		return a.content
	}
	return a.store.Entity(id)
}

// TestEmbedBatchInvariant checks that a cold-start subgraph's embedding is
// bit-identical whether it is embedded alone (batch bucket 1) or with
// other requests' subgraphs, each with its own anchor content, at any
// position of a larger bucket: request-time micro-batching must not change
// any answer.
func TestEmbedBatchInvariant(t *testing.T) {
	t.Run("tiny", func(t *testing.T) { testEmbedBatchInvariant(t, tinyConfig()) })
	t.Run("default", func(t *testing.T) {
		if testing.Short() {
			t.Skip("trains the default model one step")
		}
		var cfg TrainConfig
		cfg.Steps = 1
		cfg.EvalEvery = 1000
		testEmbedBatchInvariant(t, cfg)
	})
}

func testEmbedBatchInvariant(t *testing.T, cfg TrainConfig) {
	w := newSynthWorld(t, 40, 60, 4, 12, 1)
	dir := t.TempDir()
	if _, err := Train(gocontext.Background(), w.store, cfg, dir, nil); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := gocontext.Background()
	asOf := w.store.MaxTS()
	sm := graph.NewSampler(w.store, m.SamplerOptions())
	const n = 20
	sgs := make([]*graph.Subgraph, n)
	srcs := make([]Entities, n)
	for i := range n {
		var edges []graph.Edge
		for j := range i % 6 {
			edges = append(edges, graph.Edge{Nbr: w.ads[(7*i+3*j)%len(w.ads)], Type: graph.EdgeClick, Out: true, TS: asOf - int64(j)})
		}
		sgs[i] = sm.SampleVirtual(graph.NodeUser, edges, asOf, graph.ViewTeacher, 1)
		var ent *graph.Entity
		if i%3 != 0 {
			ent = &graph.Entity{Type: graph.NodeUser, ID: fmt.Sprintf("v%d", i), Text: fmt.Sprintf("%s %s", topicWords[i%4][0], topicWords[i%4][i%6]),
				Attrs: map[string]string{"geo": fmt.Sprintf("g%d", i%5)}}
		}
		srcs[i] = anchorContent{store: w.store, content: ent}
	}
	alone := make([][]float32, n)
	for i := range n {
		v, err := m.EmbedSubgraphs(ctx, srcs[i], sgs[i:i+1])
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = v[0]
	}
	for _, tc := range []struct {
		name  string
		order []int
	}{
		{"bucket 16, in order", seq(0, 16)},
		{"bucket 64, reversed", rev(seq(0, n))},
		{"bucket 256, repeated", rep(seq(0, n), 4)},
		{"bucket 16, shifted", seq(3, 13)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := make([]*graph.Subgraph, len(tc.order))
			for k, i := range tc.order {
				sub[k] = sgs[i]
			}
			got, err := m.EmbedSubgraphsFrom(ctx, func(k int) Entities { return srcs[tc.order[k]] }, sub)
			if err != nil {
				t.Fatal(err)
			}
			for k, i := range tc.order {
				for j := range got[k] {
					if math.Float32bits(got[k][j]) != math.Float32bits(alone[i][j]) {
						t.Fatalf("subgraph %d at position %d: embedding[%d] = %v, alone %v", i, k, j, got[k][j], alone[i][j])
					}
				}
			}
		})
	}
}

func seq(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func rev(s []int) []int {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return s
}

func rep(s []int, times int) []int {
	var out []int
	for range times {
		out = append(out, s...)
	}
	return out
}

// TestNativeEncoder checks that the native forward pass (what Load runs on
// the pure-Go backend) gives GoMLX's embeddings for every form of the
// encoder's Config, on teacher and student views and on a virtual anchor.
func TestNativeEncoder(t *testing.T) {
	w := newSynthWorld(t, 40, 60, 4, 12, 1)
	for _, tc := range []struct {
		name   string
		config func(*Config)
	}{
		{"defaults", func(*Config) {}},
		{"shared activity", func(c *Config) { c.Activity = ActivityShared }},
		{"no activity", func(c *Config) { c.Activity = ActivityOff }},
		{"no history", func(c *Config) { c.History = -1 }},
		{"short history", func(c *Config) { c.History = 2 }},
		{"id rows", func(c *Config) { c.IDRows = 256 }},
		{"four spectral factors", func(c *Config) { c.Spectral = 4 }},
		{"more spectral factors than coordinates, weighted", func(c *Config) { c.Spectral, c.SpectralWeight = 64, 0.5 }},
		{"two layers", func(c *Config) { c.Layers = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tcfg := tinyConfig()
			tc.config(&tcfg.Model)
			plain, native := trainedBoth(t, w, tcfg)
			asOf := w.store.MaxTS()
			sm := graph.NewSampler(w.store, plain.SamplerOptions())
			var sgs []*graph.Subgraph
			for i, id := range append(append([]graph.NodeID{}, w.users[:6]...), w.ads[:8]...) {
				view := graph.ViewTeacher
				if i%3 == 2 {
					view = graph.ViewStudent
				}
				sgs = append(sgs, sm.Sample(id, asOf, view, uint64(i)))
			}
			var ctxEdges []graph.Edge
			for _, ad := range w.ads[:3] {
				ctxEdges = append(ctxEdges, graph.Edge{Nbr: ad, Type: graph.EdgeClick, Out: true, TS: asOf})
			}
			sgs = append(sgs, sm.SampleVirtual(graph.NodeUser, ctxEdges, asOf, graph.ViewTeacher, 7))
			checkSameEmbeddings(t, w, plain, native, sgs)
		})
	}
}

// trainedBoth trains a model with cfg on w and loads it twice: with GoMLX
// running inference and with the native forward pass.
func trainedBoth(t *testing.T, w *synthWorld, cfg TrainConfig) (gomlx, native *Model) {
	t.Helper()
	dir := t.TempDir()
	if _, err := Train(gocontext.Background(), w.store, cfg, dir, nil); err != nil {
		t.Fatal(err)
	}
	gomlx, err := load(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if native, err = load(dir, true); err != nil {
		t.Fatal(err)
	}
	if gomlx.native != nil || native.native == nil {
		t.Fatal("load did not choose the forward pass asked for")
	}
	return gomlx, native
}

// checkSameEmbeddings embeds sgs with both models and fails unless every
// coordinate agrees within 2e-5.
func checkSameEmbeddings(t *testing.T, w *synthWorld, gomlx, native *Model, sgs []*graph.Subgraph) {
	t.Helper()
	ctx := gocontext.Background()
	a, err := gomlx.EmbedSubgraphs(ctx, w.store, sgs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := native.EmbedSubgraphs(ctx, w.store, sgs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sgs {
		if len(a[i]) != len(b[i]) {
			t.Fatalf("subgraph %d: %d coordinates native, %d GoMLX", i, len(b[i]), len(a[i]))
		}
		for j := range a[i] {
			if d := math.Abs(float64(a[i][j] - b[i][j])); d > 2e-5 {
				t.Fatalf("subgraph %d (N=%d) coordinate %d: %v native, %v GoMLX", i, sgs[i].N, j, b[i][j], a[i][j])
			}
		}
	}
}

// TestErf32 checks the native forward pass's error function against
// math.Erf.
func TestErf32(t *testing.T) {
	for x := -6.0; x <= 6; x += 1.0 / 64 {
		if got, want := float64(erf32(float32(x))), math.Erf(x); math.Abs(got-want) > 5e-7 {
			t.Fatalf("erf32(%v) = %v, want %v", x, got, want)
		}
	}
}

// TestEmbedRejectsMaskedAnchor checks that a subgraph whose anchor (token
// 0) is masked out is refused by both forward passes, rather than embedded
// from whatever the other tokens hold.
func TestEmbedRejectsMaskedAnchor(t *testing.T) {
	w := newSynthWorld(t, 40, 60, 4, 12, 1)
	plain, native := trainedBoth(t, w, tinyConfig())
	for _, m := range []*Model{plain, native} {
		sg := graph.NewSampler(w.store, m.SamplerOptions()).Sample(w.users[0], w.store.MaxTS(), graph.ViewTeacher, 1)
		sg.Mask[0] = false
		if _, err := m.EmbedSubgraphs(gocontext.Background(), w.store, []*graph.Subgraph{sg}); !errors.Is(err, ErrBadConfig) {
			t.Errorf("native %v: err %v, want ErrBadConfig", m.native != nil, err)
		}
	}
}

// TestNativeEncoderChunks checks the native pass on more subgraphs than it
// featurises at a time, in runs of alternating sizes, against GoMLX.
func TestNativeEncoderChunks(t *testing.T) {
	w := newSynthWorld(t, 40, 60, 4, 12, 1)
	plain, native := trainedBoth(t, w, tinyConfig())
	sm := graph.NewSampler(w.store, plain.SamplerOptions())
	var sgs []*graph.Subgraph
	for i := range 2*batchBuckets[len(batchBuckets)-1] + 37 {
		view := graph.ViewTeacher
		if i/100%2 == 1 {
			view = graph.ViewStudent // runs of another N
		}
		sgs = append(sgs, sm.Sample(w.ads[i%len(w.ads)], w.store.MaxTS(), view, uint64(i)))
	}
	checkSameEmbeddings(t, w, plain, native, sgs)
}
