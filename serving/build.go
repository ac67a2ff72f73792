package serving

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
)

// BuildOptions configures how a [Snapshot] is built from a model and the
// graph (by [BuildSnapshot] and the jobs of [NewTrainJob]).
type BuildOptions struct {
	// EmbedBatch is the number of nodes embedded per model call (default 256).
	EmbedBatch int
	// Quantizer shapes the BoM bags; Levels is filled from the model's
	// prototypes (other zero fields take the index defaults).
	Quantizer index.QuantizerOptions
	// Search tunes candidate generation of the index.
	Search index.SearchOptions
	// Logger defaults to discard.
	Logger *slog.Logger
	// Prior shapes the ads' engagement priors.
	Prior PriorOptions
	// CoEngage shapes the co-engagement term of the re-rank.
	CoEngage CoEngageOptions
	// PersistDir, when set, is where [BuildSnapshot] and [OpenSnapshot]
	// save the snapshot's files ([SaveSnapshotFiles]): normally the model's
	// checkpoint directory. [NewTrainJob] sets it to each new checkpoint.
	PersistDir string
}

func (o *BuildOptions) applyDefaults() {
	if o.EmbedBatch <= 0 {
		o.EmbedBatch = 256
	}
	o.Prior.applyDefaults()
	o.CoEngage.applyDefaults()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// BuildSnapshot embeds every node of store with m as of asOf (unix ms),
// fits the quantizer on the ad embeddings, builds the ad index and its token
// catalogue, and returns the complete snapshot. It does not publish it.
// With opts.PersistDir set it then saves the snapshot's files there
// ([SaveSnapshotFiles]; a failure is only logged), so that [OpenSnapshot]
// can load them instead of re-embedding.
func BuildSnapshot(ctx context.Context, m *model.Model, store *graph.Store, asOf int64, opts BuildOptions) (*Snapshot, error) {
	opts.applyDefaults()
	start := time.Now()
	snap := &Snapshot{Model: m, Version: m.Version(), TrainedAt: time.Now(), AsOf: asOf,
		Embeddings: make(map[graph.NodeType]*Matrix), Metrics: map[string]float64{}}
	dim := m.Config().EmbedDim
	for t := graph.NodeType(1); int(t) < graph.NumNodeTypes; t++ {
		n := store.NumNodes(t)
		if n == 0 {
			continue
		}
		ids := make([]graph.NodeID, n)
		for i := range n {
			ids[i] = graph.NodeID{Type: t, Idx: uint32(i)}
		}
		vecs, err := embedBatches(ctx, m, store, ids, asOf, opts.EmbedBatch)
		if err != nil {
			return nil, fmt.Errorf("embed %s nodes: %w", t, err)
		}
		snap.Embeddings[t] = mergeRows(dim, nil, ids, vecs)
	}
	if opts.Prior.HalfLife > 0 {
		snap.trend = newTrend(store, asOf, asOf, opts.Prior)
	}
	snap.co = newCoEngagement(store, asOf, opts.CoEngage)
	ix, err := buildIndex(ctx, snap, store, opts)
	if err != nil {
		return nil, err
	}
	snap.Index = ix
	if err := buildCatalogue(ctx, snap, store); err != nil {
		return nil, err
	}
	snap.Metrics["index_ads"] = float64(snap.IndexSize())
	snap.Metrics["build_seconds"] = time.Since(start).Seconds()
	opts.Logger.Info("snapshot built", "version", snap.Version, "ads", snap.IndexSize(), "elapsed", time.Since(start))
	if opts.PersistDir != "" {
		persist(snap, store, opts.PersistDir, opts.Logger)
	}
	return snap, nil
}

// embedBatches embeds ids with m as of asOf, batch nodes per model call.
func embedBatches(ctx context.Context, m *model.Model, store *graph.Store, ids []graph.NodeID, asOf int64, batch int) ([][]float32, error) {
	vecs := make([][]float32, 0, len(ids))
	for lo := 0; lo < len(ids); lo += batch {
		part, err := m.Embed(ctx, store, ids[lo:min(lo+batch, len(ids))], asOf)
		if err != nil {
			return nil, err
		}
		vecs = append(vecs, part...)
	}
	return vecs, nil
}

// buildIndex fits the quantizer (the model's prototypes, plus a residual
// codebook fitted on the ad embeddings when there are enough ads) and
// builds the ad index from snap's ad matrix.
func buildIndex(ctx context.Context, snap *Snapshot, store *graph.Store, opts BuildOptions) (*index.Index, error) {
	m := snap.Model
	dim := m.Config().EmbedDim
	levels := make([][][]float32, m.Levels())
	for l := range levels {
		levels[l] = m.Prototypes(l)
	}
	qo := opts.Quantizer
	qo.Levels = levels
	ads := snap.Embeddings[graph.NodeAd]
	nAds := 0
	if ads != nil {
		nAds = ads.Len()
	}
	codes := qo.ResidualCodes
	if codes == 0 {
		codes = 16
	}
	if nAds < 2*codes {
		qo.ResidualLevels = -1 // too few ads to fit a residual codebook
	}
	q, err := index.NewQuantizer(qo)
	if err != nil {
		return nil, fmt.Errorf("build quantizer: %w", err)
	}
	if qo.ResidualLevels >= 0 && nAds > 0 {
		vecs := make([][]float32, nAds)
		for i := range nAds {
			vecs[i] = ads.Data[i*dim : (i+1)*dim]
		}
		if err := q.Fit(ctx, vecs); err != nil {
			return nil, fmt.Errorf("fit quantizer: %w", err)
		}
	}
	ix, err := index.New(index.Options{Quantizer: q, Logger: opts.Logger, Search: opts.Search})
	if err != nil {
		return nil, fmt.Errorf("create index: %w", err)
	}
	docs := make([]index.Doc, 0, nAds)
	for i := range nAds {
		id := graph.NodeID{Type: graph.NodeAd, Idx: ads.Idx[i]}
		docs = append(docs, snap.adDoc(store, id, snap.AsOf, ads.Data[i*dim:(i+1)*dim]))
	}
	if err := ix.Build(ctx, docs); err != nil {
		return nil, fmt.Errorf("build index: %w", err)
	}
	return ix, nil
}

// buildCatalogue labels the tokens of snap's index from the ads' text.
func buildCatalogue(ctx context.Context, snap *Snapshot, store *graph.Store) error {
	cat, err := index.BuildCatalogue(ctx, snap.Index.Snapshot(), index.CatalogueOptions{Text: func(id uint32) string {
		if e := store.Entity(graph.NodeID{Type: graph.NodeAd, Idx: id}); e != nil {
			return e.Text
		}
		return ""
	}})
	if err != nil {
		return fmt.Errorf("build token catalogue: %w", err)
	}
	snap.Catalogue = cat
	return nil
}

// adAttrs derives the filterable attributes of an ad from its content and
// its structure edges: campaign, advertiser (through the campaign), product,
// category and brand (directly or through the product), plus every content
// attribute as given.
func adAttrs(store *graph.Store, id graph.NodeID, asOf int64) map[string][]string {
	attrs := map[string][]string{}
	add := func(k, v string) {
		if v != "" && !slices.Contains(attrs[k], v) {
			attrs[k] = append(attrs[k], v)
		}
	}
	if e := store.Entity(id); e != nil {
		for k, v := range e.Attrs {
			add(k, v)
		}
	}
	var products, campaigns []graph.NodeID
	store.Neighbors(id, asOf, func(e graph.Edge) bool {
		if !e.Out {
			return true
		}
		switch e.Type {
		case graph.EdgeInCampaign:
			add(index.AttrCampaign, store.Ref(e.Nbr).ID)
			campaigns = append(campaigns, e.Nbr)
		case graph.EdgePromotes:
			add("product", store.Ref(e.Nbr).ID)
			products = append(products, e.Nbr)
		case graph.EdgeInCategory:
			add(index.AttrCategory, store.Ref(e.Nbr).ID)
		case graph.EdgeOfBrand:
			add(index.AttrBrand, store.Ref(e.Nbr).ID)
		}
		return true
	})
	for _, c := range campaigns {
		store.Neighbors(c, asOf, func(e graph.Edge) bool {
			if e.Out && e.Type == graph.EdgeOfAdvertiser {
				add(index.AttrAdvertiser, store.Ref(e.Nbr).ID)
			}
			return true
		})
	}
	for _, p := range products {
		store.Neighbors(p, asOf, func(e graph.Edge) bool {
			switch {
			case e.Out && e.Type == graph.EdgeInCategory:
				add(index.AttrCategory, store.Ref(e.Nbr).ID)
			case e.Out && e.Type == graph.EdgeOfBrand:
				add(index.AttrBrand, store.Ref(e.Nbr).ID)
			}
			return true
		})
	}
	return attrs
}

// adDoc is the index doc of ad id: its embedding, attributes as of asOf and
// engagement prior.
func (s *Snapshot) adDoc(store *graph.Store, id graph.NodeID, asOf int64, vec []float32) index.Doc {
	all, newUser := s.trend.docPriors(id.Idx, store.Entity(id))
	return index.Doc{ID: id.Idx, Embedding: vec, Attrs: adAttrs(store, id, asOf), Prior: all, NewUserPrior: newUser}
}

// serveTime is the graph time fresh embeddings are taken at: now, or the
// newest event when the data lies in the future of the wall clock.
func serveTime(store *graph.Store) int64 {
	return max(time.Now().UnixMilli(), store.MaxTS())
}

// indexFresh refreshes the keyword-index text of the ads a stored batch
// created or changed and, when a snapshot with a model is served (snap not
// nil), embeds them with its model and upserts them into the live index, so
// that a new ad posted with its structure edges is retrievable at once.
func (s *Server) indexFresh(ctx context.Context, snap *Snapshot, b eventlog.Batch) error {
	touched := map[graph.NodeID]bool{}
	mark := func(r graph.Ref) {
		if r.Type != graph.NodeAd {
			return
		}
		if id, ok := s.store.Lookup(r); ok {
			touched[id] = true
		}
	}
	for i := range b.Entities {
		mark(b.Entities[i].Ref())
	}
	for i := range b.Events {
		if b.Events[i].Type.IsStructure() {
			mark(b.Events[i].Src)
			mark(b.Events[i].Dst)
		}
	}
	if len(touched) == 0 {
		return nil
	}
	ids := make([]graph.NodeID, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b graph.NodeID) int { return int(a.Idx) - int(b.Idx) })
	docs := map[uint32]index.TextDoc{}
	for _, id := range ids {
		if e := s.store.Entity(id); e != nil {
			docs[id.Idx] = textDoc(e)
		}
	}
	if len(docs) > 0 {
		if err := s.text.Index(ctx, docs); err != nil {
			return fmt.Errorf("index ad text: %w", err)
		}
	}
	if snap == nil || snap.Model == nil || snap.Index == nil {
		return nil
	}
	ctx, span := s.tel.tracer.Start(ctx, "index_fresh_ads")
	defer span.End()
	asOf := serveTime(s.store)
	vecs, err := snap.Model.Embed(ctx, s.store, ids, asOf)
	if err != nil {
		return fmt.Errorf("embed fresh ads: %w", err)
	}
	adDocs := make([]index.Doc, len(ids))
	for i, id := range ids {
		adDocs[i] = snap.adDoc(s.store, id, asOf, vecs[i])
	}
	if err := snap.Index.Upsert(ctx, adDocs...); err != nil {
		return fmt.Errorf("upsert fresh ads: %w", err)
	}
	return nil
}

