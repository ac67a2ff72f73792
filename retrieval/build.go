package retrieval

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
)

// BuildOptions configures how a generation is built from a model and the
// graph (by [Build], [Open] and the jobs of [NewTrainJob]).
type BuildOptions struct {
	// EmbedBatch is the number of nodes embedded per model call (default 256).
	EmbedBatch int
	// EmbedWorkers is the number of model calls run at once when every
	// entity is embedded (default GOMAXPROCS: one forward call uses about
	// one core on the pure-Go backend).
	EmbedWorkers int
	// Quantizer shapes the BoM bags; Levels is filled from the model's
	// prototypes (other zero fields take the index defaults).
	Quantizer index.QuantizerOptions
	// Search tunes candidate generation of the index.
	Search index.SearchOptions
	// Logger defaults to discard.
	Logger *slog.Logger
	// PersistDir, when set, is where [Build] and [Open] save the
	// generation's files ([Save]): normally the model's checkpoint
	// directory. [NewTrainJob] sets it to each new checkpoint.
	PersistDir string
}

func (o *BuildOptions) applyDefaults() {
	if o.EmbedBatch <= 0 {
		o.EmbedBatch = 256
	}
	if o.EmbedWorkers <= 0 {
		o.EmbedWorkers = runtime.GOMAXPROCS(0)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Build embeds every node of store with m as of asOf (unix ms), fits the
// quantizer on the ad embeddings, builds the ad index and its token
// catalogue, and returns the generation with its live index. It does not
// publish it: [Engine.Publish] counts the priors and the co-engagement and
// catches up what was ingested since asOf. With opts.PersistDir set it then
// saves the generation's files there ([Save]; a failure is only logged), so
// that [Open] can load them instead of re-embedding.
func Build(ctx context.Context, m *model.Model, store *graph.Store, asOf int64, opts BuildOptions) (*Served, error) {
	opts.applyDefaults()
	start := time.Now()
	gen := &generation{Model: m, Version: m.Version(), TrainedAt: time.Now(), AsOf: asOf,
		Embeddings: make(map[graph.NodeType]*Matrix), Metrics: map[string]float64{}}
	dim := m.Config().ServedDim()
	for t := graph.NodeType(1); int(t) < graph.NumNodeTypes; t++ {
		n := store.NumNodes(t)
		if n == 0 {
			continue
		}
		ids := make([]graph.NodeID, n)
		for i := range n {
			ids[i] = graph.NodeID{Type: t, Idx: uint32(i)}
		}
		vecs, err := embedBatches(ctx, m, store, ids, asOf, opts)
		if err != nil {
			return nil, fmt.Errorf("embed %s nodes: %w", t, err)
		}
		gen.Embeddings[t] = mergeRows(dim, nil, ids, vecs)
	}
	ix, err := buildIndex(ctx, gen, store, opts)
	if err != nil {
		return nil, err
	}
	s := &Served{gen: gen, live: &liveState{Index: ix}}
	if err := buildCatalogue(ctx, s, store); err != nil {
		return nil, err
	}
	gen.Metrics["index_ads"] = float64(s.IndexSize())
	if c := m.Calibration(); c != nil {
		gen.Metrics["calibrated_prior_weight"] = float64(c.PriorWeight)
		if c.PopularityWeight != nil {
			gen.Metrics["popularity_weight"] = float64(*c.PopularityWeight)
		}
	}
	if s := m.NewAdScale(); s > 0 {
		gen.Metrics["new_ad_scale"] = float64(s)
	}
	gen.Metrics["build_seconds"] = time.Since(start).Seconds()
	opts.Logger.Info("generation built", "version", gen.Version, "ads", s.IndexSize(), "elapsed", time.Since(start))
	if opts.PersistDir != "" {
		persist(s, store, opts.PersistDir, opts.Logger)
	}
	return s, nil
}

// embedBatches embeds ids with m as of asOf, opts.EmbedBatch nodes per
// model call and opts.EmbedWorkers calls at once. A node's embedding does
// not depend on the call it ran in, so the result does not depend on
// either.
func embedBatches(ctx context.Context, m *model.Model, store *graph.Store, ids []graph.NodeID, asOf int64, opts BuildOptions) ([][]float32, error) {
	opts.applyDefaults()
	vecs := make([][]float32, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.EmbedWorkers)
	for lo := 0; lo < len(ids); lo += opts.EmbedBatch {
		hi := min(lo+opts.EmbedBatch, len(ids))
		g.Go(func() error {
			part, err := m.Embed(gctx, store, ids[lo:hi], asOf)
			if err != nil {
				return err
			}
			copy(vecs[lo:hi], part)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return vecs, nil
}

// buildIndex fits the quantizer (the model's prototypes, plus a residual
// codebook fitted on the ad embeddings when there are enough ads) and
// builds the ad index from gen's ad matrix.
func buildIndex(ctx context.Context, gen *generation, store *graph.Store, opts BuildOptions) (*index.Index, error) {
	m := gen.Model
	dim := m.Config().ServedDim()
	levels := make([][][]float32, m.Levels())
	for l := range levels {
		levels[l] = m.Prototypes(l)
	}
	qo := opts.Quantizer
	qo.Levels = levels
	ads := gen.Embeddings[graph.NodeAd]
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
	if qo.WholeCodes == 0 {
		qo.WholeCodes = DefaultWholeCodes(nAds)
	}
	q, err := index.NewQuantizer(qo)
	if err != nil {
		return nil, fmt.Errorf("build quantizer: %w", err)
	}
	if (qo.ResidualLevels >= 0 || qo.WholeCodes > 0) && nAds > 0 {
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
		docs = append(docs, index.Doc{ID: id.Idx, Embedding: ads.Data[i*dim : (i+1)*dim], Attrs: adAttrs(store, id, gen.AsOf)})
	}
	if err := ix.Build(ctx, docs); err != nil {
		return nil, fmt.Errorf("build index: %w", err)
	}
	return ix, nil
}

// DefaultWholeCodes is the size of the whole-vector level's codebook for
// n ads (index.QuantizerOptions.WholeCodes): about sqrt(n), so that a cell
// holds about as many ads as there are cells; none below wholeMinAds ads.
func DefaultWholeCodes(n int) int {
	if n < wholeMinAds {
		return -1
	}
	return int(math.Round(math.Sqrt(float64(n))))
}

// wholeMinAds is the catalogue size from which the index has a
// whole-vector level: below it a query's candidates are most of the
// catalogue anyway.
const wholeMinAds = 4096

// attrNodeTypes are the attributes whose values are entity ids: a label
// names them by the entity's text.
var attrNodeTypes = map[string]graph.NodeType{index.AttrCategory: graph.NodeCategory, index.AttrBrand: graph.NodeBrand,
	"advertiser": graph.NodeAdvertiser, "campaign": graph.NodeCampaign, "product": graph.NodeProduct}

// buildCatalogue labels the tokens of s's index from the ads' text; the
// labels name categories and brands by their text, and brand names are not
// counted among a token's words (the brand already names them).
func buildCatalogue(ctx context.Context, s *Served, store *graph.Store) error {
	var brands []string
	for i := range store.NumNodes(graph.NodeBrand) {
		if e := store.Entity(graph.NodeID{Type: graph.NodeBrand, Idx: uint32(i)}); e != nil && e.Text != "" && len(e.Text) <= 64 {
			brands = append(brands, e.Text)
		}
	}
	cat, err := index.BuildCatalogue(ctx, s.live.Index.Snapshot(), index.CatalogueOptions{Text: func(id uint32) string {
		if e := store.Entity(graph.NodeID{Type: graph.NodeAd, Idx: id}); e != nil {
			return e.Text
		}
		return ""
	}, ExcludeWords: brands, AttrName: func(key, value string) string {
		t, ok := attrNodeTypes[key]
		if !ok {
			return ""
		}
		n, ok := store.Lookup(graph.Ref{Type: t, ID: value})
		if !ok {
			return ""
		}
		if e := store.Entity(n); e != nil && e.Text != "" {
			return clipName(e.Text)
		}
		return ""
	}})
	if err != nil {
		return fmt.Errorf("build token catalogue: %w", err)
	}
	s.gen.Catalogue = cat
	return nil
}

// clipName returns the first line of text, at most 40 bytes of it (cut on a
// word), as the name of an entity in a label.
func clipName(text string) string {
	text, _, _ = strings.Cut(text, "\n")
	if len(text) <= 40 {
		return text
	}
	if i := strings.LastIndexByte(text[:40], ' '); i > 0 {
		return text[:i] + "…"
	}
	return text[:40] + "…"
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
