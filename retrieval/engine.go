package retrieval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/rank"
)

// Sentinel errors of the engine. Callers test for them with errors.Is.
var (
	// ErrNoGeneration means no model has been trained or loaded yet.
	ErrNoGeneration = errors.New("no model trained yet: POST /v1/model/train or wait for the background trainer")
	// ErrBadRequest marks an invalid retrieval request.
	ErrBadRequest = errors.New("bad request")
	// ErrNotFound marks an entity the graph does not hold.
	ErrNotFound = errors.New("not found")
	// ErrBadOptions marks invalid engine options.
	ErrBadOptions = errors.New("bad retrieval options")
	// ErrBadVersion marks a model version whose model does not load
	// ([OpenVersion]).
	ErrBadVersion = errors.New("model version does not load")
	// errNoModel reports an operation that needs the generation's model.
	errNoModel = errors.New("the served generation has no model for cold-start embedding")
)

// DefaultEmbedCacheSize bounds the cache of embeddings computed at request
// time when Options.EmbedCacheSize is 0.
const DefaultEmbedCacheSize = 100_000

// Options configures an [Engine].
type Options struct {
	// Rank shapes the priors, the co-engagement and the definition of a new
	// user (zero fields take rank's defaults, negative ones turn their
	// setting off).
	Rank rank.Options
	// Weights are the re-rank weights of a request that names none: values,
	// used as they are (start from rank.DefaultWeights; a weight of 0 turns
	// its term off).
	Weights rank.Weights
	// CalibratedPrior: a generation whose model has a calibration
	// (model.Model.Calibration, written by Calibrate after training)
	// serves its prior weight in place of Weights.Prior ([Engine.Weights]).
	CalibratedPrior bool
	// Build configures the catch-up embedding of a publication.
	Build BuildOptions
	// TextIndexDir holds the bleve keyword index of ad text on disk
	// (bleve's scorch: memory-mapped segments, merged in the background),
	// which keeps the millions of small objects of an in-memory index off
	// the Go heap, where every garbage collection would mark them. The
	// index always matches the store: NewEngine re-indexes only the ads
	// whose text changed since the last clean Close, which recorded every
	// ad's text hash beside the directory (DIR.hashes); without that
	// record (a first start, a crash) it removes the index and rebuilds it
	// from the graph. Empty: in memory, built by NewEngine.
	TextIndexDir string
	// NoKeywords disables the keyword index: requests with a query fail.
	// For offline evaluation, which sends none.
	NoKeywords bool
	// EmbedCacheSize bounds the cache of request-time embeddings (default
	// DefaultEmbedCacheSize).
	EmbedCacheSize int
	// EmbedBatch configures the micro-batching of request-time embeddings
	// of concurrent requests (zero value: the defaults).
	EmbedBatch EmbedBatchOptions
	// NarrowRequestView embeds request-time users (never-seen users,
	// requests with context events) from the model's narrow student view
	// (its node count, hops, fan-out and walks, without the training-time
	// feature dropout and anchor-only draws) instead of the teacher view
	// that every stored entity's embedding comes from. Fewer tokens make
	// the forward call cheaper; the embeddings, and so the answers, differ
	// from the teacher view's (the student is trained to match it).
	NarrowRequestView bool
	// Logger defaults to discard.
	Logger *slog.Logger
}

// Engine is HIR's retrieval core: it serves one generation at a time
// with its liveState part over a graph store, answers [Engine.Retrieve], and
// owns every write to the live part ([Engine.Apply], [Engine.Publish]).
// The HTTP server and the offline evaluation both call it, so that what is
// evaluated is what is served. Safe for concurrent use.
type Engine struct {
	opts   Options
	logger *slog.Logger
	store  *graph.Store
	text   *index.TextIndex // nil with Options.NoKeywords
	// textFailed records a keyword-index write of Apply that failed (under
	// applyMu): the index may then differ from the store, and Close does
	// not record it as matching.
	textFailed bool
	cache      *embedCache
	batch      *embedBatcher
	maps       mapCache     // the map basis of the generation serving
	history    historyCache // the training curve of the generation serving

	cur atomic.Pointer[Served]

	// applyMu serialises the writers of the graph store (through Apply)
	// and of the live part: a publication's catch-up sees every event that
	// was applied, and no event is applied twice to the counters.
	applyMu sync.Mutex
}