func textDoc(e *graph.Entity) index.TextDoc {
	return index.TextDoc{Title: e.Text, Description: e.Attrs["description"],
		Category: e.Attrs[index.AttrCategory], Brand: e.Attrs[index.AttrBrand]}
}

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
	// Log receives model.Train's progress lines; default discard.
	Log io.Writer
}

// NewTrainJob returns the standard training round: train from the latest
// checkpoint in opts.DataDir on the events of store, score the candidate
// and the serving model on the latest time window (engagement AUC of
// user·item dot products against random items, embeddings taken as of the
// window's start), reject a candidate that regresses, otherwise build the
// next snapshot (re-embed, fit, index, catalogue) and persist its files
// into the new checkpoint directory.
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
	return func(ctx context.Context, prev *Snapshot) (*Snapshot, float64, error) {
		asOf := store.MaxTS()
		if store.NumEvents() == 0 {
			return nil, 0, fmt.Errorf("train: %w", model.ErrNoData)
		}
		cfg := opts.Train
		if _, err := model.LatestVersionDir(opts.DataDir); err == nil {
			cfg.Resume = true
		}
		ckpt, err := model.Train(ctx, store, cfg, opts.DataDir, opts.Log)
		if err != nil {
			return nil, 0, fmt.Errorf("train: %w", err)
		}
		m, err := model.Load(ckpt.Dir)
		if err != nil {
			return nil, 0, fmt.Errorf("load trained model: %w", err)
		}
		loss := math.NaN()
		if ckpt.Metrics.Last != nil {
			loss = ckpt.Metrics.Last.Total
		}
		val := newValidationSet(store, opts.ValFraction, opts.ValPairs, cfg.Seed)
		candAUC, err := val.auc(ctx, m, store)
		if err != nil {
			return nil, 0, fmt.Errorf("validate candidate: %w", err)
		}
		if prev != nil && prev.Model != nil && !math.IsNaN(candAUC) {
			prevAUC, err := val.auc(ctx, prev.Model, store)
			if err != nil {
				return nil, 0, fmt.Errorf("validate serving model: %w", err)
			}
			if !math.IsNaN(prevAUC) && candAUC < prevAUC-opts.Tolerance {
				return nil, loss, fmt.Errorf("%w: %s AUC %.4f < %s AUC %.4f - %.3f", ErrRegressed,
					m.Version(), candAUC, prev.Version, prevAUC, opts.Tolerance)
			}
		}
		build := opts.Build
		build.PersistDir = ckpt.Dir
		snap, err := BuildSnapshot(ctx, m, store, asOf, build)
		if err != nil {
			return nil, 0, err
		}
		if dir, err := filepath.Abs(ckpt.Dir); err == nil {
			snap.Dir = dir
		}
		snap.Metrics["train_loss"] = loss
		snap.Metrics["val_window_auc"] = candAUC
		snap.Metrics["steps"] = float64(ckpt.Metrics.Steps)
		snap.Metrics["train_events"] = float64(ckpt.Metrics.TrainEvents)
		if v := ckpt.Metrics.Validation; v != nil {
			snap.Metrics["val_loss"] = v.Total
			snap.Metrics["val_engagement_auc"] = v.AUC
		}
		for k, v := range snap.Metrics {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				delete(snap.Metrics, k) // JSON cannot carry them
			}
		}
		return snap, loss, nil
	}
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

// errNoModel reports an operation that needs the snapshot's model.
var errNoModel = errors.New("the serving snapshot has no model for cold-start embedding")
