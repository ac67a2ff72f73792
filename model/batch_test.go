package model

import (
	gocontext "context"
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"

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

// TestTransposedDense checks that the inference form that reads the dense
// layers' transposed weights (Load) embeds as the trained form does: the
// same products, summed in the same order.
func TestTransposedDense(t *testing.T) {
	w := newSynthWorld(t, 40, 60, 4, 12, 1)
	dir := t.TempDir()
	if _, err := Train(gocontext.Background(), w.store, tinyConfig(), dir, nil); err != nil {
		t.Fatal(err)
	}
	plain, err := load(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := context.GetParamOr(tr.ctx, paramTransposedDense, false); !got {
		t.Fatal("Load did not set the transposed form")
	}
	ids := append(append([]graph.NodeID{}, w.users[:5]...), w.ads[:7]...)
	ctx := gocontext.Background()
	a, err := plain.Embed(ctx, w.store, ids, w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.Embed(ctx, w.store, ids, w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		for j := range a[i] {
			if d := math.Abs(float64(a[i][j] - b[i][j])); d > 1e-6 {
				t.Fatalf("node %v coordinate %d: %v transposed, %v plain", ids[i], j, b[i][j], a[i][j])
			}
		}
	}
}
