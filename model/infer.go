package model

import (
	gocontext "context"
	"fmt"
	"github.com/gomlx/gomlx/backends/simplego"
	G "github.com/gomlx/gomlx/pkg/core/graph" // aliased: the project has its own graph package
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/hir-ads/hir/graph"
)

// batchBuckets are the batch sizes inference pads to, so that at most one
// graph per bucket (and subgraph size) is compiled.
var batchBuckets = [...]int{1, 2, 4, 8, 16, 32, 64, 128, 256}

// Model is a trained encoder loaded for inference from a checkpoint. It serves
// from its own context, never a training one. Safe for concurrent use.
type Model struct {
	version string
	cfg     CheckpointConfig
	ctx     *context.Context
	exec    *context.Exec
	feat    *featurizer
	native  *nativeEncoder // nil: inference runs exec
	protos  [][][]float32  // [level][k][ServedDim], L2-normalised, zero past EmbedDim
	parents [][]int        // [level][k] parent index in level-1 (nil for level 0)
	calib   *Calibration   // the version's FileCalibration, or nil
}

// Load loads a model version for inference. dir is either a version
// directory (DIR/models/vN) or a data directory, in which case the latest
// version under DIR/models is loaded.
//
// On the pure-Go backend the model embeds with its native forward pass
// (nativeEncoder); on any other backend GoMLX runs the encoder.
func Load(dir string) (*Model, error) {
	be, err := Backend()
	if err != nil {
		return nil, err
	}
	_, pureGo := be.(*simplego.Backend)
	return load(dir, pureGo)
}

// LoadGoMLX is Load with GoMLX running inference on every backend, the
// pure-Go one included: for comparing the two forward passes, and for
// exercising what batches GoMLX calls (model.Model.BatchGain).
func LoadGoMLX(dir string) (*Model, error) { return load(dir, false) }

// load is Load; native chooses the native forward pass for inference.
func load(dir string, native bool) (*Model, error) {
	RegisterFastDotGradients()
	if _, err := os.Stat(filepath.Join(dir, FileConfig)); err != nil {
		latest, err := LatestVersionDir(dir)
		if err != nil {
			return nil, fmt.Errorf("load model: %w", err)
		}
		dir = latest
	}
	if err := VerifyChecksums(dir); err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	m := &Model{}
	var err error
	if m.cfg, err = readCheckpointConfig(dir); err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	m.version = m.cfg.Version
	if m.calib, err = readCalibration(dir); err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	m.cfg.Model = m.cfg.Model.WithDefaults()
	if err := m.cfg.Model.Validate(); err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	m.ctx = newModelContext(int64(m.cfg.Train.Seed))
	if err := loadVariables(m.ctx, filepath.Join(dir, FileWeights)); err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	if m.protos, err = readPrototypes(m.ctx, m.cfg.Model); err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	for _, level := range m.protos {
		for k, p := range level { // zero on the appended spectral factors
			level[k] = append(p, make([]float32, m.cfg.Model.ServedDim()-len(p))...)
		}
	}
	m.parents = make([][]int, len(m.protos))
	for l := 1; l < len(m.protos); l++ {
		m.parents[l] = nearest(m.protos[l], m.protos[l-1])
	}
	if m.feat, err = newFeaturizer(m.cfg.Model); err != nil {
		return nil, err
	}
	if m.cfg.Model.Spectral > 0 {
		if m.feat.spec, err = readSpectral(filepath.Join(dir, FileSpectral), m.cfg.Model.Spectral, m.cfg.Model.EmbedDim); err != nil {
			return nil, fmt.Errorf("load model: %w", err)
		}
		if m.calib != nil && m.calib.NewAdScale > 0 {
			m.feat.spec = m.feat.spec.withNewAdScale(m.calib.NewAdScale)
		}
	}
	be, err := Backend()
	if err != nil {
		return nil, err
	}
	mc := m.cfg.Model
	m.exec, err = context.NewExec(be, m.ctx.Reuse(), func(ctx *context.Context, in []*G.Node) *G.Node {
		return encode(ctx, mc, in)
	})
	if err != nil {
		return nil, fmt.Errorf("build encoder: %w", err)
	}
	m.exec.SetMaxCache(32)
	if native {
		if m.native, err = newNativeEncoder(m.ctx, mc); err != nil {
			return nil, fmt.Errorf("load model: %w", err)
		}
	}
	return m, nil
}

