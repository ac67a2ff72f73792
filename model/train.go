package model

import (
	"cmp"
	gocontext "context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

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

// TrainConfig configures Train. Zero fields take defaults (see WithDefaults).
type TrainConfig struct {
	Model   Config               `json:"model"`
	Sampler graph.SamplerOptions `json:"sampler"`
	Loss    LossWeights          `json:"loss"`

	Steps        int     `json:"steps"`         // optimisation steps of this run (default 300)
	Pairs        int     `json:"pairs"`         // engagement events per step; anchors per step = 3*Pairs (default 64)
	LearningRate float64 `json:"learning_rate"` // AdamW (default 2e-3)
	WeightDecay  float64 `json:"weight_decay"`  // AdamW (default 1e-4)
	Seed         uint64  `json:"seed"`          // everything random derives from it (default 1)
	ValFraction  float64 `json:"val_fraction"`  // last fraction of the events (by time) held out (default 0.1)
	BlockSteps   int     `json:"block_steps"`   // steps per time block; shuffling stays inside a block (default 16)
	ValPairs     int     `json:"val_pairs"`     // validation events evaluated (default 4*Pairs)
	EvalEvery    int     `json:"eval_every"`    // validation every N steps, and at the end (default 100)
	LogEvery     int     `json:"log_every"`     // progress line every N steps (default 10)
	Workers      int     `json:"workers"`       // sampler goroutines (default 2)
	Queue        int     `json:"queue"`         // batches prepared ahead (default 4)
	Synchronous  bool    `json:"synchronous"`   // sample on the training goroutine (benchmark baseline)
	Resume       bool    `json:"resume"`        // continue from the latest version in the data dir

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
	set(&c.Steps, 300)
	set(&c.Pairs, 64)
	set(&c.BlockSteps, 16)
	set(&c.ValPairs, 4*c.Pairs)
	set(&c.EvalEvery, 100)
	set(&c.LogEvery, 10)
	set(&c.Workers, 2)
	set(&c.Queue, 4)
	if c.LearningRate <= 0 {
		c.LearningRate = 2e-3
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
		c.Loss = LossWeights{Distill: 1, Hierarchy: 0.5, Engagement: 1, Align: 1, ColdAlign: 0.5}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// StepMetrics is one progress record (a JSON line when not on a terminal).
type StepMetrics struct {
	Step       int       `json:"step"`
	Total      float64   `json:"loss"`
	Distill    []float64 `json:"distill"`
	Hierarchy  float64   `json:"hierarchy"`
	Engagement float64   `json:"engagement"`
	Align      float64   `json:"align"`
	ColdAlign  float64   `json:"cold_align"`
	// UsageEntropy is, per level, the entropy of the teacher's hard cluster
	// usage over the last LogEvery steps, divided by log(K): 1 is uniform.
	UsageEntropy []float64   `json:"usage_entropy"`
	AnchorsPerS  float64     `json:"anchors_per_s"`
	Validation   *ValMetrics `json:"validation,omitempty"`
}

// ValMetrics are the losses on the validation window and the engagement AUC.
type ValMetrics struct {
	Total      float64   `json:"loss"`
	Distill    []float64 `json:"distill"`
	Hierarchy  float64   `json:"hierarchy"`
	Engagement float64   `json:"engagement"`
	Align      float64   `json:"align"`
	ColdAlign  float64   `json:"cold_align"`
	AUC        float64   `json:"engagement_auc"`
	Pairs      int       `json:"pairs"`
}

// TrainMetrics summarise a run; they are stored in metrics.json.
type TrainMetrics struct {
	Version     string        `json:"version"`
	GlobalStep  int           `json:"global_step"`
	Steps       int           `json:"steps"`
	TrainEvents int           `json:"train_events"`
	ValEvents   int           `json:"val_events"`
	SplitTS     int64         `json:"split_ts"`
	Seconds     float64       `json:"seconds"`
	AnchorsPerS float64       `json:"anchors_per_s"`
	First       *StepMetrics  `json:"first,omitempty"`
	Last        *StepMetrics  `json:"last,omitempty"`
	Validation  *ValMetrics   `json:"validation,omitempty"`
	History     []StepMetrics `json:"history,omitempty"`
}

// event is one engagement edge used for training.
type event struct {
	src, dst graph.NodeID
	typ      graph.EdgeType
	ts       int64
}

// stepBatch is everything one step feeds the graph.
type stepBatch struct {
	step    int
	inputs  []*tensors.Tensor
	labels  []float32
	weights []float32
	err     error
}

// trainer holds the state of one training run.
type trainer struct {
	cfg     TrainConfig
	store   *graph.Store
	sampler *graph.Sampler
	feat    *featurizer
	train   []event // shuffled within blocks per epoch, see eventsForStep
	val     []event
	splitTS int64
	// shift offsets step numbers in the block schedule so that a run ends
	// on the newest block (see endOnNewest).
	shift int
}

// Train trains the encoder on the events of store and writes a new version
// DIR/models/vN under dataDir. Progress goes to logw: a progress bar when it is
// a terminal, JSON lines (StepMetrics) otherwise. With cfg.Resume it continues
// from the latest version's weights and optimizer state. Cancelling ctx stops
// training between steps and returns ctx.Err() without writing a version.
func Train(ctx gocontext.Context, store *graph.Store, cfg TrainConfig, dataDir string, logw io.Writer) (*Checkpoint, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Model.Validate(); err != nil {
		return nil, err
	}
	if logw == nil {
		logw = io.Discard
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

	mctx := newModelContext(int64(cfg.Seed))
	startStep := 0
	if cfg.Resume {
		dir, err := LatestVersionDir(dataDir)
		if err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		var cc CheckpointConfig
		if err := readJSON(filepath.Join(dir, FileConfig), &cc); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if !slices.Equal(cc.Model.Prototypes, cfg.Model.Prototypes) || cc.Model.Dim != cfg.Model.Dim ||
			cc.Model.EmbedDim != cfg.Model.EmbedDim || cc.Model.Layers != cfg.Model.Layers {
			return nil, fmt.Errorf("resume from %s: %w: model config differs", dir, ErrBadConfig)
		}
		if err := loadVariables(mctx, filepath.Join(dir, FileWeights)); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if err := loadVariables(mctx, filepath.Join(dir, FileOptimizer)); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		var m TrainMetrics
		if err := readJSON(filepath.Join(dir, FileMetrics), &m); err == nil {
			startStep = m.GlobalStep
		}
	}

	opt := optimizers.Adam().LearningRate(cfg.LearningRate).WeightDecay(cfg.WeightDecay).Done()
	mc, lw := cfg.Model, cfg.Loss
	trainExec, err := context.NewExec(be, mctx, func(ctx *context.Context, in []*Node) []*Node {
		total, outs := lossGraph(ctx, mc, lw, in, true)
		opt.UpdateGraph(ctx, total.Graph(), total)
		return outs
	})
	if err != nil {
		return nil, fmt.Errorf("build train step: %w", err)
	}
	evalExec, err := context.NewExec(be, mctx, func(ctx *context.Context, in []*Node) []*Node {
		_, outs := lossGraph(ctx, mc, lw, in, false)
		return outs
	})
	if err != nil {
		return nil, fmt.Errorf("build eval step: %w", err)
	}

	start := time.Now()
	metrics := TrainMetrics{TrainEvents: len(tr.train), ValEvents: len(tr.val), SplitTS: tr.splitTS}
	prog := newProgress(logw, cfg.Steps)
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
		anchorsSinceLog += 3 * cfg.Pairs
		step := s + 1
		if step%cfg.LogEvery == 0 || step == startStep+cfg.Steps || step%cfg.EvalEvery == 0 {
			rec := average(acc, accN)
			rec.Step = step
			rec.UsageEntropy = make([]float64, L)
			for l := range L {
				rec.UsageEntropy[l] = usageEntropy(usage[l])
				clear(usage[l])
			}
			rec.AnchorsPerS = float64(anchorsSinceLog) / time.Since(lastLog).Seconds()
			if step%cfg.EvalEvery == 0 || step == startStep+cfg.Steps {
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
			prog.report(rec)
			cfg.Logger.Debug("train step", "step", step, "loss", rec.Total)
			acc, accN, anchorsSinceLog, lastLog = StepMetrics{}, 0, 0, time.Now()
		}
	}
	prog.finish()
	metrics.Steps = cfg.Steps
	metrics.GlobalStep = startStep + cfg.Steps
	metrics.Seconds = time.Since(start).Seconds()
	metrics.AnchorsPerS = float64(3*cfg.Pairs*cfg.Steps) / metrics.Seconds
	if n := len(metrics.History); n > 0 {
		last := metrics.History[n-1]
		metrics.Last = &last
	}
	return writeVersion(mctx, tr.cfg, dataDir, metrics)
}

func anySlice(ts []*tensors.Tensor) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}

func scalarOf(t *tensors.Tensor) float64 {
	switch v := t.Value().(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	return math.NaN()
}

func readStepOutputs(outs []*tensors.Tensor, levels int) StepMetrics {
	sm := StepMetrics{Total: scalarOf(outs[outTotal]), Engagement: scalarOf(outs[outEngage]),
		Hierarchy: scalarOf(outs[outHier]), Align: scalarOf(outs[outAlign]), ColdAlign: scalarOf(outs[outColdAlign]),
		Distill: make([]float64, levels)}
	for l := range levels {
		sm.Distill[l] = scalarOf(outs[outFirstDistill+l])
	}
	return sm
}

func accumulate(acc *StepMetrics, sm StepMetrics, n *int) {
	acc.Total += sm.Total
	acc.Engagement += sm.Engagement
	acc.Hierarchy += sm.Hierarchy
	acc.Align += sm.Align
	acc.ColdAlign += sm.ColdAlign
	if acc.Distill == nil {
		acc.Distill = make([]float64, len(sm.Distill))
	}
	for i, d := range sm.Distill {
		acc.Distill[i] += d
	}
	*n++
}

func average(acc StepMetrics, n int) StepMetrics {
	if n == 0 {
		return acc
	}
	f := 1 / float64(n)
	out := StepMetrics{Total: acc.Total * f, Engagement: acc.Engagement * f, Hierarchy: acc.Hierarchy * f, Align: acc.Align * f,
		ColdAlign: acc.ColdAlign * f}
	for _, d := range acc.Distill {
		out.Distill = append(out.Distill, d*f)
	}
	return out
}

// usageEntropy is the entropy of counts divided by log(len(counts)).
func usageEntropy(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	if total == 0 || len(counts) < 2 {
		return 0
	}
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(total)
			h -= p * math.Log(p)
		}
	}
	return h / math.Log(float64(len(counts)))
}

// loadEvents collects the engagement events and splits them by time.
func (tr *trainer) loadEvents() error {
	var all, weak []event
	tr.store.ForEachEdge(tr.store.MinTS(), tr.store.MaxTS()+1, func(src graph.NodeID, e graph.Edge) bool {
		ev := event{src: src, dst: e.Nbr, typ: e.Type, ts: e.TS}
		switch {
		case e.Type.IsPositive() || e.Type.IsNegative():
			all = append(all, ev)
		case e.Type == graph.EdgeImpression:
			weak = append(weak, ev)
		}
		return true
	})
	if len(all) == 0 {
		all = weak // impressions only: better than nothing
	}
	if len(all) < 2*tr.cfg.Pairs {
		return fmt.Errorf("load events: %w: %d engagement events, want >= %d", ErrNoData, len(all), 2*tr.cfg.Pairs)
	}
	slices.SortFunc(all, func(a, b event) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.src.Type, b.src.Type), cmp.Compare(a.src.Idx, b.src.Idx),
			cmp.Compare(a.dst.Type, b.dst.Type), cmp.Compare(a.dst.Idx, b.dst.Idx), cmp.Compare(a.typ, b.typ))
	})
	cut := int(float64(len(all)) * (1 - tr.cfg.ValFraction))
	cut = max(cut, tr.cfg.Pairs)
	// Keep equal timestamps on one side of the split.
	for cut < len(all) && cut > 0 && all[cut].ts == all[cut-1].ts {
		cut++
	}
	tr.train, tr.val = all[:cut], all[cut:]
	if cut < len(all) {
		tr.splitTS = all[cut].ts
	} else {
		tr.splitTS = all[len(all)-1].ts + 1
	}
	return nil
}

