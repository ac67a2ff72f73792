package eval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/rank"
	"github.com/hir-ads/hir/retrieval"
)

// Names of our methods in reports.
const (
	// MethodOurs selects both of our methods in a method list.
	MethodOurs = "ours"
	// MethodOursDense is exact retrieval with our embeddings and re-rank:
	// retrieval.Engine.Retrieve re-ranking every ad (Request.Exhaustive).
	MethodOursDense = "ours-dense"
	// MethodOursTokens is the production path: retrieval.Engine.Retrieve
	// through the token index, as POST /v1/retrieve runs it.
	MethodOursTokens = "ours-tokens"
	// MethodOursParts selects, beside both of our methods, the two
	// diagnostics of what each part of the embeddings carries
	// (OursOptions.Parts).
	MethodOursParts = "ours-parts"
	// MethodOursPopularity ranks every ad by its popularity coordinate,
	// in the direction of the user's (the user's vector reduced to the sign
	// of its popularity coordinate).
	MethodOursPopularity = "ours-popularity"
	// MethodOursInterest ranks every ad by the interest part alone (the
	// user's popularity coordinate zeroed; the spectral factors, when the
	// model has them, stay).
	MethodOursInterest = "ours-interest"
	// MethodOursContext is the production path for a user the service has
	// never seen who arrives with their events as context: every query's
	// user is a new id, with the user's profile as inline content and
	// their events as of the query time (the newest
	// retrieval.MaxContextEvents) as context events, embedded at request
	// time (OursOptions.Context).
	MethodOursContext = "ours-context"
)

// OursOptions configures [Ours].
type OursOptions struct {
	// Train configures model.Train; its zero fields take the model's
	// defaults. Logger is set from Logger when nil.
	Train model.TrainConfig
	// Build configures retrieval.Build. Search.ExhaustiveMax defaults to 1
	// here, not the serving default (16384), so that the token stage runs
	// on catalogues smaller than that (otherwise the index re-ranks every ad
	// and is exact by construction).
	Build retrieval.BuildOptions
	// Rank shapes the priors, the co-engagement and the definition of a new
	// user, and Weights scale the re-rank terms, as the service's
	// (retrieval.Options: zero settings take rank's defaults, negative ones
	// turn theirs off; start Weights from rank.DefaultWeights, a weight of
	// 0 turns its term off).
	Rank    rank.Options
	Weights rank.Weights
	// CalibratedPrior serves the model version's calibrated prior weight
	// in place of Weights.Prior, as the service does unless its prior
	// weight is set (retrieval.Options.CalibratedPrior).
	CalibratedPrior bool
	// Calibrate, when set, calibrates the version the evaluation trains
	// (retrieval.CalibrateVersion) before it is loaded; nil: not.
	Calibrate *retrieval.CalibrateOptions
	// ModelDir, when set, loads this model (a version directory or a data
	// directory) instead of training one. It must have been trained on
	// nothing later than the window's cut.
	ModelDir string
	// Dir receives the trained model versions (Dir/models/vN); "" trains
	// into a temporary directory that Close removes.
	Dir string
	// TrainLog receives model.Train's progress as JSON lines (model.JSONProgress; default discard).
	TrainLog io.Writer
	// Logger receives progress (default discard).
	Logger *slog.Logger
	// Parts adds [MethodOursPopularity] and [MethodOursInterest] to
	// Methods: exact ranking by one part of the embeddings, without the
	// re-rank's other terms. Fit fails when the model has no popularity
	// coordinate.
	Parts bool
	// Context adds [MethodOursContext].
	Context bool
	// NarrowRequestView embeds request-time users (MethodOursContext)
	// from the model's narrow student view, as serving's
	// retrieval.Options.NarrowRequestView.
	NarrowRequestView bool
	// NewAdScale, when positive, serves new ads' spectral factors at this
	// scale instead of the version's (model.Model.WithNewAdScale).
	NewAdScale float32
}

