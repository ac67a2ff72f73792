package model

import (
	"bytes"
	gocontext "context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/hir-ads/hir/graph"
)

func TestTrainCheckpointLoadEmbed(t *testing.T) {
	w := newSynthWorld(t, 40, 60, 4, 12, 1)
	dir := t.TempDir()
	var logs bytes.Buffer
	cfg := tinyConfig()
	cfg.Model.Spectral, cfg.Model.SpectralWeight = 8, 0.5
	ck, err := Train(gocontext.Background(), w.store, cfg, dir, JSONProgress(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Version != "v1" {
		t.Errorf("Version = %q, want v1", ck.Version)
	}
	// JSON lines, one per LogEvery steps, with every loss finite.
	dec := json.NewDecoder(&logs)
	lines := 0
	for dec.More() {
		var m StepMetrics
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("decode progress line: %v", err)
		}
		lines++
		if math.IsNaN(m.Total) || len(m.Distill) != 3 || len(m.UsageEntropy) != 3 || m.AnchorsPerS <= 0 {
			t.Errorf("progress line %+v is incomplete", m)
		}
	}
	if lines != 2 {
		t.Errorf("progress lines = %d, want 2", lines)
	}
	if ck.Metrics.Validation == nil || math.IsNaN(ck.Metrics.Validation.AUC) {
		t.Errorf("validation metrics = %+v, want an AUC", ck.Metrics.Validation)
	}
	for _, f := range []string{FileConfig, FileWeights, FileOptimizer, FilePrototypes, FileMetrics, FileSpectral} {
		if _, err := os.Stat(filepath.Join(ck.Dir, f)); err != nil {
			t.Errorf("checkpoint lacks %s: %v", f, err)
		}
	}

	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != "v1" || len(m.Prototypes(2)) != 16 || m.Prototypes(3) != nil {
		t.Fatalf("loaded model: version %q, %d level-2 prototypes", m.Version(), len(m.Prototypes(2)))
	}
	ids := w.ads[:20]
	embs, err := m.Embed(gocontext.Background(), w.store, ids, w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	// The encoder's 16 coordinates, unit, then the ad's 8 spectral factors
	// times the weight (none for an ad without a row).
	tbl, err := readSpectral(filepath.Join(ck.Dir, FileSpectral), 8, 16)
	if err != nil {
		t.Fatal(err)
	}
	withRow := 0
	for i, e := range embs {
		if len(e) != 24 || m.Config().ServedDim() != 24 {
			t.Fatalf("embedding %d: len %d, served dim %d; want 24", i, len(e), m.Config().ServedDim())
		}
		n := 0.0
		for _, x := range e[:16] {
			n += float64(x) * float64(x)
		}
		want := make([]float32, 8)
		if r := tbl.row(w.store.Ref(ids[i]).ID); r >= 0 {
			withRow++
			for j := range want {
				want[j] = 0.5 * tbl.Rows[int(r)*8+j]
			}
		}
		for j, x := range want {
			if math.Abs(n-1) > 1e-4 || math.Abs(float64(e[16+j]-x)) > 1e-6 {
				t.Fatalf("embedding %d: norm^2 %v of the encoder's part, factors %v; want 1, %v", i, n, e[16:], want)
			}
		}
	}
	if withRow == 0 {
		t.Fatal("no ad has spectral factors")
	}
	// Batch size must not change results (bucket padding rows are independent).
	one, err := m.Embed(gocontext.Background(), w.store, ids[3:4], w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	for j := range one[0] {
		if math.Abs(float64(one[0][j]-embs[3][j])) > 1e-5 {
			t.Fatalf("Embed alone = %v, in a batch = %v", one[0], embs[3])
		}
	}
	// The factors do not move an ad's tokens: the prototypes are zero on them.
	got := m.PrototypeScores(embs[0])
	if len(got) != 3 || len(got[1]) != 8 {
		t.Fatalf("PrototypeScores shape = %d levels", len(got))
	}
	bare := slices.Concat(embs[0][:16], make([]float32, 8))
	for l, want := range m.PrototypeScores(bare) {
		for k := range want {
			if math.Abs(float64(got[l][k]-want[k])) > 1e-6 {
				t.Fatalf("level %d prototype %d: %v with the factors, %v without", l, k, got[l][k], want[k])
			}
		}
	}

	// Resume continues from v1 and writes v2 with the global step advanced.
	cfg.Resume = true
	cfg.Steps = 3
	ck2, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ck2.Version != "v2" || ck2.Metrics.GlobalStep != 9 {
		t.Errorf("resumed: version %q global step %d, want v2 9", ck2.Version, ck2.Metrics.GlobalStep)
	}
	// The resumed round refits the spectral factors on the same graph and
	// rotates them onto v1's: the same factors.
	k := cfg.Model.Spectral
	s1, err := readSpectral(filepath.Join(ck.Dir, FileSpectral), k, 16)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := readSpectral(filepath.Join(ck2.Dir, FileSpectral), k, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(s1.IDs) == 0 || !slices.Equal(s1.IDs, s2.IDs) || ck2.Metrics.SpectralAds != len(s2.IDs) {
		t.Fatalf("spectral factors of %d and %d ads (%d in v2's metrics)", len(s1.IDs), len(s2.IDs), ck2.Metrics.SpectralAds)
	}
	for i := range s1.Rows {
		if math.Abs(float64(s1.Rows[i]-s2.Rows[i])) > 1e-3 {
			t.Fatalf("resumed factor %d: %v, v1's %v", i, s2.Rows[i], s1.Rows[i])
		}
	}
}

func TestTrainIsReproducible(t *testing.T) {
	w := newSynthWorld(t, 30, 40, 4, 10, 2)
	run := func(sync bool) []byte {
		dir := t.TempDir()
		cfg := tinyConfig()
		cfg.Steps = 4
		cfg.Synchronous = sync
		ck, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(ck.Dir, FileWeights))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := run(false), run(false), run(true)
	if !bytes.Equal(a, b) {
		t.Error("two pipelined runs with the same seed wrote different weights")
	}
	if !bytes.Equal(a, c) {
		t.Error("pipelined and synchronous runs with the same seed wrote different weights")
	}
}

func TestTrainErrors(t *testing.T) {
	empty := graph.NewStore(graph.Options{})
	tests := []struct {
		name  string
		store *graph.Store
		cfg   func(*TrainConfig)
		want  error
	}{
		{"no events", empty, func(*TrainConfig) {}, ErrNoData},
		{"bad heads", newSynthWorld(t, 4, 4, 2, 4, 3).store, func(c *TrainConfig) { c.Model.Heads = 3 }, ErrBadConfig},
		{"resume without checkpoint", newSynthWorld(t, 10, 10, 2, 8, 3).store, func(c *TrainConfig) { c.Resume = true }, ErrNoCheckpoint},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tinyConfig()
			tc.cfg(&cfg)
			_, err := Train(gocontext.Background(), tc.store, cfg, t.TempDir(), nil)
			if !errorsIs(err, tc.want) {
				t.Errorf("Train() error = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestPopularityCoordinate checks the split of the embedding with activity
// features: the prototypes are zero on the popularity coordinate, so
// scoring an embedding against them ignores it, while the anchor's counts
// move that coordinate.
func TestPopularityCoordinate(t *testing.T) {
	for _, form := range []Activity{ActivityShared, ActivityTyped} {
		t.Run(fmt.Sprintf("activity %d", form), func(t *testing.T) { testPopularityCoordinate(t, form) })
	}
}

// testPopularityCoordinate checks the popularity coordinate of the given
// Config.Activity form: the prototypes ignore it, it moves with the
// anchor's counts, only the typed form has a per-type table and only the
// shared form puts the counts in the anchor's token (a checkpoint of the
// shared form loads and embeds as it was trained).
func testPopularityCoordinate(t *testing.T, form Activity) {
	w := newSynthWorld(t, 30, 40, 4, 10, 2)
	cfg := tinyConfig()
	cfg.Model.Activity = form
	cfg.Steps = 3
	ck, err := Train(gocontext.Background(), w.store, cfg, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(ck.Dir)
	if err != nil {
		t.Fatal(err)
	}
	has := func(scope, name string) bool {
		return m.ctx.GetVariableByScopeAndName(context.ScopeSeparator+scopeEncoder+context.ScopeSeparator+scope, name) != nil
	}
	if typed := has("activity_type", "table"); typed != (form == ActivityTyped) {
		t.Errorf("activity %d: per-type table present %v, want %v", form, typed, form == ActivityTyped)
	}
	if token := has("activity_token_1"+context.ScopeSeparator+"dense", "weights"); token != (form == ActivityShared) {
		t.Errorf("activity %d: counts in the anchor's token %v, want %v", form, token, form == ActivityShared)
	}
	last := m.Config().EmbedDim - 1
	for l := range m.Levels() {
		for k, p := range m.Prototypes(l) {
			if p[last] != 0 {
				t.Fatalf("level %d prototype %d has popularity coordinate %v, want 0", l, k, p[last])
			}
		}
	}
	embs, err := m.Embed(gocontext.Background(), w.store, w.ads[:1], w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	moved := slices.Clone(embs[0])
	moved[last] += 0.5
	a, b := m.PrototypeScores(embs[0]), m.PrototypeScores(moved)
	for l := range a {
		if !slices.Equal(a[l], b[l]) {
			t.Errorf("level %d: prototype scores depend on the popularity coordinate", l)
		}
	}
	// A new ad (no edges: zero counts) and a stored ad with engagements
	// differ on the popularity coordinate.
	sm := graph.NewSampler(w.store, m.SamplerOptions())
	busy := sm.Sample(w.ads[0], w.store.MaxTS(), graph.ViewTeacher, 1)
	if busy.Activity[0] <= 0 {
		t.Fatalf("ad %v has no recent activity in the test world", w.ads[0])
	}
	idle := *busy
	idle.Activity = [2]float32{}
	e, err := m.EmbedSubgraphs(gocontext.Background(), w.store, []*graph.Subgraph{busy, &idle})
	if err != nil {
		t.Fatal(err)
	}
	if e[0][last] == e[1][last] {
		t.Errorf("popularity coordinate %v is the same with and without activity", e[0][last])
	}
}

// TestLoadRefusesEncoderSpectral checks that a version whose config.json
// has spectral factors but no spectral_weight (its encoder took the factors
// as inputs) is refused rather than served with a different encoder.
func TestLoadRefusesEncoderSpectral(t *testing.T) {
	w := newSynthWorld(t, 30, 40, 4, 10, 2)
	dir := t.TempDir()
	cfg := tinyConfig()
	cfg.Model.Spectral = 4
	ck, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	editConfig(t, ck.Dir, func(m map[string]any) { delete(m, "spectral_weight") })
	if _, err := Load(dir); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("Load = %v, want ErrBadConfig", err)
	}
}

// TestResumeSpectral checks that a resumed run may add, drop or resize the
// spectral factors (the encoder does not see them) and refuses a version
// whose encoder took them as inputs.
func TestResumeSpectral(t *testing.T) {
	w := newSynthWorld(t, 30, 40, 4, 10, 2)
	for _, tc := range []struct {
		name         string
		from, to     int
		dropWeight   bool // v1's config.json as the encoder-input form wrote it
		wantDim      int
		wantSpectral bool
		ok           bool
	}{
		{"add", -1, 8, false, 24, true, true},
		{"drop", 8, -1, false, 16, false, true},
		{"resize", 8, 4, false, 20, true, true},
		{"keep", 4, 4, false, 20, true, true},
		{"encoder-input form", 4, 4, true, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := tinyConfig()
			cfg.Steps = 2
			cfg.Model.Spectral = tc.from
			ck, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.dropWeight {
				editConfig(t, ck.Dir, func(m map[string]any) { delete(m, "spectral_weight") })
			}
			cfg.Model.Spectral, cfg.Resume = tc.to, true
			ck2, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
			if !tc.ok {
				if !errors.Is(err, ErrBadConfig) {
					t.Fatalf("resume = %v, want ErrBadConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(filepath.Join(ck2.Dir, FileSpectral))
			if (statErr == nil) != tc.wantSpectral {
				t.Errorf("v2 has %s: %v, want %v", FileSpectral, statErr == nil, tc.wantSpectral)
			}
			m, err := Load(ck2.Dir)
			if err != nil {
				t.Fatal(err)
			}
			embs, err := m.Embed(gocontext.Background(), w.store, w.users[:2], w.store.MaxTS())
			if err != nil {
				t.Fatal(err)
			}
			if len(embs[0]) != tc.wantDim {
				t.Errorf("embedding of %d coordinates, want %d", len(embs[0]), tc.wantDim)
			}
		})
	}
}

// editConfig rewrites the model part of a version's config.json with edit
// and refreshes its checksums.
func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, FileConfig)
	var raw map[string]any
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	edit(raw["model"].(map[string]any))
	if b, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeChecksums(dir); err != nil {
		t.Fatal(err)
	}
}