// seedFor derives a deterministic seed from the run seed and some integers.
func seedFor(seed uint64, parts ...uint64) uint64 {
	x := seed ^ 0x9e3779b97f4a7c15
	for _, p := range parts {
		x ^= p + 0x9e3779b97f4a7c15 + (x << 6) + (x >> 2)
		x ^= x >> 31
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 29
	}
	return x
}

// schedule returns the length in events of a time block and the steps of
// an epoch (every block once).
func (tr *trainer) schedule() (blockLen, epochSteps int) {
	P := tr.cfg.Pairs
	blockLen = tr.cfg.BlockSteps * P
	n := len(tr.train)
	blocks := max(1, n/blockLen)
	epochSteps = max(1, (blocks*blockLen)/P)
	if n < blockLen {
		blockLen = n - n%P
		epochSteps = max(1, n/P)
	}
	return blockLen, epochSteps
}

// endOnNewest sets the schedule's offset so that the step before end is
// the last step of an epoch: a run shorter than an epoch trains on the
// newest blocks, and every run, a resumed one too, ends on the newest
// events, which the served model has to be fresh on.
func (tr *trainer) endOnNewest(end int) {
	_, e := tr.schedule()
	tr.shift = (e - end%e) % e
}

// eventsForStep returns the events of a step: the train events are cut into
// time blocks of BlockSteps*Pairs events, from the newest back; each epoch visits the blocks in time
// order and shuffles events only inside a block. Steps are offset by
// tr.shift (endOnNewest).
func (tr *trainer) eventsForStep(step int) (evs []event, asOf int64) {
	P := tr.cfg.Pairs
	n := len(tr.train)
	blockLen, epochSteps := tr.schedule()
	step += tr.shift
	epoch := step / epochSteps
	inEpoch := step % epochSteps
	stepsPerBlock := max(1, blockLen/P)
	block := inEpoch / stepsPerBlock
	// Blocks are cut from the newest event back; the oldest events that
	// do not fill a block are left out.
	lo := n - (epochSteps/stepsPerBlock-block)*blockLen
	hi := lo + blockLen
	idx := make([]int, hi-lo)
	for i := range idx {
		idx[i] = lo + i
	}
	rng := rand.New(rand.NewPCG(seedFor(tr.cfg.Seed, 1, uint64(epoch), uint64(block)), 7))
	rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	off := (inEpoch % stepsPerBlock) * P
	evs = make([]event, P)
	for i := range P {
		evs[i] = tr.train[idx[(off+i)%len(idx)]]
	}
	return evs, tr.train[lo].ts - 1 // the graph as of just before the block
}