// Ours is our model under evaluation, answered by the service's own
// retrieval engine: Fit builds a graph.Store from the training view only
// (every entity, the structure edges and the engagement at or before the
// cut) and trains the model on it (or loads OursOptions.ModelDir); the
// generation is built as of the cut and published into a
// retrieval.Engine; every query is an Engine.Retrieve as of the query
// time, and replayed events are applied through Engine.Apply, as the
// ingest path does (no retraining). [Ours.Methods] returns the exhaustive
// and the token-index method. Not safe for concurrent use.
type Ours struct {
	opts   OursOptions
	log    *slog.Logger
	dir    string // temporary directory to remove, "" if none
	store  *graph.Store
	model  *model.Model
	engine *retrieval.Engine
	cat    *Catalog

	nodeItem map[uint32]int32 // ad node index -> dense item

	dense  *oursMethod
	tokens *oursMethod
	parts  []Recommender
}

// NewOurs returns our model for the harness; pass [Ours.Methods] in
// Config.Extra and call Close when done.
func NewOurs(opts OursOptions) *Ours {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Train.Logger == nil {
		opts.Train.Logger = opts.Logger.With("component", "train")
	}
	if opts.TrainLog == nil {
		opts.TrainLog = io.Discard
	}
	if opts.Build.Search.ExhaustiveMax == 0 {
		opts.Build.Search.ExhaustiveMax = 1
	}
	if opts.Build.Logger == nil {
		opts.Build.Logger = opts.Logger.With("component", "build")
	}
	o := &Ours{opts: opts, log: opts.Logger}
	o.dense = &oursMethod{o: o, name: MethodOursDense, exhaustive: true}
	o.tokens = &oursMethod{o: o, name: MethodOursTokens}
	if opts.Parts {
		o.parts = []Recommender{&oursPart{o: o, name: MethodOursPopularity, popularity: true}, &oursPart{o: o, name: MethodOursInterest}}
	}
	if opts.Context {
		o.parts = append(o.parts, &oursContext{o: o})
	}
	return o
}

// Methods returns exhaustive retrieval ([MethodOursDense]) and the token
// index ([MethodOursTokens], an [Approximator] of the former), in that order,
// then with OursOptions.Parts the two part methods and with
// OursOptions.Context [MethodOursContext].
func (o *Ours) Methods() []Recommender { return append([]Recommender{o.dense, o.tokens}, o.parts...) }

// Model returns the fitted model, nil before Fit.
func (o *Ours) Model() *model.Model { return o.model }

// Engine returns the retrieval engine built by Fit, nil before.
func (o *Ours) Engine() *retrieval.Engine { return o.engine }

// Close releases the engine and removes the temporary training directory,
// if any.
func (o *Ours) Close() error {
	var errs []error
	if o.engine != nil {
		errs = append(errs, o.engine.Close())
		o.engine = nil
	}
	if o.dir != "" {
		if err := os.RemoveAll(o.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove model directory: %w", err))
		}
		o.dir = ""
	}
	return errors.Join(errs...)
}

// buildStore makes the graph store of the training view: every entity of
// the catalog (content is timeless), then the structure and engagement events
// at or before the cut. Every user and item of the catalog gets a node.
func buildStore(train *TrainView, logger *slog.Logger) (*graph.Store, error) {
	store := graph.NewStore(graph.Options{Logger: logger})
	refs := make([]graph.Ref, 0, len(train.Catalog.Entities))
	for r := range train.Catalog.Entities {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b graph.Ref) int { return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.ID, b.ID)) })
	for _, r := range refs {
		if _, err := store.UpsertEntity(*train.Catalog.Entities[r]); err != nil {
			return nil, fmt.Errorf("add entity %s: %w", r, err)
		}
	}
	for _, id := range train.Catalog.Items {
		if _, err := store.Intern(graph.Ref{Type: graph.NodeAd, ID: id}); err != nil {
			return nil, err
		}
	}
	for _, id := range train.Catalog.Users {
		if _, err := store.Intern(graph.Ref{Type: graph.NodeUser, ID: id}); err != nil {
			return nil, err
		}
	}
	for _, ev := range train.Structure {
		if ev.TS > train.AsOf {
			return nil, fmt.Errorf("%w: structure event at %d after the cut %d", ErrBadConfig, ev.TS, train.AsOf)
		}
		if _, err := store.AddEvent(ev); err != nil {
			return nil, fmt.Errorf("add structure event: %w", err)
		}
	}
	for _, in := range train.Interactions {
		if in.TS > train.AsOf {
			return nil, fmt.Errorf("%w: interaction at %d after the cut %d", ErrBadConfig, in.TS, train.AsOf)
		}
		if _, err := store.AddEvent(interactionEvent(train.Catalog, in)); err != nil {
			return nil, fmt.Errorf("add interaction: %w", err)
		}
	}
	store.Compact()
	return store, nil
}

