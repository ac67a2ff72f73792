package retrieval

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
)

// Announced is what a model registry says of a version beside its
// checkpoint directory: when it was trained, and metrics its training round
// measured that the checkpoint's files do not hold.
type Announced struct {
	TrainedAt time.Time
	Metrics   map[string]float64
}

// OpenVersion loads the model version in its checkpoint directory dir and
// opens it for serving over store as it is now ([Open] as of
// store.MaxTS()), and describes it by its checkpoint: its Dir is dir made
// absolute, its TrainedAt the time its training metrics were written, and
// its Metrics are those metrics (steps, train_events, train_loss,
// val_loss, val_engagement_auc). ann, when not nil, is what a registry
// announced of the version: its TrainedAt, when set, and its metrics fill
// in what the checkpoint does not say. `hir serve` opens the version it
// starts with so, and a replica the version another replica announces;
// what it returns is not changed after. A version whose model does not
// load fails with an error wrapping ErrBadVersion and the load's error
// (model.ErrCorrupt, fs.ErrNotExist, ...).
func OpenVersion(ctx context.Context, store *graph.Store, dir string, ann *Announced, opts BuildOptions) (*Served, error) {
	m, err := model.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadVersion, dir, err)
	}
	s, err := Open(ctx, m, store, dir, store.MaxTS(), opts)
	if err != nil {
		return nil, fmt.Errorf("build generation of %s: %w", m.Version(), err)
	}
	gen := s.gen
	gen.Dir = filepath.Clean(dir)
	if abs, err := filepath.Abs(dir); err == nil {
		gen.Dir = abs
	}
	addCheckpointMetrics(gen, dir)
	if ann != nil {
		if !ann.TrainedAt.IsZero() {
			gen.TrainedAt = ann.TrainedAt
		}
		for k, v := range maps.All(ann.Metrics) {
			if _, ok := gen.Metrics[k]; !ok {
				gen.Metrics[k] = v
			}
		}
	}
	return s, nil
}

// addCheckpointMetrics copies the training metrics of checkpoint dir into
// gen (as the trainer's rounds do) and dates gen by the checkpoint. A
// missing or unreadable metrics file leaves gen as it is.
func addCheckpointMetrics(gen *generation, dir string) {
	path := filepath.Join(dir, model.FileMetrics)
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var tm model.TrainMetrics
	if json.Unmarshal(b, &tm) != nil {
		return
	}
	if st, err := os.Stat(path); err == nil {
		gen.TrainedAt = st.ModTime()
	}
	gen.Metrics["steps"] = float64(tm.Steps)
	gen.Metrics["train_events"] = float64(tm.TrainEvents)
	if tm.Last != nil {
		gen.Metrics["train_loss"] = tm.Last.Total
	}
	if v := tm.Validation; v != nil {
		gen.Metrics["val_loss"] = v.Total
		gen.Metrics["val_engagement_auc"] = v.AUC
	}
}
