package main

import (
	"context"
	"encoding/json"
	"flag"
	"sync"

	"github.com/hir-ads/hir/model"
)

func runTrain(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "train", "--data DIR [--steps N] [--seed S] [--asof T] [--resume]")
	data := fs.String("data", "", "data directory (required)")
	asOfFlag := fs.String("asof", "", "train on events up to this time (unix ms or RFC 3339); default all")
	cfg := model.TrainConfig{}
	fs.IntVar(&cfg.Steps, "steps", model.DefaultSteps, "optimisation steps")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed; the same seed and data give identical weights")
	fs.BoolVar(&cfg.Resume, "resume", false, "continue from the latest checkpoint")
	trainFlags(fs, &cfg)
	fs.BoolVar(&cfg.Synchronous, "sync", false, "sample on the training goroutine (no pipelined loader)")
	calibrate := fs.Bool("calibrate", true, "calibrate the version's new-ad scale and engagement-prior weight for serving on the events after the trainer's split (retrieval.Calibrate)")
	debugAddr := fs.String("debug-addr", "", "serve Go's profiles (net/http/pprof, /debug/pprof/) on this address while training, e.g. 127.0.0.1:6060 (empty: off; unauthenticated, keep it on loopback)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "data"); err != nil {
		return err
	}
	if *debugAddr != "" {
		ln, err := listenDebug(*debugAddr, e.logger)
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		dctx, stop := context.WithCancel(ctx)
		defer stop()
		wg.Go(func() { serveDebug(dctx, ln, e.logger) })
	}
	store, err := loadGraphAsOf(ctx, *data, *asOfFlag, e.logger)
	if err != nil {
		return err
	}
	cfg.Logger = e.logger
	ck, err := model.Train(ctx, store, cfg, *data, trainProgress(e.stderr, cfg.WithDefaults().Steps))
	if err != nil {
		return err
	}
	out := map[string]any{"version": ck.Version, "dir": ck.Dir, "metrics": ck.Metrics}
	if *calibrate {
		c, err := calibrateDefault(ctx, ck, store, e.logger)
		if err != nil {
			return err
		}
		if c != nil {
			out["calibration"] = c
		}
	}
	return json.NewEncoder(e.stdout).Encode(out)
}

// trainFlags registers the model and training flags that `hir train` and
// `hir eval` share.
func trainFlags(fs *flag.FlagSet, cfg *model.TrainConfig) {
	fs.IntVar(&cfg.Pairs, "pairs", 0, "engagement events per step (0: default)")
	fs.IntVar(&cfg.EvalEvery, "eval-every", 0, "also compute the validation losses and AUC every N steps (0: only at the end, the default)")
	fs.Float64Var(&cfg.LearningRate, "lr", 0, "AdamW learning rate (0: default)")
	fs.IntVar(&cfg.Negatives, "negatives", 0, "size of the queue of earlier ad embeddings in the retrieval loss, which replaces the random negative anchors (0: none, the default)")
	fs.IntVar(&cfg.Model.IDRows, "id-rows", 0, "rows of the per-id hashed embedding table (0: default, none)")
	fs.IntVar(&cfg.Model.History, "history", 0, "newest engaged neighbours whose content is pooled into the anchor's token (0: default, 32; -1 off)")
	fs.IntVar(&cfg.Model.Spectral, "spectral", 0, "spectral factors appended to every embedding: an ad's co-engagement eigenvector coordinates, a user's fold-in of its history's (0: default, 128; -1 off)")
	fs.Float64Var(&cfg.Model.SpectralWeight, "spectral-weight", 0, "weight of the appended spectral factors (0: default, 2)")
	fs.Float64Var(&cfg.Model.SpectralHalfLifeDays, "spectral-half-life", 0, "half-life in days of an engagement's weight in the matrix the spectral factors factorise (0: default, 21; negative: no decay)")
	fs.Float64Var(&cfg.Model.SpectralProfileDays, "spectral-profile-days", 0, "half-life in days of a user's weight in the profile factors by how long before the fit it arrived, so that a new visitor reads what recently arrived users of its profile engage with (0: default, 7; negative: every user alike)")
	fs.IntVar(&cfg.Model.SpectralProfile, "spectral-profile", 0, "a user with no history gets spectral factors from its profile's attribute values and words, each read from the users with a history that share it when at least this many do (0: default, 20; negative: off)")
	fs.Float64Var(&cfg.Model.SpectralContent, "spectral-content", 0, "weight of an ad's content (text and attribute buckets) in the matrix the spectral factors factorise, against 1 for a click; every ad with content gets factors, a new one from its content alone (0: default, off; negative: off)")
	fs.IntVar((*int)(&cfg.Model.Activity), "activity", 0, "the anchor's engagement counts as encoder inputs: 2 a per-type popularity coordinate (0: default, 2), 1 the counts in the anchor's token and a shared popularity coordinate, -1 off")
	fs.IntVar((*int)(&cfg.LogQ), "logq", 0, "correct the in-batch alignment losses for how candidates are sampled, so embeddings keep popularity: 1 on (0: default, on), -1 off")
	fs.IntVar(&cfg.Sampler.Teacher.MaxNodes, "teacher-nodes", 0, "tokens of the teacher view's subgraphs (0: default)")
	fs.Float64Var(&cfg.Sampler.Student.AnchorOnly, "anchor-only", 0, "share of the student views that are the anchor alone, the cold-start simulation (0: default 0.25; negative: none)")
	fs.Float64Var(&cfg.Loss.Distill, "loss-distill", 0, "weight of the cross-view distillation loss (all five 0: defaults)")
	fs.Float64Var(&cfg.Loss.Hierarchy, "loss-hierarchy", 0, "weight of the hierarchy consistency loss")
	fs.Float64Var(&cfg.Loss.Engagement, "loss-engagement", 0, "weight of the engagement prediction loss")
	fs.Float64Var(&cfg.Loss.Align, "loss-align", 0, "weight of the in-batch contrastive alignment loss")
	fs.Float64Var(&cfg.Loss.ColdAlign, "loss-cold-align", 0, "weight of the cross-view alignment loss (student view, often the anchor alone, against teacher view)")
	fs.Float64Var(&cfg.Model.AlignTemp, "align-temp", 0, "temperature of the alignment losses' dot products (0: default 0.1)")
	fs.Float64Var(&cfg.Model.ProtoMomentum, "proto-momentum", 0, "prototypes move as a moving average of their assigned embeddings with this momentum (0: default 0.9; negative: learnt by gradient)")
}
