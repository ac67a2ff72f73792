package model

import (
	gocontext "context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	G "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/hir-ads/hir/graph"
)

// TestRetrievalLoss checks the queue-based sampled softmax: a training call
// pushes the batch's destinations into the queue (newest first), a queued
// copy of an event's own destination is left out, and the log-popularity
// correction lowers the weight of popular negatives.
func TestRetrievalLoss(t *testing.T) {
	be, err := Backend()
	if err != nil {
		t.Fatal(err)
	}
	const P, E, Q = 4, 8, 8
	c := Config{EmbedDim: E}
	rng := rand.New(rand.NewPCG(5, 6))
	emb := make([]float32, 2*P*E)
	for i := range emb {
		emb[i] = float32(rng.NormFloat64()) * 0.5
	}
	label := make([]float32, 3*P)
	for i := range P {
		label[i] = 1
	}
	keys := []int32{10, 11, 12, 13}
	uniform := []float32{-3, -3, -3, -3}
	run := func(ctx *context.Context, logq []float32, key []int32, train bool) float64 {
		t.Helper()
		exec, err := context.NewExec(be, ctx, func(ctx *context.Context, emb, label, logq, key *G.Node) *G.Node {
			return retrievalLoss(ctx, c, Q, emb, label, logq, key, 0.5, train)
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Exec(tensors.FromFlatDataAndDimensions(emb, 2*P, E), tensors.FromFlatDataAndDimensions(label, 3*P),
			tensors.FromFlatDataAndDimensions(logq, P), tensors.FromFlatDataAndDimensions(key, P))
		if err != nil {
			t.Fatal(err)
		}
		return float64(out[0].Value().(float32))
	}
	queueOf := func(ctx *context.Context) (embs []float32, keys []int32) {
		t.Helper()
		ev, _, kv := queueVars(ctx.Checked(false), c, Q)
		et, err := ev.Value()
		if err != nil {
			t.Fatal(err)
		}
		kt, err := kv.Value()
		if err != nil {
			t.Fatal(err)
		}
		return tensors.MustCopyFlatData[float32](et), tensors.MustCopyFlatData[int32](kt)
	}

	ctx := newModelContext(1)
	empty := run(ctx, uniform, keys, true)
	qe, qk := queueOf(ctx)
	if want := []int32{10, 11, 12, 13, -1, -1, -1, -1}; !slices.Equal(qk, want) {
		t.Fatalf("queue keys after one step = %v, want %v", qk, want)
	}
	if !slices.Equal(qe[:P*E], emb[P*E:]) {
		t.Errorf("queue rows after one step are not the batch's destinations")
	}
	// Second step with other keys: the queue now holds the first batch's
	// destinations, which are new negatives, so the loss rises.
	other := []int32{20, 21, 22, 23}
	withQueue := run(ctx, uniform, other, false)
	if withQueue <= empty {
		t.Errorf("loss with 4 queued negatives %.4f, want above the empty queue's %.4f", withQueue, empty)
	}
	// The same keys: each event's own destination sits in the queue and is
	// left out; the others are genuine negatives (3 of 4 rows).
	sameKeys := run(ctx, uniform, keys, false)
	if !(sameKeys > empty && sameKeys < withQueue) {
		t.Errorf("loss with the positives queued = %.4f, want between %.4f (empty queue) and %.4f (no key repeated)", sameKeys, empty, withQueue)
	}
	// logQ correction: in-batch negatives more popular (higher log sampling
	// probability) than the positive get lower logits.
	// Only event 0 counted (its negatives are the others' destinations).
	label[1], label[2], label[3] = 0, 0, 0
	popularNeg := run(newModelContext(1), []float32{-3, -1, -1, -1}, keys, false)
	base := run(newModelContext(1), uniform, keys, false)
	if math.IsNaN(popularNeg) || popularNeg >= base {
		t.Errorf("loss with popular negatives %.4f, want below %.4f", popularNeg, base)
	}
}

// TestIDTableRows checks the two hashed rows of the per-id table.
func TestIDTableRows(t *testing.T) {
	const rows = 1 << 10
	seen := map[[2]int32]bool{}
	for i := range 200 {
		id := string(rune('a'+i%26)) + string(rune('0'+i/26))
		r := idTableRows(graph.NodeAd, id, rows)
		if r[0] < 1 || r[0] >= rows || r[1] < 1 || r[1] >= rows {
			t.Fatalf("idTableRows(%q) = %v, want in [1, %d)", id, r, rows)
		}
		if r != idTableRows(graph.NodeAd, id, rows) {
			t.Fatalf("idTableRows(%q) is not deterministic", id)
		}
		if seen[r] {
			t.Errorf("idTableRows(%q) = %v repeats another id's pair", id, r)
		}
		seen[r] = true
	}
	if a, u := idTableRows(graph.NodeAd, "x", rows), idTableRows(graph.NodeUser, "x", rows); a == u {
		t.Errorf("an ad and a user with the same id share rows %v", a)
	}
	if r := idTableRows(graph.NodeAd, "x", -1); r != [2]int32{} {
		t.Errorf("idTableRows without a table = %v, want zeros", r)
	}
}

// TestSnapshotsAndOldConfig checks SnapshotEvery (a version every N steps,
// then the final one) and that a checkpoint whose config predates the
// per-id table loads without one.
func TestSnapshotsAndOldConfig(t *testing.T) {
	w := newSynthWorld(t, 30, 40, 4, 10, 2)
	dir := t.TempDir()
	cfg := tinyConfig()
	cfg.Steps = 4
	cfg.SnapshotEvery = 2
	cfg.Negatives = 16 // the queue and the per-id table on
	cfg.Model.IDRows = 64
	ck, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Version != "v2" || ck.Metrics.Steps != 4 {
		t.Errorf("final version %s after %d steps, want v2 after 4", ck.Version, ck.Metrics.Steps)
	}
	var m TrainMetrics
	if err := readJSON(filepath.Join(dir, modelsDir, "v1", FileMetrics), &m); err != nil || m.GlobalStep != 2 {
		t.Errorf("snapshot v1: global step %d (%v), want 2", m.GlobalStep, err)
	}
	// An old config: no id_rows, activity or history key. The model
	// trained without the table, the activity features and the propagated
	// content stands in for an old one.
	cfg.SnapshotEvery = 0
	cfg.Negatives = 0
	cfg.Model.IDRows = -1
	cfg.Model.Activity = ActivityOff
	cfg.Model.History = -1
	old, err := Train(gocontext.Background(), w.store, cfg, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	embed := func() [][]float32 {
		t.Helper()
		mdl, err := Load(old.Dir)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		e, err := mdl.Embed(gocontext.Background(), w.store, w.ads[:2], w.store.MaxTS())
		if err != nil {
			t.Fatalf("embed: %v", err)
		}
		return e
	}
	before := embed()
	cc, err := os.ReadFile(filepath.Join(old.Dir, FileConfig))
	if err != nil {
		t.Fatal(err)
	}
	stripped := string(cc)
	for _, key := range []string{"id_rows", "activity", "history"} {
		s := strings.NewReplacer(`"`+key+`": -1,`, "", `"`+key+`":-1,`, "").Replace(stripped)
		if s == stripped {
			t.Fatalf("config.json has no %s to strip: %s", key, cc)
		}
		stripped = s
	}
	if err := os.WriteFile(filepath.Join(old.Dir, FileConfig), []byte(stripped), 0o644); err != nil {
		t.Fatal(err)
	}
	// Versions that predate the per-id table predate checksums.json too.
	if err := os.Remove(filepath.Join(old.Dir, FileChecksums)); err != nil {
		t.Fatal(err)
	}
	after := embed()
	for i := range before {
		if !slices.Equal(before[i], after[i]) {
			t.Errorf("embedding %d changed when config.json lost id_rows, activity and history: %v, want %v", i, after[i][:3], before[i][:3])
		}
	}
}