func interactionEvent(cat *Catalog, in Interaction) graph.Event {
	return graph.Event{
		Src:  graph.Ref{Type: graph.NodeUser, ID: cat.Users[in.User]},
		Dst:  graph.Ref{Type: graph.NodeAd, ID: cat.Items[in.Item]},
		Type: in.Type, TS: in.TS, Weight: 1,
	}
}

// fit builds the store of the training view, trains (or loads) the model,
// builds the generation as of the cut and publishes it into a new engine.
func (o *Ours) fit(ctx context.Context, train *TrainView) error {
	store, err := buildStore(train, o.log)
	if err != nil {
		return fmt.Errorf("build graph store: %w", err)
	}
	o.store, o.cat = store, train.Catalog
	o.nodeItem = make(map[uint32]int32, train.Catalog.NumItems())
	for i, id := range train.Catalog.Items {
		n, _ := store.Lookup(graph.Ref{Type: graph.NodeAd, ID: id})
		o.nodeItem[n.Idx] = int32(i)
	}
	o.log.Info("graph store built", "events", store.NumEvents(), "users", store.NumNodes(graph.NodeUser),
		"ads", store.NumNodes(graph.NodeAd), "as_of", train.AsOf)
	dir := o.opts.ModelDir
	if dir == "" {
		dataDir := o.opts.Dir
		if dataDir == "" {
			if dataDir, err = os.MkdirTemp("", "hir-eval-*"); err != nil {
				return fmt.Errorf("create model directory: %w", err)
			}
			o.dir = dataDir
		}
		ck, err := model.Train(ctx, store, o.opts.Train, dataDir, model.JSONProgress(o.opts.TrainLog))
		if err != nil {
			return fmt.Errorf("train model: %w", err)
		}
		dir = ck.Dir
		o.log.Info("model trained", "dir", ck.Dir, "steps", ck.Metrics.Steps, "seconds", ck.Metrics.Seconds)
		if o.opts.Calibrate != nil {
			if _, err := retrieval.CalibrateVersion(ctx, ck.Dir, ck.Metrics.SplitTS, store, *o.opts.Calibrate); err != nil {
				return err
			}
		}
	}
	if o.model, err = model.Load(dir); err != nil {
		return fmt.Errorf("load model: %w", err)
	}
	if o.opts.NewAdScale > 0 {
		if o.model, err = o.model.WithNewAdScale(o.opts.NewAdScale); err != nil {
			return fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
	}
	if o.engine, err = retrieval.NewEngine(store, retrieval.Options{Rank: o.opts.Rank, Weights: o.opts.Weights, CalibratedPrior: o.opts.CalibratedPrior,
		Build: o.opts.Build, NoKeywords: true, Logger: o.log, NarrowRequestView: o.opts.NarrowRequestView}); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	served, err := retrieval.Build(ctx, o.model, store, train.AsOf, o.opts.Build)
	if err != nil {
		return fmt.Errorf("build generation: %w", err)
	}
	return o.engine.Publish(ctx, served)
}

// Observe applies a replayed event to the store and the served live part
// through the engine, as the ingest path of the service does; the model is
// not retrained.
func (o *Ours) Observe(in Interaction) {
	if o.engine == nil {
		return
	}
	if _, err := o.engine.Apply(context.Background(), nil, []graph.Event{interactionEvent(o.cat, in)}); err != nil {
		o.log.Warn("observe event", "err", err)
	}
}

// TokenLevels returns our token assignment of the ads for the truth
// protocol: per prototype level, coarsest first as the API numbers token
// levels, each ad's argmax prototype
// (as of the cut, from the snapshot built by Fit).
func (o *Ours) TokenLevels() TokenLevels {
	return func(context.Context) ([]map[string]int, error) {
		if o.engine == nil || o.engine.Current() == nil {
			return nil, fmt.Errorf("%w: token levels before Fit", ErrBadConfig)
		}
		ads := o.engine.Current().Embeddings(graph.NodeAd)
		if ads == nil {
			return nil, errors.New("no ad embeddings")
		}
		L := o.model.Levels()
		out := make([]map[string]int, L)
		for l := range out {
			out[l] = make(map[string]int, ads.Len())
		}
		for r, n := range ads.Idx {
			id := o.store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: n}).ID
			for l, scores := range o.model.PrototypeScores(ads.Data[r*ads.Dim : (r+1)*ads.Dim]) {
				best, arg := float32(math.Inf(-1)), 0
				for k, s := range scores {
					if s > best {
						best, arg = s, k
					}
				}
				out[l][id] = arg
			}
		}
		return out, nil
	}
}