// buildStep samples and featurises the batch of the given events.
func (tr *trainer) buildStep(step int, evs []event, asOf int64, salt uint64) *stepBatch {
	P := len(evs)
	rng := rand.New(rand.NewPCG(seedFor(tr.cfg.Seed, salt, uint64(step)), 11))
	anchors := make([]graph.NodeID, 3*P)
	for i, ev := range evs {
		anchors[i] = ev.src
		anchors[P+i] = ev.dst
		nn := tr.store.NumNodes(ev.dst.Type)
		anchors[2*P+i] = graph.NodeID{Type: ev.dst.Type, Idx: uint32(rng.IntN(max(nn, 1)))}
	}
	sb := &stepBatch{step: step}
	teacher := make([]*graph.Subgraph, len(anchors))
	student := make([]*graph.Subgraph, len(anchors))
	for i, a := range anchors {
		teacher[i] = tr.sampler.Sample(a, asOf, graph.ViewTeacher, seedFor(tr.cfg.Seed, salt, uint64(step), uint64(i), 0))
		student[i] = tr.sampler.Sample(a, asOf, graph.ViewStudent, seedFor(tr.cfg.Seed, salt, uint64(step), uint64(i), 1))
	}
	tb, err := tr.feat.featurize(tr.store, teacher, 0)
	if err != nil {
		sb.err = err
		return sb
	}
	stb, err := tr.feat.featurize(tr.store, student, 0)
	if err != nil {
		sb.err = err
		return sb
	}
	n := 3 * P
	src, dst, et, tbk := make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	label, pw := make([]float32, n), make([]float32, n)
	for i, ev := range evs {
		typ, lab := ev.typ, float32(1)
		if typ.IsNegative() {
			typ, lab = graph.EdgeInterested, 0 // explicit negative: never pulls together
		}
		bucket := int32(graph.TimeBucket(ev.ts - asOf))
		for k, d := range []int{P + i, P + (i+1)%P, 2*P + i} {
			j := k*P + i
			src[j], dst[j], et[j], tbk[j] = int32(i), int32(d), int32(typ), bucket
			if k == 0 {
				label[j], pw[j] = lab, 1
			} else {
				label[j], pw[j] = 0, 0.5
			}
		}
	}
	rowW := make([]float32, n)
	for i := range rowW {
		rowW[i] = 1
	}
	mc := tr.cfg.Model
	sb.inputs = append(tb.tensors(mc), stb.tensors(mc)...)
	sb.inputs = append(sb.inputs,
		tensors.FromFlatDataAndDimensions(src, n), tensors.FromFlatDataAndDimensions(dst, n),
		tensors.FromFlatDataAndDimensions(et, n), tensors.FromFlatDataAndDimensions(tbk, n),
		tensors.FromFlatDataAndDimensions(label, n), tensors.FromFlatDataAndDimensions(pw, n),
		tensors.FromFlatDataAndDimensions(rowW, n))
	sb.labels, sb.weights = label, pw
	return sb
}

