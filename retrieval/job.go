package retrieval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
)

// ErrRegressed is returned (wrapped) by a [TrainJob] whose candidate model
// scores worse than the serving one on the validation window; the trainer
// then keeps the serving generation.
var ErrRegressed = errors.New("candidate model regressed on validation")

// TrainJob runs one training round: from the served state prev (nil
// before the first), it trains a candidate, validates it, and returns the
// next generation with its live index, its training loss, or an error. It
// must honour ctx and must not modify prev. [Engine.Publish] serves what it
// returns.
type TrainJob func(ctx context.Context, prev *Served) (next *Served, loss float64, err error)

// JobOptions configures the training rounds of [NewTrainJob].
type JobOptions struct {
	// DataDir receives the model versions (DataDir/models/vN).
	DataDir string
	// Train configures model.Train. Resume is set automatically when a
	// previous version exists.
	Train model.TrainConfig
	// Build configures the snapshot built from the trained model.
	Build BuildOptions
	// ValFraction is the latest fraction of the engagement events (by time)
	// both the serving and the candidate model are scored on (default 0.1);
	// ValPairs bounds the positive pairs scored (default 512).
	ValFraction float64
	ValPairs    int
	// Tolerance is how much lower the candidate's validation AUC may be than
	// the serving model's before it is rejected (default 0.01).
	Tolerance float64
	// Log receives model.Train's progress as JSON lines (model.JSONProgress); default discard.
	Log io.Writer
	// Calibrate, when set, calibrates every candidate's prior weight
	// ([CalibrateVersion]) before it is validated, so that the version
	// carries it (its Cut is the candidate's split); nil: not calibrated.
	Calibrate *CalibrateOptions
	// KeepVersions is how many model versions DataDir/models keeps: after
	// a round is accepted the oldest beyond it are removed, never the one
	// in serving. 0 keeps every version.
	KeepVersions int
}

// NewTrainJob returns the standard training round: train from the latest
// checkpoint in opts.DataDir on the events of store, score the candidate
// and the serving model on the latest time window (engagement AUC of
// user·item dot products against random items, embeddings taken as of the
// window's start), reject a candidate that regresses, otherwise build the
// next snapshot (re-embed, fit, index, catalogue) and persist its files
// into the candidate checkpoint directory. Only then is the candidate
// accepted as the next version ([model.Accept]), which a restart serves
// and the next round resumes from; a rejected or failed candidate is
// discarded. Finally the versions beyond opts.KeepVersions are pruned.
func NewTrainJob(store *graph.Store, opts JobOptions) TrainJob {
	opts.Build.applyDefaults()
	if opts.ValFraction <= 0 || opts.ValFraction >= 1 {
		opts.ValFraction = 0.1
	}
	if opts.ValPairs <= 0 {
		opts.ValPairs = 512
	}
	if opts.Tolerance == 0 {
		opts.Tolerance = 0.01
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	return func(ctx context.Context, prev *Served) (*Served, float64, error) {
		asOf := store.MaxTS()
		if store.NumEvents() == 0 {
			return nil, 0, fmt.Errorf("train: %w", model.ErrNoData)
		}
		cfg := opts.Train
		cfg.Candidate = true
		if _, err := model.LatestVersionDir(opts.DataDir); err == nil {
			cfg.Resume = true
		}
		ckpt, err := model.Train(ctx, store, cfg, opts.DataDir, model.JSONProgress(opts.Log))
		if err != nil {
			return nil, 0, fmt.Errorf("train: %w", err)
		}
		if opts.Calibrate != nil {
			if _, err := CalibrateVersion(ctx, ckpt.Dir, ckpt.Metrics.SplitTS, store, *opts.Calibrate); err != nil {
				return nil, 0, errors.Join(err, model.Discard(ckpt))
			}
		}
		next, loss, err := validateAndBuild(ctx, store, prev, ckpt, asOf, cfg.Seed, opts)
		if err != nil {
			// Rejected or failed: the candidate never becomes a version that
			// a restart would serve or the next round would resume from.
			return nil, loss, errors.Join(err, model.Discard(ckpt))
		}
		if err := model.Accept(ckpt); err != nil {
			return nil, loss, errors.Join(err, model.Discard(ckpt))
		}
		if dir, err := filepath.Abs(ckpt.Dir); err == nil {
			next.gen.Dir = dir
		}
		serving := ""
		if prev != nil {
			serving = prev.gen.Dir
		}
		if removed, err := model.Prune(opts.DataDir, opts.KeepVersions, serving); err != nil {
			opts.Build.Logger.Warn("prune model versions", "err", err)
		} else if len(removed) > 0 {
			opts.Build.Logger.Info("pruned model versions", "removed", len(removed), "keep", opts.KeepVersions)
		}
		return next, loss, nil
	}
}

// validateAndBuild scores candidate ckpt against the serving state prev on
// the validation window and, unless it regressed, builds its generation
// (persisting the snapshot files into ckpt.Dir).
func validateAndBuild(ctx context.Context, store *graph.Store, prev *Served, ckpt *model.Checkpoint, asOf int64,
	seed uint64, opts JobOptions) (*Served, float64, error) {
	m, err := model.Load(ckpt.Dir)
	if err != nil {
		return nil, 0, fmt.Errorf("load trained model: %w", err)
	}
	loss := math.NaN()
	if ckpt.Metrics.Last != nil {
		loss = ckpt.Metrics.Last.Total
	}
	val := newValidationSet(store, opts.ValFraction, opts.ValPairs, seed)
	candAUC, err := val.auc(ctx, m, store)
	if err != nil {
		return nil, 0, fmt.Errorf("validate candidate: %w", err)
	}
	if prev != nil && prev.gen.Model != nil && !math.IsNaN(candAUC) {
		prevAUC, err := val.auc(ctx, prev.gen.Model, store)
		if err != nil {
			return nil, 0, fmt.Errorf("validate serving model: %w", err)
		}
		if !math.IsNaN(prevAUC) && candAUC < prevAUC-opts.Tolerance {
			return nil, loss, fmt.Errorf("%w: %s AUC %.4f < %s AUC %.4f - %.3f", ErrRegressed,
				m.Version(), candAUC, prev.gen.Version, prevAUC, opts.Tolerance)
		}
	}
	build := opts.Build
	build.PersistDir = ckpt.Dir
	next, err := Build(ctx, m, store, asOf, build)
	if err != nil {
		return nil, 0, err
	}
	gen := next.gen
	gen.Metrics["train_loss"] = loss
	gen.Metrics["val_window_auc"] = candAUC
	gen.Metrics["steps"] = float64(ckpt.Metrics.Steps)
	gen.Metrics["train_events"] = float64(ckpt.Metrics.TrainEvents)
	if v := ckpt.Metrics.Validation; v != nil {
		gen.Metrics["val_loss"] = v.Total
		gen.Metrics["val_engagement_auc"] = v.AUC
	}
	for k, v := range gen.Metrics {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(gen.Metrics, k) // JSON cannot carry them
		}
	}
	return next, loss, nil
}