// oursMethod is one of our methods: the engine's Retrieve for the query's
// user as of the query time, excluding what the user has seen, through the
// token index or exhaustive.
type oursMethod struct {
	o          *Ours
	name       string
	exhaustive bool
	// candidates accumulates the ads re-ranked, for the mean per query.
	candidates, queries int
}

var (
	_ Recommender  = (*oursMethod)(nil)
	_ Observer     = (*oursMethod)(nil)
	_ Approximator = (*oursMethod)(nil)
)

func (m *oursMethod) Name() string { return m.name }

// Fit fits Ours once: the dense method is fitted first, the token method
// reuses its engine.
func (m *oursMethod) Fit(ctx context.Context, train *TrainView) error {
	if m.exhaustive {
		return m.o.fit(ctx, train)
	}
	if m.o.engine == nil {
		return fmt.Errorf("%w: %s is fitted before %s", ErrBadConfig, MethodOursTokens, MethodOursDense)
	}
	return nil
}

// Observe applies a replayed event once (through the token method).
func (m *oursMethod) Observe(in Interaction) {
	if !m.exhaustive {
		m.o.Observe(in)
	}
}

// TopK retrieves through the engine.
func (m *oursMethod) TopK(ctx context.Context, q *Query, dst []int32) ([]int32, error) {
	user := graph.Ref{Type: graph.NodeUser, ID: m.o.cat.Users[q.User]}
	res, err := m.o.engine.Retrieve(ctx, retrieval.Request{User: &user, K: q.K, ExcludeSeen: true, AsOf: q.AsOf,
		Exhaustive: m.exhaustive})
	if err != nil {
		return nil, fmt.Errorf("retrieve for user %d: %w", q.User, err)
	}
	m.candidates += res.Stats.Candidates
	m.queries++
	return m.o.items(res, q, dst), nil
}

// items appends to dst[:0] the dense items of res's candidates, best first,
// leaving out those q excludes.
func (o *Ours) items(res *retrieval.Response, q *Query, dst []int32) []int32 {
	dst = dst[:0]
	for _, c := range res.Candidates {
		it, ok := o.nodeItem[c.Ad]
		if !ok || q.Excluded(it) {
			continue
		}
		dst = append(dst, it)
	}
	return dst
}

// Exact names the method the token index approximates.
func (m *oursMethod) Exact() string {
	if m.exhaustive {
		return ""
	}
	return MethodOursDense
}

// MeanCandidates returns the mean number of ads the token index re-ranked
// per query so far (0 before any query).
func (o *Ours) MeanCandidates() float64 {
	if o.tokens.queries == 0 {
		return 0
	}
	return float64(o.tokens.candidates) / float64(o.tokens.queries)
}

// oursPart ranks every ad by one part of the user's embedding, with no
// prior, co-engagement or token index: the popularity coordinate (the
// user's vector reduced to the sign of its popularity coordinate, so that
// the ads rank by theirs) or the interest part (the popularity coordinate
// zeroed). A diagnostic of what each part carries; the user's vector is
// the one retrieval uses now (retrieval.Engine.Vector), the ads' are the
// generation's.
type oursPart struct {
	o          *Ours
	name       string
	popularity bool
}