// loader returns next, which delivers the batches of steps [from, to) in
// order, and stop, which releases the goroutines. In pipelined mode Workers
// goroutines prepare up to Queue batches ahead while the caller trains; in
// synchronous mode next builds each batch on the caller's goroutine. The
// batches are identical in both modes.
func (tr *trainer) loader(ctx gocontext.Context, from, to int) (next func() *stepBatch, stop func()) {
	build := func(s int) *stepBatch {
		evs, asOf := tr.eventsForStep(s)
		return tr.buildStep(s, evs, asOf, 2)
	}
	if tr.cfg.Synchronous {
		s := from
		return func() *stepBatch {
			if s >= to || ctx.Err() != nil {
				return nil
			}
			s++
			return build(s - 1)
		}, func() {}
	}
	out := make(chan *stepBatch)
	done := make(chan struct{})
	var wg sync.WaitGroup
	futures := make(chan chan *stepBatch, tr.cfg.Queue)
	sem := make(chan struct{}, tr.cfg.Workers)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(futures)
		for s := from; s < to; s++ {
			f := make(chan *stepBatch, 1)
			select {
			case futures <- f:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
			select {
			case sem <- struct{}{}:
			case <-done:
				return
			}
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				defer func() { <-sem }()
				f <- build(s)
			}(s)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		for f := range futures {
			var b *stepBatch
			select {
			case b = <-f:
			case <-done:
				return
			}
			select {
			case out <- b:
			case <-done:
				return
			}
		}
	}()
	return func() *stepBatch {
			select {
			case b := <-out:
				return b
			case <-ctx.Done():
				return nil
			}
		}, func() {
			close(done)
			wg.Wait()
		}
}

