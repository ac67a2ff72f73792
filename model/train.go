package model

import (
	gocontext "context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"time"

	G "github.com/gomlx/gomlx/pkg/core/graph" // aliased: the project has its own graph package
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	"github.com/hir-ads/hir/graph"
)

// LossWeights weighs the training losses.
type LossWeights struct {
	Distill    float64 `json:"distill"`    // cross-view distillation, per level
	Hierarchy  float64 `json:"hierarchy"`  // coarse = sum of children consistency
	Engagement float64 `json:"engagement"` // edge existence prediction
	Align      float64 `json:"align"`      // in-batch contrastive alignment of engaged pairs
	// ColdAlign is the same alignment across views: each side of a pair in
	// its student view (often the anchor alone, see
	// graph.ViewOptions.AnchorOnly) against the other in its teacher view,
	// so that a new user or ad is placed from its content next to what it
	// will engage with.
	ColdAlign float64 `json:"cold_align"`
}

// LogQ is whether training corrects its alignment losses for how their
// candidates were sampled (TrainConfig.LogQ); its zero value selects the
// default, LogQOn.
type LogQ int

// Settings of TrainConfig.LogQ.
const (
	LogQOff LogQ = -1
	LogQOn  LogQ = 1
)

// on reports whether the correction applies (any positive setting).
func (q LogQ) on() bool { return q > 0 }