// nearest returns, for each row of a, the index of the most similar row of b.
func nearest(a, b [][]float32) []int {
	out := make([]int, len(a))
	for i, x := range a {
		best, bi := float32(-2), 0
		for j, y := range b {
			if d := dot(x, y); d > best {
				best, bi = d, j
			}
		}
		out[i] = bi
	}
	return out
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// Version returns the checkpoint's version ("vN").
func (m *Model) Version() string { return m.version }

// WithNewAdScale returns m with new ads' spectral factors scaled by s
// (> 0): those an ad without engagement of its own gets from the ads that
// share its attribute values, or from its embedding. At 1 a user scores
// a new ad at least about as it scores the engaged ads of the new ad's
// campaign and advertiser; where new ads draw more engagement than those (a launch), a
// larger scale ranks them higher. The copy shares m's weights and
// factors; a model without spectral factors is returned as is. Load
// applies the version's calibrated scale (Calibration.NewAdScale).
func (m *Model) WithNewAdScale(s float32) (*Model, error) {
	if m.feat.spec == nil {
		return m, nil
	}
	if !(s > 0) || math.IsInf(float64(s), 0) {
		return nil, fmt.Errorf("%w: new-ad scale %v, want > 0", ErrBadConfig, s)
	}
	feat, err := newFeaturizer(m.cfg.Model)
	if err != nil {
		return nil, err
	}
	feat.spec = m.feat.spec.withNewAdScale(s)
	c := *m
	c.feat = feat
	return &c, nil
}

// NewAdScale returns the scale of new ads' spectral factors
// (WithNewAdScale), 1 when the model has none set, 0 without factors.
func (m *Model) NewAdScale() float32 {
	if m.feat.spec == nil {
		return 0
	}
	return m.feat.spec.newAdScale()
}

// Calibration returns the version's calibration ([WriteCalibration]), or
// nil when it has none.
func (m *Model) Calibration() *Calibration { return m.calib }

// Config returns the model configuration the checkpoint was trained with.
func (m *Model) Config() Config { return m.cfg.Model }

// SamplerOptions returns the sampler options the model was trained with;
// embed with a sampler built from them.
func (m *Model) SamplerOptions() graph.SamplerOptions { return m.cfg.Train.Sampler }

// Embed returns the L2-normalised embeddings of ids, each from its teacher
// view sampled from store as of asOf (unix ms).
func (m *Model) Embed(ctx gocontext.Context, store *graph.Store, ids []graph.NodeID, asOf int64) ([][]float32, error) {
	sm := graph.NewSampler(store, m.cfg.Train.Sampler)
	sgs := make([]*graph.Subgraph, len(ids))
	for i, id := range ids {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		sgs[i] = sm.Sample(id, asOf, graph.ViewTeacher, seedFor(m.cfg.Train.Seed, 9, uint64(id.Type), uint64(id.Idx)))
	}
	return m.EmbedSubgraphs(ctx, store, sgs)
}

// EmbedSubgraphs embeds already sampled subgraphs (for example from
// graph.Sampler.SampleVirtual for a cold-start entity); src supplies node
// content (a *graph.Store, or a wrapper that also gives a virtual anchor's
// content; nil: none). Subgraphs of different sizes are batched separately.
func (m *Model) EmbedSubgraphs(ctx gocontext.Context, src Entities, sgs []*graph.Subgraph) ([][]float32, error) {
	return m.EmbedSubgraphsFrom(ctx, func(int) Entities { return src }, sgs)
}

// EmbedSubgraphsFrom is [Model.EmbedSubgraphs] with a content source per
// subgraph: src(i) supplies the content of sgs[i]'s nodes, so that
// subgraphs of several requests, each with its own virtual anchor, run in
// one forward call. A subgraph's embedding does not depend on the other
// subgraphs of the call nor on the batch size it was padded to
// (TestEmbedBatchInvariant).
func (m *Model) EmbedSubgraphsFrom(ctx gocontext.Context, src func(i int) Entities, sgs []*graph.Subgraph) ([][]float32, error) {
	for i, sg := range sgs {
		if sg == nil {
			return nil, fmt.Errorf("embed subgraph %d: %w: nil", i, ErrBadConfig)
		}
	}
	if m.native != nil {
		return m.embedNative(ctx, src, sgs)
	}
	out := make([][]float32, len(sgs))
	// Group by N so each group has one shape.
	byN := map[int][]int{}
	for i, sg := range sgs {
		byN[sg.N] = append(byN[sg.N], i)
	}
	ns := make([]int, 0, len(byN))
	for n := range byN {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	maxB := batchBuckets[len(batchBuckets)-1]
	for _, n := range ns {
		idx := byN[n]
		for lo := 0; lo < len(idx); lo += maxB {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			part := idx[lo:min(lo+maxB, len(idx))]
			group := make([]*graph.Subgraph, len(part))
			for k, i := range part {
				group[k] = sgs[i]
			}
			rows := maxB
			for _, b := range batchBuckets {
				if b >= len(group) {
					rows = b
					break
				}
			}
			bt, err := m.feat.featurizeFrom(func(k int) Entities { return src(part[k]) }, group, rows)
			if err != nil {
				return nil, fmt.Errorf("embed: %w", err)
			}
			res, err := m.exec.Exec(anySlice(bt.tensors(m.cfg.Model))...)
			if err != nil {
				return nil, fmt.Errorf("embed: run encoder: %w", err)
			}
			flat := tensors.MustCopyFlatData[float32](res[0])
			e := m.cfg.Model.EmbedDim
			for k, i := range part {
				out[i] = make([]float32, m.cfg.Model.ServedDim())
				copy(out[i], flat[k*e:(k+1)*e])
				m.appendSpectral(bt, k, out[i])
			}
		}
	}
	return out, nil
}

// appendSpectral writes row b's anchor factors (batch.spec) times
// Config.SpectralWeight into v[EmbedDim:] (Config.Spectral); an ad anchor
// without factors gets the ones its embedding v[:EmbedDim] predicts.
func (m *Model) appendSpectral(bt *batch, b int, v []float32) {
	c := m.cfg.Model
	if c.Spectral <= 0 {
		return
	}
	f := bt.spec[b*c.Spectral : (b+1)*c.Spectral]
	if !bt.specHas[b] && bt.nodeType[b*bt.N] == int32(graph.NodeAd) {
		m.feat.spec.predict(f, v)
	}
	w := float32(c.SpectralWeight)
	for j, x := range f {
		v[c.EmbedDim+j] = w * x
	}
}

// BatchGain reports whether one forward call over several subgraphs costs
// less per subgraph than a call each: true where GoMLX runs the encoder,
// false for the native forward pass, which embeds subgraphs one by one.
func (m *Model) BatchGain() bool { return m.native == nil }

// Levels returns the number of prototype levels.
func (m *Model) Levels() int { return len(m.protos) }

// PopularityAxis returns the coordinate of the embeddings that carries the
// node's engagement counts (Config.Activity), or -1 when the model has
// none.
func (m *Model) PopularityAxis() int { return popularityAxis(m.cfg.Model) }

// Prototypes returns the L2-normalised prototypes of a level (0 = coarsest),
// or nil when level is out of range. The result is shared: do not modify it.
func (m *Model) Prototypes(level int) [][]float32 {
	if level < 0 || level >= len(m.protos) {
		return nil
	}
	return m.protos[level]
}

// Parents returns, for each prototype of level (>= 1), the index of its
// parent (nearest prototype) in level-1; nil for level 0 or out of range.
func (m *Model) Parents(level int) []int {
	if level < 1 || level >= len(m.parents) {
		return nil
	}
	return m.parents[level]
}

// PrototypeScores returns the cosine of emb with every prototype, per level.
func (m *Model) PrototypeScores(emb []float32) [][]float32 {
	out := make([][]float32, len(m.protos))
	for l, ps := range m.protos {
		out[l] = make([]float32, len(ps))
		for k, p := range ps {
			out[l][k] = dot(emb, p)
		}
	}
	return out
}