// validate evaluates the losses and engagement AUC on the validation window,
// with the graph as of the split.
func (tr *trainer) validate(exec *context.Exec) (*ValMetrics, error) {
	if len(tr.val) < tr.cfg.Pairs {
		return nil, nil
	}
	P := tr.cfg.Pairs
	n := min(tr.cfg.ValPairs, len(tr.val)) / P * P
	rng := rand.New(rand.NewPCG(seedFor(tr.cfg.Seed, 3), 5))
	idx := rng.Perm(len(tr.val))[:n]
	slices.Sort(idx)
	L := len(tr.cfg.Model.Prototypes)
	vm := &ValMetrics{Distill: make([]float64, L)}
	var scores []float64
	var labels []bool
	batches := 0
	for b := 0; b+P <= n; b += P {
		evs := make([]event, P)
		for i := range P {
			evs[i] = tr.val[idx[b+i]]
		}
		sb := tr.buildStep(b/P, evs, tr.splitTS-1, 4)
		if sb.err != nil {
			return nil, fmt.Errorf("validation batch: %w", sb.err)
		}
		outs, err := exec.Exec(anySlice(sb.inputs)...)
		if err != nil {
			return nil, fmt.Errorf("validation step: %w", err)
		}
		sm := readStepOutputs(outs, L)
		vm.Total += sm.Total
		vm.Engagement += sm.Engagement
		vm.Hierarchy += sm.Hierarchy
		vm.Align += sm.Align
		vm.ColdAlign += sm.ColdAlign
		for l := range L {
			vm.Distill[l] += sm.Distill[l]
		}
		logits := tensors.MustCopyFlatData[float32](outs[outFirstDistill+2*L])
		for i, lg := range logits {
			if sb.weights[i] > 0 {
				scores = append(scores, float64(lg))
				labels = append(labels, sb.labels[i] > 0.5)
			}
		}
		batches++
	}
	if batches == 0 {
		return nil, nil
	}
	f := 1 / float64(batches)
	vm.Total *= f
	vm.Engagement *= f
	vm.Hierarchy *= f
	vm.Align *= f
	vm.ColdAlign *= f
	for l := range L {
		vm.Distill[l] *= f
	}
	vm.AUC = AUC(scores, labels)
	vm.Pairs = n
	return vm, nil
}