// TrainConfig configures Train. Zero fields take defaults (see WithDefaults).
type TrainConfig struct {
	Model   Config               `json:"model"`
	Sampler graph.SamplerOptions `json:"sampler"`
	Loss    LossWeights          `json:"loss"`

	Steps        int     `json:"steps"`         // optimisation steps of this run (default DefaultSteps)
	Pairs        int     `json:"pairs"`         // engagement events per step; anchors per step = 3*Pairs (default 64)
	LearningRate float64 `json:"learning_rate"` // AdamW (default 5e-3)
	WeightDecay  float64 `json:"weight_decay"`  // AdamW (default 1e-4)
	Seed         uint64  `json:"seed"`          // everything random derives from it (default 1)
	ValFraction  float64 `json:"val_fraction"`  // last fraction of the events (by time) held out (default 0.1)
	BlockSteps   int     `json:"block_steps"`   // steps per time block; shuffling stays inside a block (default 16)
	ValPairs     int     `json:"val_pairs"`     // validation events evaluated (default 4*Pairs)
	EvalEvery    int     `json:"eval_every"`    // validation every N steps besides the end (default 0: only at the end)
	LogEvery     int     `json:"log_every"`     // progress line every N steps (default 10)
	// Negatives is the size of the queue of recent destination embeddings
	// (MoCo style, no gradient) that the retrieval loss scores besides the
	// batch's own destinations, with a log-popularity correction; the queue
	// replaces the P random nodes a step otherwise encodes as negatives.
	// 0 or negative (the default): no queue; random nodes and the plain
	// in-batch alignment loss. 1024 was measured (docs/evaluation-log.md).
	Negatives int `json:"negatives"`
	// LogQ, LogQOn (the default), corrects the in-batch alignment losses
	// for how their candidates were sampled (see alignLoss), so that
	// embeddings keep popularity; LogQOff: uncorrected.
	LogQ    LogQ `json:"logq"`
	Workers int  `json:"workers"` // sampler goroutines (default 2)
	Queue   int  `json:"queue"`   // batches prepared ahead (default 4)
	// SnapshotEvery, when > 0, also writes a version every that many steps
	// before the last (for quality-against-training-time curves).
	SnapshotEvery int  `json:"snapshot_every,omitempty"`
	Synchronous   bool `json:"synchronous"` // sample on the training goroutine (benchmark baseline)
	Resume        bool `json:"resume"`      // continue from the latest version in the data dir
	// Candidate writes the final version as a candidate that [Accept]
	// publishes or [Discard] removes (a round that validates before it
	// serves); until accepted, LatestVersionDir and Resume ignore it.
	Candidate bool `json:"-"`

	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger `json:"-"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c TrainConfig) WithDefaults() TrainConfig {
	c.Model = c.Model.WithDefaults()
	set := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	set(&c.Steps, DefaultSteps)
	set(&c.Pairs, 64)
	set(&c.BlockSteps, 16)
	set(&c.ValPairs, 4*c.Pairs)
	set(&c.LogEvery, 10)
	set(&c.Workers, 2)
	set(&c.Queue, 4)
	if c.LogQ == 0 {
		c.LogQ = LogQOn
	}
	if c.Negatives > 0 {
		c.Negatives = max(c.Negatives, c.Pairs) // a step pushes Pairs rows
	}
	if c.LearningRate <= 0 {
		c.LearningRate = 5e-3
	}
	if c.Sampler.Teacher.MaxNodes <= 0 {
		c.Sampler.Teacher.MaxNodes = defaultTeacherNodes
	}
	if c.WeightDecay < 0 {
		c.WeightDecay = 0
	} else if c.WeightDecay == 0 {
		c.WeightDecay = 1e-4
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.ValFraction <= 0 || c.ValFraction >= 1 {
		c.ValFraction = 0.1
	}
	if c.Loss == (LossWeights{}) {
		c.Loss = LossWeights{Distill: 1, Hierarchy: 0.5, Engagement: 1, Align: 2, ColdAlign: 2}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// DefaultSteps is the default length of a training run: on MovieLens-100K
// and on a 5k-user / 10k-ad synthetic world it takes under 3 minutes on 2
// cores (docs/evaluation-log.md, "Anchors alone at one token").
const DefaultSteps = 180

// defaultTeacherNodes is the teacher view's default subgraph size in
// training (the sampler's own default is 32): half the tokens for about
// 1.5x the steps per second, at equal quality per step on the validation
// windows (docs/evaluation-log.md).
const defaultTeacherNodes = 16

// trainer holds the state of one training run.
type trainer struct {
	cfg     TrainConfig
	store   *graph.Store
	sampler *graph.Sampler
	feat    *featurizer
	train   []event // shuffled within blocks per epoch, see eventsForStep
	val     []event
	splitTS int64
	// dstCount counts the training events of each destination (see
	// logSampling).
	dstCount map[graph.NodeID]int
	// shift offsets step numbers in the block schedule so that a run ends
	// on the newest block (see endOnNewest).
	shift int
}

// Train trains the encoder on the events of store and writes a new version
// DIR/models/vN under dataDir (a candidate with cfg.Candidate), reporting
// each logged window's metrics to prog (nil: none). With cfg.Resume it continues
// from the latest version's weights and optimizer state. Cancelling ctx stops
// training between steps and returns ctx.Err() without writing a version.
func Train(ctx gocontext.Context, store *graph.Store, cfg TrainConfig, dataDir string, prog Progress) (*Checkpoint, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Model.Validate(); err != nil {
		return nil, err
	}
	if cfg.Candidate && cfg.SnapshotEvery > 0 {
		return nil, fmt.Errorf("%w: a candidate round writes no intermediate snapshots", ErrBadConfig)
	}
	RegisterFastDotGradients()
	be, err := Backend()
	if err != nil {
		return nil, err
	}
	tr := &trainer{cfg: cfg, store: store, sampler: graph.NewSampler(store, cfg.Sampler)}
	cfg.Sampler = tr.sampler.Options()
	tr.cfg.Sampler = cfg.Sampler
	if tr.feat, err = newFeaturizer(cfg.Model); err != nil {
		return nil, err
	}
	if err := tr.loadEvents(); err != nil {
		return nil, err
	}
	tr.countDestinations()

	mctx := newModelContext(int64(cfg.Seed))
	startStep := 0
	var prevSpec *spectralTable // the resumed version's
	if cfg.Resume {
		dir, err := LatestVersionDir(dataDir)
		if err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		cc, err := readCheckpointConfig(dir)
		if err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		// The spectral factors are not the encoder's (they are refitted
		// and appended): a run may add, drop or resize them.
		if !slices.Equal(cc.Model.Prototypes, cfg.Model.Prototypes) || cc.Model.Dim != cfg.Model.Dim ||
			cc.Model.EmbedDim != cfg.Model.EmbedDim || cc.Model.Layers != cfg.Model.Layers || cc.Model.IDRows != cfg.Model.IDRows ||
			cc.Model.Activity != cfg.Model.Activity || cc.Model.History != cfg.Model.History {
			return nil, fmt.Errorf("resume from %s: %w: model config differs", dir, ErrBadConfig)
		}
		if err := loadVariables(mctx, filepath.Join(dir, FileWeights)); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if err := loadVariables(mctx, filepath.Join(dir, FileOptimizer)); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if cfg.Model.Spectral > 0 && cc.Model.Spectral == cfg.Model.Spectral {
			if prevSpec, err = readSpectral(filepath.Join(dir, FileSpectral), cfg.Model.Spectral, cfg.Model.EmbedDim); err != nil {
				return nil, fmt.Errorf("resume: %w", err)
			}
		}
		var m TrainMetrics
		if err := readJSON(filepath.Join(dir, FileMetrics), &m); err == nil {
			startStep = m.GlobalStep
		}
	}

	var spec *spectralTable
	var specSeconds float64
	if cfg.Model.Spectral > 0 {
		t0 := time.Now()
		if spec, err = fitSpectral(ctx, store, tr.sampler, cfg.Model.spectralFit(), store.MaxTS(), cfg.Seed, prevSpec,
			tr.feat.contentBuckets(store), tr.feat.adKeysOf(store)); err != nil {
			return nil, err
		}
		specSeconds = time.Since(t0).Seconds()
		cfg.Logger.Info("spectral factors", "ads", len(spec.IDs), "k", spec.K, "seconds", specSeconds)
	}

	opt := optimizers.Adam().LearningRate(cfg.LearningRate).WeightDecay(cfg.WeightDecay).Done()
	mc, lw := cfg.Model, cfg.Loss
	trainExec, err := context.NewExec(be, mctx, func(ctx *context.Context, in []*G.Node) []*G.Node {
		total, outs := lossGraph(ctx, mc, lw, max(cfg.Negatives, 0), cfg.LogQ.on(), in, true)
		opt.UpdateGraph(ctx, total.Graph(), total)
		return outs
	})
	if err != nil {
		return nil, fmt.Errorf("build train step: %w", err)
	}
	evalExec, err := context.NewExec(be, mctx, func(ctx *context.Context, in []*G.Node) []*G.Node {
		_, outs := lossGraph(ctx, mc, lw, max(cfg.Negatives, 0), cfg.LogQ.on(), in, false)
		return outs
	})
	if err != nil {
		return nil, fmt.Errorf("build eval step: %w", err)
	}

	start := time.Now()
	metrics := TrainMetrics{TrainEvents: len(tr.train), ValEvents: len(tr.val), SplitTS: tr.splitTS, SpectralSeconds: specSeconds}
	if spec != nil {
		metrics.SpectralAds = len(spec.IDs)
	}
	if prog == nil {
		prog = noProgress{}
	}
	L := len(mc.Prototypes)
	usage := make([][]int, L)
	for l := range usage {
		usage[l] = make([]int, mc.Prototypes[l])
	}
	var acc StepMetrics
	accN := 0
	lastLog := time.Now()
	anchorsSinceLog := 0

	tr.endOnNewest(startStep + cfg.Steps)
	nextBatch, stop := tr.loader(ctx, startStep, startStep+cfg.Steps)
	defer stop()
	for s := startStep; s < startStep+cfg.Steps; s++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sb := nextBatch()
		if sb == nil {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("train step %d: loader stopped", s)
		}
		if sb.err != nil {
			return nil, fmt.Errorf("prepare step %d: %w", s, sb.err)
		}
		outs, err := trainExec.Exec(anySlice(sb.inputs)...)
		if err != nil {
			return nil, fmt.Errorf("train step %d: %w", s, err)
		}
		sm := readStepOutputs(outs, L)
		if math.IsNaN(sm.Total) || math.IsInf(sm.Total, 0) {
			return nil, fmt.Errorf("train step %d: loss is %v", s, sm.Total)
		}
		for l := range L {
			for _, k := range tensors.MustCopyFlatData[int32](outs[outFirstDistill+L+l]) {
				usage[l][k]++
			}
		}
		accumulate(&acc, sm, &accN)
		anchorsSinceLog += tr.anchorsPerStep()
		step := s + 1
		evaluate := step == startStep+cfg.Steps || (cfg.EvalEvery > 0 && step%cfg.EvalEvery == 0)
		if step%cfg.LogEvery == 0 || evaluate {
			rec := average(acc, accN)
			rec.Step = step
			rec.UsageEntropy = make([]float64, L)
			for l := range L {
				rec.UsageEntropy[l] = usageEntropy(usage[l])
				clear(usage[l])
			}
			rec.AnchorsPerS = float64(anchorsSinceLog) / time.Since(lastLog).Seconds()
			if evaluate {
				vm, err := tr.validate(evalExec)
				if err != nil {
					return nil, err
				}
				rec.Validation = vm
				metrics.Validation = vm
			}
			if metrics.First == nil {
				r := rec
				metrics.First = &r
			}
			metrics.History = append(metrics.History, rec)
			prog.Step(rec)
			cfg.Logger.Debug("train step", "step", step, "loss", rec.Total)
			acc, accN, anchorsSinceLog, lastLog = StepMetrics{}, 0, 0, time.Now()
		}
		if cfg.SnapshotEvery > 0 && step%cfg.SnapshotEvery == 0 && step < startStep+cfg.Steps {
			snap := metrics
			snap.Steps, snap.GlobalStep, snap.Seconds = step-startStep, step, time.Since(start).Seconds()
			snap.AnchorsPerS = float64(tr.anchorsPerStep()*(step-startStep)) / snap.Seconds
			if _, err := writeVersion(mctx, tr.cfg, spec, dataDir, snap); err != nil {
				return nil, fmt.Errorf("snapshot at step %d: %w", step, err)
			}
		}
	}
	prog.Done()
	metrics.Steps = cfg.Steps
	metrics.GlobalStep = startStep + cfg.Steps
	metrics.Seconds = time.Since(start).Seconds()
	metrics.AnchorsPerS = float64(tr.anchorsPerStep()*cfg.Steps) / metrics.Seconds
	if n := len(metrics.History); n > 0 {
		last := metrics.History[n-1]
		metrics.Last = &last
	}
	if spec != nil {
		t0 := time.Now()
		if err := tr.fitSpectralPredictor(ctx, mctx, spec); err != nil {
			return nil, err
		}
		metrics.SpectralSeconds += time.Since(t0).Seconds()
	}
	return writeVersion(mctx, tr.cfg, spec, dataDir, metrics)
}

// fitSpectralPredictor fits spec's predictor of a new ad's factors
// (fitSpectralPredictor) on the trained encoder, embedding natively.
func (tr *trainer) fitSpectralPredictor(ctx gocontext.Context, mctx *context.Context, spec *spectralTable) error {
	ne, err := newNativeEncoder(mctx, tr.cfg.Model)
	if err != nil {
		return fmt.Errorf("spectral predictor: %w", err)
	}
	return fitPredictorNative(ctx, spec, tr.store, tr.sampler, tr.feat, ne, tr.cfg.Model, tr.cfg.Seed)
}

// fitPredictorNative fits spec's predictor (fitSpectralPredictor) with the
// encoder ne of the model cfg, embedding natively with featurizer feat.
func fitPredictorNative(ctx gocontext.Context, spec *spectralTable, store *graph.Store, sm *graph.Sampler, feat *featurizer,
	ne *nativeEncoder, cfg Config, seed uint64) error {
	enc := &Model{feat: feat, native: ne}
	enc.cfg.Model = cfg
	enc.cfg.Model.Spectral = -1 // the encoder's coordinates only
	embed := func(sgs []*graph.Subgraph) ([][]float32, error) {
		return enc.embedNative(ctx, func(int) Entities { return store }, sgs)
	}
	return fitSpectralPredictor(ctx, spec, store, sm, cfg.EmbedDim, seed, embed)
}

// anchorsPerStep is the number of subgraphs a step encodes in each view.
func (tr *trainer) anchorsPerStep() int {
	if tr.cfg.Negatives > 0 {
		return 2 * tr.cfg.Pairs
	}
	return 3 * tr.cfg.Pairs
}
