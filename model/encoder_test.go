package model

import (
	gocontext "context"
	G "github.com/gomlx/gomlx/pkg/core/graph" // aliased: the project has its own graph package
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// encodeBatch runs the encoder of a fresh context (seed 1) on a batch.
func encodeBatch(t *testing.T, ctx *context.Context, c Config, bt *batch) []float32 {
	t.Helper()
	be, err := Backend()
	if err != nil {
		t.Fatal(err)
	}
	exec, err := context.NewExec(be, ctx, func(ctx *context.Context, in []*G.Node) *G.Node { return encode(ctx, c, in) })
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Exec(anySlice(bt.tensors(c))...)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float32](out[0])
}

func sampleBatch(t *testing.T, w *synthWorld, c TrainConfig, n int) *batch {
	t.Helper()
	sm := graph.NewSampler(w.store, c.Sampler)
	f, err := newFeaturizer(c.Model)
	if err != nil {
		t.Fatal(err)
	}
	var sgs []*graph.Subgraph
	for i := range n {
		sgs = append(sgs, sm.Sample(w.ads[i%len(w.ads)], w.store.MaxTS(), graph.ViewTeacher, uint64(i)))
	}
	bt, err := f.featurize(w.store, sgs, 0)
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

func TestParameterCountIndependentOfEntities(t *testing.T) {
	c := tinyConfig().WithDefaults()
	var counts []int
	for _, ads := range []int{8, 800} {
		w := newSynthWorld(t, 8, ads, 2, 4, 1)
		ctx := newModelContext(1)
		encodeBatch(t, ctx, c.Model, sampleBatch(t, w, c, 4))
		counts = append(counts, ctx.NumParameters())
	}
	if counts[0] != counts[1] || counts[0] == 0 {
		t.Errorf("parameters with 8 ads = %d, with 800 ads = %d; want equal and > 0", counts[0], counts[1])
	}
}

func TestAttentionBiasAndPadding(t *testing.T) {
	c := tinyConfig().WithDefaults().Model
	w := newSynthWorld(t, 4, 8, 2, 6, 1)
	// A hand-made subgraph: anchor user, two ads, one campaign; two padding tokens.
	u, a0, a1 := w.users[0], w.ads[0], w.ads[1]
	camp, _ := w.store.Lookup(graph.Ref{Type: graph.NodeCampaign, ID: "c0-0"})
	const n = 6
	sg := &graph.Subgraph{Anchor: u, N: n, Len: 4,
		Nodes:      []graph.NodeID{u, a0, a1, camp, {}, {}},
		Mask:       []bool{true, true, true, true, false, false},
		Hop:        []uint8{0, 1, 1, 2, 0, 0},
		EdgeType:   []graph.EdgeType{0, graph.EdgeClick, graph.EdgeClick, graph.EdgeInCampaign, 0, 0},
		TimeBucket: []uint8{0, 3, 4, 5, 0, 0},
		EdgeWeight: []float32{0, 1, 1, 1, 0, 0},
		WalkFreq:   []float32{1, 0.5, 0.3, 0.2, 0, 0},
		SPD:        make([]uint8, n*n),
	}
	for i := range n {
		for j := range n {
			switch {
			case i >= 4 || j >= 4:
				sg.SPD[i*n+j] = graph.SPDPad
			case i == j:
				sg.SPD[i*n+j] = 0
			default:
				sg.SPD[i*n+j] = 1
			}
		}
	}
	f, err := newFeaturizer(c)
	if err != nil {
		t.Fatal(err)
	}
	base, err := f.featurize(w.store, []*graph.Subgraph{sg}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newModelContext(1)
	want := encodeBatch(t, ctx, c, base)
	maxDiff := func(a, b []float32) float64 {
		d := 0.0
		for i := range a {
			d = math.Max(d, math.Abs(float64(a[i]-b[i])))
		}
		return d
	}
	tests := []struct {
		name    string
		edit    func(bt *batch)
		changes bool
	}{
		{"spd bias", func(bt *batch) { bt.spd[0*n+3], bt.spd[3*n+0] = 4, 4 }, true},
		{"type pair bias", func(bt *batch) { bt.typePair[0*n+2] = int32(graph.NodeBrand) * int32(graph.NumNodeTypes) }, true},
		{"anchor activity", func(bt *batch) { bt.activity[0], bt.activity[1] = 3, 4 }, true},
		{"padding content", func(bt *batch) {
			for tok := 4; tok < n; tok++ {
				bt.nodeType[tok] = int32(graph.NodeAd)
				bt.hop[tok], bt.edgeType[tok], bt.walk[tok], bt.weight[tok] = 1, int32(graph.EdgeClick), 0.9, 3
				for k := range c.HashK {
					bt.hash[tok*c.HashK+k] = 0.7
				}
				for k := range c.TextLen {
					bt.text[tok*c.TextLen+k], bt.textMask[tok*c.TextLen+k] = int32(k+1), 1
				}
				for j := range n {
					bt.spd[tok*n+j], bt.spd[j*n+tok] = 1, 1
				}
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bt, _ := f.featurize(w.store, []*graph.Subgraph{sg}, 0)
			tc.edit(bt)
			got := encodeBatch(t, ctx, c, bt)
			d := maxDiff(got, want)
			if tc.changes && d < 1e-6 {
				t.Errorf("%s: output unchanged (max diff %g), want a change", tc.name, d)
			}
			if !tc.changes && d != 0 {
				t.Errorf("%s: output changed by %g, want identical", tc.name, d)
			}
		})
	}
}

func TestTextBucketsUseAnalyzer(t *testing.T) {
	f, err := newFeaturizer(tinyConfig().WithDefaults().Model)
	if err != nil {
		t.Fatal(err)
	}
	a := textBuckets(f.analyzer, "Running Shoes for the marathon", 1<<14, 32)
	b := textBuckets(f.analyzer, "running shoe marathons", 1<<14, 32)
	// Stemming and stop words: the three content words map to the same buckets.
	if len(a) != 5 || a[0] != b[0] || a[1] != b[1] || a[2] != b[2] {
		t.Errorf("textBuckets = %v and %v, want 3 shared word buckets + 2 bigrams", a, b)
	}
	if got := textBuckets(f.analyzer, "", 16, 8); got != nil {
		t.Errorf("textBuckets(\"\") = %v, want nil", got)
	}
}

func TestNMIAndAUC(t *testing.T) {
	nmi := []struct {
		name string
		a, b []int
		want float64
	}{
		{"identical up to renaming", []int{0, 0, 1, 1, 2, 2}, []int{5, 5, 3, 3, 9, 9}, 1},
		{"independent", []int{0, 0, 1, 1}, []int{0, 1, 0, 1}, 0},
		{"constant", []int{1, 1, 1}, []int{0, 1, 2}, 0},
		{"empty", nil, nil, 0},
	}
	for _, tc := range nmi {
		t.Run("nmi "+tc.name, func(t *testing.T) {
			if got := NMI(tc.a, tc.b); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("NMI(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
	auc := []struct {
		name   string
		scores []float64
		pos    []bool
		want   float64
	}{
		{"perfect", []float64{0.1, 0.2, 0.8, 0.9}, []bool{false, false, true, true}, 1},
		{"inverted", []float64{0.9, 0.8, 0.2, 0.1}, []bool{false, false, true, true}, 0},
		{"ties", []float64{0.5, 0.5}, []bool{false, true}, 0.5},
	}
	for _, tc := range auc {
		t.Run("auc "+tc.name, func(t *testing.T) {
			if got := AUC(tc.scores, tc.pos); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("AUC(%v) = %v, want %v", tc.scores, got, tc.want)
			}
		})
	}
}

// TestPlantedInterests trains the default-size model on a planted-interest
// world and checks that losses fall, no level collapses and the coarse
// assignment of ads recovers the planted interests (NMI >= 0.5).
func TestPlantedInterests(t *testing.T) {
	if testing.Short() || os.Getenv("HIR_SLOW_TESTS") == "" {
		t.Skip("slow: set HIR_SLOW_TESTS=1")
	}
	w := newSynthWorld(t, 600, 600, 6, 20, 7)
	var cfg TrainConfig
	cfg.Steps = 300
	cfg.EvalEvery = 100
	cfg.LogEvery = 25
	dir := t.TempDir()
	ck, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, last := ck.Metrics.First, ck.Metrics.Last
	if last.Engagement >= first.Engagement || last.Hierarchy >= first.Hierarchy {
		t.Errorf("losses did not fall: first %+v last %+v", first, last)
	}
	for l, h := range last.UsageEntropy {
		if h < 0.5 {
			t.Errorf("level %d usage entropy %v < 0.5: collapse", l, h)
		}
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	embs, err := m.Embed(gocontext.Background(), w.store, w.ads, w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	assign := make([]int, len(embs))
	for i, e := range embs {
		sc := m.PrototypeScores(e)[0]
		for k := range sc {
			if sc[k] > sc[assign[i]] {
				assign[i] = k
			}
		}
	}
	nmi := NMI(assign, w.adTopic)
	t.Logf("coarse NMI vs planted interests = %.3f; %.1f s; anchors/s %.0f; val %+v", nmi, ck.Metrics.Seconds, ck.Metrics.AnchorsPerS, ck.Metrics.Validation)
	if nmi < 0.5 {
		t.Errorf("NMI = %v, want >= 0.5", nmi)
	}
}

func TestTopBuckets(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []bucketWeight
		n    int
		ids  []int32
		ws   []float32
	}{
		{"empty", nil, 3, []int32{0, 0, 0}, []float32{0, 0, 0}},
		{"merged and normalised", []bucketWeight{{7, 1}, {3, 1}, {7, 2}}, 3, []int32{7, 3, 0}, []float32{0.75, 0.25, 0}},
		{"heaviest kept, ties to the lower bucket", []bucketWeight{{9, 1}, {4, 1}, {5, 3}, {2, 0.5}}, 2, []int32{5, 4}, []float32{0.75, 0.25}},
		{"zero weights", []bucketWeight{{1, 0}}, 2, []int32{0, 0}, []float32{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, ws := make([]int32, tc.n), make([]float32, tc.n)
			topBuckets(slices.Clone(tc.in), ids, ws)
			if !slices.Equal(ids, tc.ids) || !slices.Equal(ws, tc.ws) {
				t.Errorf("topBuckets = %v %v, want %v %v", ids, ws, tc.ids, tc.ws)
			}
		})
	}
}

// TestHistoryFeatures checks the anchor's pooled history content: a user's
// pool holds its engaged ads' text, an anchor-only view and a model without
// the feature have none, and a virtual anchor's comes from its context.
func TestHistoryFeatures(t *testing.T) {
	w := newSynthWorld(t, 40, 60, 4, 12, 1)
	cfg := tinyConfig().WithDefaults().Model
	f, err := newFeaturizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	asOf := w.store.MaxTS()
	alone := graph.DefaultSamplerOptions()
	alone.Student.AnchorOnly = 1
	sm := graph.NewSampler(w.store, alone)
	user := w.users[0]
	ad := graph.NodeID{}
	w.store.Neighbors(user, asOf, func(e graph.Edge) bool {
		if e.Type.IsPositive() {
			ad = e.Nbr
			return false
		}
		return true
	})
	if ad == (graph.NodeID{}) {
		t.Fatal("user 0 has no positive engagement")
	}
	virtual := sm.SampleVirtual(graph.NodeUser, []graph.Edge{{Nbr: ad, Type: graph.EdgeClick, Out: true, TS: asOf}}, asOf, graph.ViewTeacher, 1)
	sgs := []*graph.Subgraph{sm.Sample(user, asOf, graph.ViewTeacher, 1), sm.Sample(user, asOf, graph.ViewStudent, 1), virtual}
	ht, _ := histLens(cfg)
	pooled := func(f *featurizer) [][]int32 {
		out := make([][]int32, len(sgs))
		for b, sg := range sgs {
			bt, err := f.featurize(w.store, []*graph.Subgraph{sg}, 0)
			if err != nil {
				t.Fatal(err)
			}
			var sum float32
			for k, wk := range bt.histTextW[:ht] {
				sum += wk
				if wk > 0 {
					out[b] = append(out[b], bt.histText[k])
				}
			}
			if len(out[b]) > 0 && math.Abs(float64(sum)-1) > 1e-5 {
				t.Errorf("subgraph %d: pooled weights sum to %v, want 1", b, sum)
			}
		}
		return out
	}
	got := pooled(f)
	if len(got[0]) == 0 {
		t.Error("teacher view of a user with engagements: empty history pool")
	}
	if len(got[1]) != 0 {
		t.Errorf("anchor-only view: history pool %v, want none", got[1])
	}
	adText := f.node(w.store, ad).text
	if len(adText) == 0 {
		t.Fatal("the engaged ad has no text")
	}
	slices.Sort(got[2])
	want := slices.Clone(adText[:min(len(adText), ht)])
	slices.Sort(want)
	if !slices.Equal(got[2], want) {
		t.Errorf("virtual anchor with one context click: pool %v, want the ad's buckets %v", got[2], want)
	}
	cfg.History = -1
	off, err := newFeaturizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for b, p := range pooled(off) {
		if len(p) != 0 {
			t.Errorf("history off, subgraph %d: pool %v, want none", b, p)
		}
	}
}

// TestEncodeSplit checks that a student batch featurised in two parts (the
// anchors alone at one token, see featurizeSplit) encodes to the same
// embeddings, in the same row order, as the batch featurised whole, with
// many, few and no anchors alone.
func TestEncodeSplit(t *testing.T) {
	w := newSynthWorld(t, 40, 60, 4, 12, 1)
	c := tinyConfig().WithDefaults().Model
	f, err := newFeaturizer(c)
	if err != nil {
		t.Fatal(err)
	}
	be, err := Backend()
	if err != nil {
		t.Fatal(err)
	}
	ctx := newModelContext(1)
	split, err := context.NewExec(be, ctx, func(ctx *context.Context, in []*G.Node) *G.Node {
		nb := numBatchInputs
		return encodeSplit(ctx, c, in[:nb], in[nb:2*nb], in[2*nb])
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		anchorOnly float64
		n          int
		wantOne    int // rows of the one-token batch
	}{
		{"many alone", 0.6, 70, 32},
		{"few alone", 0.1, 24, 1},
		{"none alone", -1, 20, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var so graph.SamplerOptions
			so.Student.AnchorOnly = tc.anchorOnly
			sm := graph.NewSampler(w.store, so)
			var sgs []*graph.Subgraph
			alone := 0
			for i := range tc.n {
				a := w.users[i%len(w.users)]
				if i%2 == 1 {
					a = w.ads[i%len(w.ads)]
				}
				sg := sm.Sample(a, w.store.MaxTS(), graph.ViewStudent, uint64(i))
				if sg.Len == 1 {
					alone++
				}
				sgs = append(sgs, sg)
			}
			whole, err := f.featurize(w.store, sgs, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := encodeBatch(t, ctx, c, whole)
			full, one, perm, err := f.featurizeSplit(w.store, sgs)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantOne > 1 && alone < tc.wantOne {
				t.Fatalf("fixture: %d anchors alone, want at least %d", alone, tc.wantOne)
			}
			if one.B != tc.wantOne || one.N != 1 || full.B+min(one.B, alone-alone%aloneQuantum) != tc.n || full.N != whole.N {
				t.Fatalf("split into %dx%d and %dx%d (%d alone), want %d one-token rows", full.B, full.N, one.B, one.N, alone, tc.wantOne)
			}
			in := append(full.tensors(c), one.tensors(c)...)
			in = append(in, tensors.FromFlatDataAndDimensions(perm, len(perm)))
			out, err := split.Exec(anySlice(in)...)
			if err != nil {
				t.Fatal(err)
			}
			got := tensors.MustCopyFlatData[float32](out[0])
			if len(got) != len(want) {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			for i := range got {
				if math.Abs(float64(got[i]-want[i])) > 1e-5 {
					t.Fatalf("row %d coordinate %d: split %v, whole %v", i/c.EmbedDim, i%c.EmbedDim, got[i], want[i])
				}
			}
		})
	}
}