func (m *oursPart) Name() string { return m.name }

// Fit checks that our dense method was fitted first and that the model has
// a popularity coordinate.
func (m *oursPart) Fit(context.Context, *TrainView) error {
	switch {
	case m.o.engine == nil:
		return fmt.Errorf("%w: %s is fitted before %s", ErrBadConfig, m.name, MethodOursDense)
	case m.o.model.PopularityAxis() < 0:
		return fmt.Errorf("%w: %s: the model has no popularity coordinate", ErrBadConfig, m.name)
	}
	return nil
}

// TopK ranks the generation's ads by the dot product with the user's vector
// reduced to the method's part, skipping excluded items.
func (m *oursPart) TopK(ctx context.Context, q *Query, dst []int32) ([]int32, error) {
	vec, s, err := m.o.engine.Vector(ctx, graph.Ref{Type: graph.NodeUser, ID: m.o.cat.Users[q.User]})
	if err != nil {
		return nil, fmt.Errorf("%s: vector of user %d: %w", m.name, q.User, err)
	}
	axis := m.o.model.PopularityAxis()
	v := slices.Clone(vec)
	if m.popularity {
		sign := float32(1)
		if v[axis] < 0 {
			sign = -1
		}
		clear(v)
		v[axis] = sign
	} else {
		v[axis] = 0
	}
	ads := s.Embeddings(graph.NodeAd)
	type scored struct {
		item  int32
		score float32
	}
	all := make([]scored, 0, len(ads.Idx))
	for r, n := range ads.Idx {
		it, ok := m.o.nodeItem[n]
		if !ok || q.Excluded(it) {
			continue
		}
		all = append(all, scored{it, index.Dot(v, ads.Data[r*ads.Dim:(r+1)*ads.Dim])})
	}
	slices.SortFunc(all, func(a, b scored) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.item, b.item)) })
	dst = dst[:0]
	for _, c := range all[:min(q.K, len(all))] {
		dst = append(dst, c.item)
	}
	return dst, nil
}

// oursContext is [MethodOursContext]: the query's user presented to the
// engine as never seen, with their profile and events as the request's
// content and context events, as an ad server that keeps the visit's
// events itself would ask.
type oursContext struct {
	o *Ours
}

func (m *oursContext) Name() string { return MethodOursContext }

// Fit checks that our dense method was fitted first.
func (m *oursContext) Fit(context.Context, *TrainView) error {
	if m.o.engine == nil {
		return fmt.Errorf("%w: %s is fitted before %s", ErrBadConfig, MethodOursContext, MethodOursDense)
	}
	return nil
}

// TopK retrieves for a new user id carrying the query user's content and
// newest events as of the query time.
func (m *oursContext) TopK(ctx context.Context, q *Query, dst []int32) ([]int32, error) {
	store := m.o.store
	id := m.o.cat.Users[q.User]
	user := graph.Ref{Type: graph.NodeUser, ID: "context/" + id}
	req := retrieval.Request{User: &user, K: q.K, ExcludeSeen: true, AsOf: q.AsOf}
	if n, ok := store.Lookup(graph.Ref{Type: graph.NodeUser, ID: id}); ok {
		if ent := store.Entity(n); ent != nil {
			c := *ent
			c.ID = user.ID
			req.Content = &c
		}
		store.Neighbors(n, q.AsOf, func(ed graph.Edge) bool { // newest first
			if ed.Out {
				req.ContextEvents = append(req.ContextEvents, graph.Event{Src: user, Dst: store.Ref(ed.Nbr), Type: ed.Type, TS: ed.TS, Weight: ed.Weight})
			}
			return len(req.ContextEvents) < retrieval.MaxContextEvents
		})
	}
	res, err := m.o.engine.Retrieve(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("retrieve for user %d with context: %w", q.User, err)
	}
	return m.o.items(res, q, dst), nil
}