// NewEngine returns an engine over store with nothing served yet. It builds
// the keyword index of the stored ads' text (unless opts.NoKeywords or
// opts.TextIndexDir holds one). Close releases it.
func NewEngine(store *graph.Store, opts Options) (*Engine, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrBadOptions)
	}
	opts.Rank = opts.Rank.WithDefaults()
	if err := opts.Rank.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	if err := opts.Weights.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.EmbedCacheSize <= 0 {
		opts.EmbedCacheSize = DefaultEmbedCacheSize
	}
	opts.Build.applyDefaults()
	opts.EmbedBatch.applyDefaults()
	e := &Engine{opts: opts, logger: opts.Logger.With("component", "retrieval"), store: store,
		cache: newEmbedCache(opts.EmbedCacheSize), batch: newEmbedBatcher(opts.EmbedBatch)}
	if opts.NoKeywords {
		return e, nil
	}
	var recorded []uint64
	if opts.TextIndexDir != "" {
		var err error
		if recorded, err = takeTextHashes(opts.TextIndexDir); err != nil {
			return nil, err
		}
		if recorded == nil {
			// Rebuilt below: an index left without a record of what it
			// holds may lack what was ingested since.
			err := index.RemoveTextIndex(opts.TextIndexDir)
			if errors.Is(err, index.ErrNotTextIndex) {
				return nil, fmt.Errorf("%w: TextIndexDir: %w", ErrBadOptions, err)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	var err error
	if e.text, err = index.NewTextIndex(opts.TextIndexDir); err != nil {
		return nil, fmt.Errorf("open text index: %w", err)
	}
	start := time.Now()
	if recorded != nil {
		n, err := e.syncText(context.Background(), recorded)
		if err != nil {
			return nil, errors.Join(err, e.text.Close())
		}
		e.logger.Info("keyword index reopened", "ads", store.NumNodes(graph.NodeAd), "reindexed", n, "dir", opts.TextIndexDir, "elapsed", time.Since(start))
		return e, nil
	}
	if err := e.indexAllText(context.Background()); err != nil {
		return nil, errors.Join(err, e.text.Close())
	}
	e.logger.Info("keyword index built", "ads", store.NumNodes(graph.NodeAd), "dir", opts.TextIndexDir, "elapsed", time.Since(start))
	return e, nil
}

// Close stops the request-time embedding runners and releases the keyword
// index. An index kept on disk is recorded (its ads' text hashes), so that
// the next NewEngine on it re-indexes only what changed. Apply must not be
// called after Close.
func (e *Engine) Close() error {
	e.batch.close()
	if e.text == nil {
		return nil
	}
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	var hashes []uint64
	if e.opts.TextIndexDir != "" && !e.textFailed {
		hashes = textHashes(e.store)
	}
	if err := e.text.Close(); err != nil {
		return fmt.Errorf("close text index: %w", err)
	}
	if hashes != nil {
		return putTextHashes(e.opts.TextIndexDir, hashes)
	}
	return nil
}

// Weights returns the re-rank weights of a request that names none, as
// the generation served now answers it: Options.Weights, with the prior
// weight of the generation's calibration under Options.CalibratedPrior.
func (e *Engine) Weights() rank.Weights { return e.weights(e.cur.Load()) }

// weights is Weights for the generation s (nil: none served).
func (e *Engine) weights(s *Served) rank.Weights {
	w := e.opts.Weights
	if e.opts.CalibratedPrior && s != nil && s.gen != nil && s.gen.Model != nil {
		if c := s.gen.Model.Calibration(); c != nil {
			w.Prior = c.PriorWeight
		}
	}
	return w
}

// Store returns the graph store the engine reads and Apply writes.
func (e *Engine) Store() *graph.Store { return e.store }

// Options returns the engine's options.
func (e *Engine) Options() Options { return e.opts }

// Current returns what is served now, nil before the first publication. The
// caller must not modify it.
func (e *Engine) Current() *Served { return e.cur.Load() }

// Publish serves s from now on: requests in flight keep what they loaded.
// Before it does, under the apply lock, it catches s up with everything
// applied since s was built: ads created or re-linked since are embedded and
// upserted into s's live index, and the ads' priors and co-engagement are
// counted from the store as it is now and written into the index. So no
// event or entity ingested during a training round is missing from the
// generation it publishes. s must come from [Build], [Load], [Open] or a
// [TrainJob] and must not be published twice.
func (e *Engine) Publish(ctx context.Context, s *Served) error {
	if s == nil || s.gen == nil || s.live == nil || s.live.Index == nil {
		return fmt.Errorf("%w: publish an incomplete generation", ErrBadOptions)
	}
	if s.gen.Model != nil {
		e.warmEmbed(ctx, s)
	}
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	start := time.Now()
	now := max(s.gen.AsOf, e.store.MaxTS())
	// The counters read only the graph, which holds still under applyMu:
	// they are counted beside the catch-up of the index.
	var priors *rank.Priors
	var co *rank.CoEngagement
	var countTime time.Duration
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		t := time.Now()
		priors = rank.NewPriors(e.store, s.gen.AsOf, now, e.opts.Rank)
		co = rank.NewCoEngagement(e.store, now, e.opts.Rank)
		countTime = time.Since(t)
	}()
	var catchUpTime time.Duration
	if s.gen.Model != nil {
		t := time.Now()
		n, err := catchUpIndex(ctx, s, e.store, serveTime(e.store), nil, e.opts.Build)
		catchUpTime = time.Since(t)
		if err != nil {
			<-counted
			return fmt.Errorf("publish %s: %w", s.gen.Version, err)
		}
		if n > 0 {
			e.logger.Info("caught up ads ingested since the generation was built", "version", s.gen.Version, "ads", n)
		}
	}
	<-counted
	s.live.Priors, s.live.Co = priors, co
	if err := s.live.Priors.Sync(ctx, s.live.Index); err != nil {
		return fmt.Errorf("publish %s: %w", s.gen.Version, err)
	}
	if err := s.live.Index.SetPopularityFloor(ctx, s.popularityAxis(), e.opts.Rank.Prior.FreshRank); err != nil {
		return fmt.Errorf("publish %s: %w", s.gen.Version, err)
	}
	e.cur.Store(s)
	e.cache.reset()
	e.logger.Info("generation published", "version", s.gen.Version, "index_size", s.IndexSize(),
		"catch_up", time.Since(start), "index_catch_up", catchUpTime, "counters", countTime)
	return nil
}

// warmEmbed runs s's model once at every batch size that request-time
// micro-batching uses, so that no request waits for a graph to compile
// (nothing to do for the native forward pass, which compiles nothing and
// does not batch: model.Model.BatchGain). Outside the apply lock; a
// failure is only logged (requests would compile what they need).
func (e *Engine) warmEmbed(ctx context.Context, s *Served) {
	if !s.gen.Model.BatchGain() {
		return
	}
	start := time.Now()
	sg := s.sampler(e.store, e.opts.NarrowRequestView).SampleVirtual(graph.NodeUser, nil, serveTime(e.store), graph.ViewTeacher, 1)
	for b := 1; ; b *= 2 {
		if _, err := s.gen.Model.EmbedSubgraphs(ctx, e.store, slices.Repeat([]*graph.Subgraph{sg}, b)); err != nil {
			e.logger.Warn("warm up request-time embedding", "version", s.gen.Version, "batch", b, "err", err)
			return
		}
		if b >= e.opts.EmbedBatch.Max {
			break
		}
	}
	e.logger.Info("request-time embedding warmed up", "version", s.gen.Version, "max_batch", e.opts.EmbedBatch.Max,
		"elapsed", time.Since(start))
}

// Apply applies a batch that the caller has stored durably to the graph
// store (entities first, then events; duplicate event ids are skipped) and
// then to the served live part: the keyword index gets the text of the ads
// it created or changed, those ads are embedded with the served model and
// upserted into the live index, and its engagement events update the
// priors and the co-engagement. It returns the events that were new. An
// error after the store was updated is returned too: the batch is in the
// store, and the next publication catches the live part up.
func (e *Engine) Apply(ctx context.Context, ents []graph.Entity, evs []graph.Event) ([]graph.Event, error) {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	added, err := ApplyToStore(e.store, ents, evs)
	if err != nil {
		return nil, err
	}
	s := e.cur.Load()
	var errs []error
	if err := e.indexFresh(ctx, s, ents, evs); err != nil {
		errs = append(errs, err)
	}
	if s != nil {
		if err := s.live.Priors.Observe(ctx, e.store, added, s.live.Index); err != nil {
			errs = append(errs, err)
		}
		s.live.Co.Observe(e.store, added)
	}
	return added, errors.Join(errs...)
}

// ApplyToStore applies a stored batch to store: entities first (so events
// find their content), then events. Duplicate event ids are skipped by the
// store; it returns the events that were new. It is the replay path of a
// log at start-up, before an engine serves the store.
func ApplyToStore(store *graph.Store, ents []graph.Entity, evs []graph.Event) ([]graph.Event, error) {
	for i := range ents {
		if _, err := store.UpsertEntity(ents[i]); err != nil {
			return nil, fmt.Errorf("apply entity %s: %w", ents[i].Ref(), err)
		}
	}
	added := make([]graph.Event, 0, len(evs))
	for i := range evs {
		ok, err := store.AddEvent(evs[i])
		if err != nil {
			return nil, fmt.Errorf("apply event %d: %w", i, err)
		}
		if ok {
			added = append(added, evs[i])
		}
	}
	return added, nil
}

// serveTime is the graph time request-time embeddings are taken at: now,
// or the newest event when the data lies in the future of the wall clock.
func serveTime(store *graph.Store) int64 {
	return max(time.Now().UnixMilli(), store.MaxTS())
}

// indexAllText puts the text of every stored ad into the keyword index.
func (e *Engine) indexAllText(ctx context.Context) error {
	n := e.store.NumNodes(graph.NodeAd)
	docs := map[uint32]index.TextDoc{}
	for i := range n {
		id := graph.NodeID{Type: graph.NodeAd, Idx: uint32(i)}
		if d, ok := adText(e.store.Entity(id)); ok {
			docs[id.Idx] = d
		}
		if len(docs) == 4096 || (i == n-1 && len(docs) > 0) {
			if err := e.text.Index(ctx, docs); err != nil {
				return fmt.Errorf("index ad text: %w", err)
			}
			clear(docs)
		}
	}
	return nil
}

// indexFresh refreshes the keyword-index text of the ads a batch created or
// changed and, when a generation with a model is served (s not nil),
// embeds them with its model and upserts them into the live index, so that
// a new ad posted with its structure edges is retrievable at once. The
// apply lock must be held.
func (e *Engine) indexFresh(ctx context.Context, s *Served, ents []graph.Entity, evs []graph.Event) error {
	touched := map[graph.NodeID]bool{}
	mark := func(r graph.Ref) {
		if r.Type != graph.NodeAd {
			return
		}
		if id, ok := e.store.Lookup(r); ok {
			touched[id] = true
		}
	}
	for i := range ents {
		mark(ents[i].Ref())
	}
	for i := range evs {
		if evs[i].Type.IsStructure() {
			mark(evs[i].Src)
			mark(evs[i].Dst)
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
	if e.text != nil {
		docs := map[uint32]index.TextDoc{}
		var untitled []uint32
		for _, id := range ids {
			if d, ok := adText(e.store.Entity(id)); ok {
				docs[id.Idx] = d
			} else {
				untitled = append(untitled, id.Idx)
			}
		}
		if len(docs) > 0 {
			if err := e.text.Index(ctx, docs); err != nil {
				e.textFailed = true
				return fmt.Errorf("index ad text: %w", err)
			}
		}
		if len(untitled) > 0 { // as a rebuild from the store would: no title, not indexed
			if err := e.text.Delete(ctx, untitled...); err != nil {
				e.textFailed = true
				return fmt.Errorf("index ad text: %w", err)
			}
		}
	}
	if s == nil || s.gen.Model == nil {
		return nil
	}
	asOf := serveTime(e.store)
	vecs, err := s.gen.Model.Embed(ctx, e.store, ids, asOf)
	if err != nil {
		return fmt.Errorf("embed fresh ads: %w", err)
	}
	docs := make([]index.Doc, len(ids))
	for i, id := range ids {
		all, newUser, fresh := s.live.Priors.Doc(id.Idx, e.store.Entity(id))
		docs[i] = index.Doc{ID: id.Idx, Embedding: vecs[i], Attrs: adAttrs(e.store, id, asOf), Prior: all, NewUserPrior: newUser, Fresh: fresh}
	}
	if err := s.live.Index.Upsert(ctx, docs...); err != nil {
		return fmt.Errorf("upsert fresh ads: %w", err)
	}
	return nil
}