// AUC is the area under the ROC curve of scores for the positive labels
// (ties count one half). It returns NaN without both classes.
func AUC(scores []float64, positive []bool) float64 {
	type sl struct {
		s   float64
		pos bool
	}
	xs := make([]sl, len(scores))
	np := 0
	for i := range scores {
		xs[i] = sl{scores[i], positive[i]}
		if positive[i] {
			np++
		}
	}
	nn := len(xs) - np
	if np == 0 || nn == 0 {
		return math.NaN()
	}
	slices.SortFunc(xs, func(a, b sl) int { return cmp.Compare(a.s, b.s) })
	rankSum := 0.0
	for i := 0; i < len(xs); {
		j := i
		for j < len(xs) && xs[j].s == xs[i].s {
			j++
		}
		avg := float64(i+j+1) / 2 // ranks are 1-based
		for k := i; k < j; k++ {
			if xs[k].pos {
				rankSum += avg
			}
		}
		i = j
	}
	return (rankSum - float64(np)*float64(np+1)/2) / (float64(np) * float64(nn))
}

// writeVersion saves the context as the next version under dataDir.
func writeVersion(mctx *context.Context, cfg TrainConfig, dataDir string, metrics TrainMetrics) (*Checkpoint, error) {
	vs, err := listVersions(dataDir)
	if err != nil {
		return nil, err
	}
	next := 1
	if len(vs) > 0 {
		next = vs[len(vs)-1] + 1
	}
	version := "v" + strconv.Itoa(next)
	metrics.Version = version
	root := filepath.Join(dataDir, modelsDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create models dir: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-"+version+"-")
	if err != nil {
		return nil, fmt.Errorf("create version dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := saveVariables(mctx, filepath.Join(tmp, FileWeights), isModelScope); err != nil {
		return nil, err
	}
	if err := saveVariables(mctx, filepath.Join(tmp, FileOptimizer), func(s string) bool { return !isModelScope(s) }); err != nil {
		return nil, err
	}
	protos, err := readPrototypes(mctx, cfg.Model)
	if err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(tmp, FilePrototypes), protos); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(tmp, FileMetrics), metrics); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(tmp, FileConfig), CheckpointConfig{Version: version, Model: cfg.Model, Train: cfg}); err != nil {
		return nil, err
	}
	dir := filepath.Join(root, version)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("publish %s: %w", version, err)
	}
	return &Checkpoint{Version: version, Dir: dir, Metrics: metrics}, nil
}

// readPrototypes returns the L2-normalised prototypes of every level.
func readPrototypes(mctx *context.Context, c Config) ([][][]float32, error) {
	out := make([][][]float32, len(c.Prototypes))
	for l, k := range c.Prototypes {
		v := mctx.GetVariableByScopeAndName(context.ScopeSeparator+scopePrototypes, fmt.Sprintf("level_%d", l))
		if v == nil {
			return nil, fmt.Errorf("read prototypes level %d: %w: missing", l, ErrCorrupt)
		}
		t, err := v.Value()
		if err != nil {
			return nil, fmt.Errorf("read prototypes level %d: %w", l, err)
		}
		flat := tensors.MustCopyFlatData[float32](t)
		e := c.EmbedDim
		out[l] = make([][]float32, k)
		for i := range k {
			row := slices.Clone(flat[i*e : (i+1)*e])
			normalize(row)
			out[l][i] = row
		}
	}
	return out, nil
}

func normalize(v []float32) {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
}

// progress reports StepMetrics as a bar on a terminal or as JSON lines.
type progress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
	enc *json.Encoder
}

func newProgress(w io.Writer, steps int) *progress {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &progress{w: w, bar: progressbar.NewOptions(steps, progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("train"), progressbar.OptionShowCount(), progressbar.OptionSetWidth(30))}
	}
	return &progress{w: w, enc: json.NewEncoder(w)}
}

func (p *progress) report(m StepMetrics) {
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("loss %.3f engage %.3f", m.Total, m.Engagement))
		_ = p.bar.Set(m.Step)
		return
	}
	_ = p.enc.Encode(m)
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}