// validationSet is a sample of the latest fraction (by count) of positive
// engagement events, with one random negative of the item's type per event.
type validationSet struct {
	asOf     int64 // embeddings are taken as of the window's start
	src, pos []graph.NodeID
	neg      []graph.NodeID
}

func newValidationSet(store *graph.Store, frac float64, maxPairs int, seed uint64) *validationSet {
	hi := store.MaxTS() + 1
	usable := func(src graph.NodeID, e graph.Edge) bool { return e.Type.IsPositive() && e.Nbr.Type != src.Type }
	var ts []int64
	store.ForEachEdge(0, hi, func(src graph.NodeID, e graph.Edge) bool {
		if usable(src, e) {
			ts = append(ts, e.TS)
		}
		return true
	})
	v := &validationSet{}
	if len(ts) == 0 {
		return v
	}
	slices.Sort(ts)
	split := ts[min(len(ts)-1, int(float64(len(ts))*(1-frac)))]
	v.asOf = split - 1
	rng := rand.New(rand.NewPCG(seed, 0x5e41))
	n := 0
	store.ForEachEdge(split, hi, func(src graph.NodeID, e graph.Edge) bool {
		if !usable(src, e) {
			return true
		}
		n++
		if len(v.src) < maxPairs { // reservoir sample of maxPairs events
			v.src = append(v.src, src)
			v.pos = append(v.pos, e.Nbr)
		} else if j := rng.IntN(n); j < maxPairs {
			v.src[j], v.pos[j] = src, e.Nbr
		}
		return true
	})
	for _, p := range v.pos {
		k := store.NumNodes(p.Type)
		v.neg = append(v.neg, graph.NodeID{Type: p.Type, Idx: uint32(rng.IntN(max(k, 1)))})
	}
	return v
}

// auc scores the set with m: the AUC of dot(src, pos) against dot(src, neg).
// It is NaN for an empty set.
func (v *validationSet) auc(ctx context.Context, m *model.Model, store *graph.Store) (float64, error) {
	if len(v.src) == 0 {
		return math.NaN(), nil
	}
	all := slices.Concat(v.src, v.pos, v.neg)
	vecs, err := m.Embed(ctx, store, all, v.asOf)
	if err != nil {
		return 0, err
	}
	n := len(v.src)
	scores := make([]float64, 0, 2*n)
	labels := make([]bool, 0, 2*n)
	for i := range n {
		scores = append(scores, float64(index.Dot(vecs[i], vecs[n+i])), float64(index.Dot(vecs[i], vecs[2*n+i])))
		labels = append(labels, true, false)
	}
	return model.AUC(scores, labels), nil
}
