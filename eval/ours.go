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

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/serving"
)

// Names of our methods in reports.
const (
	// MethodOurs selects both of our methods in a method list.
	MethodOurs = "ours"
	// MethodOursDense is exact dense retrieval with our embeddings.
	MethodOursDense = "ours-dense"
	// MethodOursTokens is the production token index (serving.BuildSnapshot
	// and serving.Snapshot.RetrieveVector).
	MethodOursTokens = "ours-tokens"
)

// OursOptions configures [Ours]. Zero fields take the documented defaults.
type OursOptions struct {
	// Train configures model.Train; its zero fields take the model's
	// defaults. Logger is set from Logger when nil.
	Train model.TrainConfig
	// Build configures serving.BuildSnapshot. Search.ExhaustiveMax defaults
	// to 1 here, not the serving default (16384), so that the token stage
	// runs on catalogues smaller than that (otherwise the index re-ranks
	// every ad and is exact by construction).
	Build serving.BuildOptions
	// PriorWeight scales the ads' engagement priors in the re-rank of both
	// methods, as POST /v1/retrieve does (0: serving.DefaultPriorWeight;
	// negative: no prior, the embeddings alone). Build.Prior shapes the
	// priors.
	PriorWeight float32
	// CoEngageWeight scales the co-engagement term in the re-rank of both
	// methods, as POST /v1/retrieve does (0: serving.DefaultCoEngageWeight;
	// negative: no co-engagement term). Build.CoEngage shapes the term.
	CoEngageWeight float32
	// ModelDir, when set, loads this model (a version directory or a data
	// directory) instead of training one. It must have been trained on
	// nothing later than the window's cut.
	ModelDir string
	// Dir receives the trained model versions (Dir/models/vN); "" trains
	// into a temporary directory that Close removes.
	Dir string
	// TrainLog receives model.Train's progress lines (default discard).
	TrainLog io.Writer
	// Logger receives progress (default discard).
	Logger *slog.Logger
}

// Ours is our model under evaluation: Fit builds a graph.Store from the
// training view only (every entity, the structure edges and the engagement
// at or before the cut), trains the model on it (or loads OursOptions.ModelDir)
// and builds the serving snapshot as of the cut; users are embedded from
// their neighbourhood as of the query time, and replayed events are added to
// the store (no retraining). It implements [Embedder] for [Dense]; [Ours.Methods]
// returns the exact dense method and the token index method. Not safe for
// concurrent use.
type Ours struct {
	opts  OursOptions
	log   *slog.Logger
	dir   string // temporary directory to remove, "" if none
	store *graph.Store
	model *model.Model
	snap  *serving.Snapshot
	cat   *Catalog

	itemNode []uint32         // dense item -> ad node index
	nodeItem map[uint32]int32 // ad node index -> dense item
	userNode []graph.NodeID   // dense user -> node (Idx = VirtualIdx: not interned yet)

	dense  *Dense
	tokens *oursTokens

	// last user embedding, shared by the dense and token methods of a query
	lastUser   int32
	lastAsOf   int64
	lastEvents int64
	lastVec    []float32
	hasLast    bool
}

var _ Embedder = (*Ours)(nil)

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
	opts.PriorWeight = weightOrDefault(opts.PriorWeight, serving.DefaultPriorWeight)
	opts.CoEngageWeight = weightOrDefault(opts.CoEngageWeight, serving.DefaultCoEngageWeight)
	if opts.Build.Search.ExhaustiveMax == 0 {
		opts.Build.Search.ExhaustiveMax = 1
	}
	if opts.Build.Logger == nil {
		opts.Build.Logger = opts.Logger.With("component", "build")
	}
	o := &Ours{opts: opts, log: opts.Logger}
	o.dense = NewDense(MethodOursDense, o)
	o.tokens = &oursTokens{o: o}
	return o
}

// weightOrDefault applies serving's convention for a re-rank weight: 0
// takes def, a negative weight turns the term off.
func weightOrDefault(w, def float32) float32 {
	switch {
	case w == 0:
		return def
	case w < 0:
		return 0
	}
	return w
}

// Methods returns exact dense retrieval ([MethodOursDense]) and the token
// index ([MethodOursTokens], an [Approximator] of the former), in that order.
func (o *Ours) Methods() []Recommender { return []Recommender{o.dense, o.tokens} }

// Model returns the fitted model, nil before Fit.
func (o *Ours) Model() *model.Model { return o.model }

// Snapshot returns the serving snapshot built by Fit, nil before.
func (o *Ours) Snapshot() *serving.Snapshot { return o.snap }

// Close removes the temporary training directory, if any.
func (o *Ours) Close() error {
	if o.dir == "" {
		return nil
	}
	err := os.RemoveAll(o.dir)
	o.dir = ""
	if err != nil {
		return fmt.Errorf("remove model directory: %w", err)
	}
	return nil
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

// Fit builds the store of the training view and trains (or loads) the model.
func (o *Ours) Fit(ctx context.Context, train *TrainView) error {
	store, err := buildStore(train, o.log)
	if err != nil {
		return fmt.Errorf("build graph store: %w", err)
	}
	o.store, o.cat = store, train.Catalog
	o.itemNode = make([]uint32, train.Catalog.NumItems())
	o.nodeItem = make(map[uint32]int32, len(o.itemNode))
	for i, id := range train.Catalog.Items {
		n, _ := store.Lookup(graph.Ref{Type: graph.NodeAd, ID: id})
		o.itemNode[i] = n.Idx
		o.nodeItem[n.Idx] = int32(i)
	}
	o.userNode = make([]graph.NodeID, train.Catalog.NumUsers())
	for u, id := range train.Catalog.Users {
		o.userNode[u], _ = store.Lookup(graph.Ref{Type: graph.NodeUser, ID: id})
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
		ck, err := model.Train(ctx, store, o.opts.Train, dataDir, o.opts.TrainLog)
		if err != nil {
			return fmt.Errorf("train model: %w", err)
		}
		dir = ck.Dir
		o.log.Info("model trained", "dir", ck.Dir, "steps", ck.Metrics.Steps, "seconds", ck.Metrics.Seconds)
	}
	if o.model, err = model.Load(dir); err != nil {
		return fmt.Errorf("load model: %w", err)
	}
	return nil
}

// EmbedItems builds the serving snapshot as of asOf (every node embedded,
// quantizer fitted, ads indexed) and returns the ads' vectors by dense item.
func (o *Ours) EmbedItems(ctx context.Context, asOf int64) ([][]float32, error) {
	if o.model == nil {
		return nil, fmt.Errorf("%w: embed items before Fit", ErrBadConfig)
	}
	snap, err := serving.BuildSnapshot(ctx, o.model, o.store, asOf, o.opts.Build)
	if err != nil {
		return nil, fmt.Errorf("build snapshot: %w", err)
	}
	o.snap = snap
	ads := snap.Embeddings[graph.NodeAd]
	out := make([][]float32, len(o.itemNode))
	for i, n := range o.itemNode {
		if ads == nil {
			break
		}
		if v, ok := ads.Vector(n); ok {
			out[i] = v
		}
	}
	return out, nil
}

// EmbedUser embeds the user from their neighbourhood in the store as of
// q.AsOf (in replay: including the observed events). A user unknown to the
// store is created with no edges and embedded from its type and content.
func (o *Ours) EmbedUser(ctx context.Context, q *Query) ([]float32, error) {
	if o.model == nil {
		return nil, fmt.Errorf("%w: embed user before Fit", ErrBadConfig)
	}
	n := o.store.NumEvents()
	if o.hasLast && o.lastUser == q.User && o.lastAsOf == q.AsOf && o.lastEvents == n {
		return o.lastVec, nil
	}
	id := o.userNode[q.User]
	vecs, err := o.model.Embed(ctx, o.store, []graph.NodeID{id}, q.AsOf)
	if err != nil {
		return nil, err
	}
	o.lastUser, o.lastAsOf, o.lastEvents, o.lastVec, o.hasLast = q.User, q.AsOf, n, vecs[0], true
	return vecs[0], nil
}

// Observe adds a replayed event to the store and to the ads' engagement
// priors, as the ingest path of the service does; the model is not
// retrained.
func (o *Ours) Observe(in Interaction) {
	if o.store == nil {
		return
	}
	ev := interactionEvent(o.cat, in)
	added, err := o.store.AddEvent(ev)
	if err != nil {
		o.log.Warn("observe event", "err", err)
		return
	}
	if added && o.snap != nil {
		if err := o.snap.ObserveEngagement(context.Background(), o.store, []graph.Event{ev}); err != nil {
			o.log.Warn("observe engagement", "err", err)
		}
	}
}

// ItemPriors returns what the re-rank adds to the dot product of every
// item (by dense id) for q's user: PriorWeight times the ad's prior in the
// live index (its new-user prior when the user is new) plus the
// co-engagement term; nil when both weights are 0.
func (o *Ours) ItemPriors(q *Query) []float32 {
	if (o.opts.PriorWeight == 0 && o.opts.CoEngageWeight == 0) || o.snap == nil {
		return nil
	}
	newUser := o.priorTerm(q).NewUser
	idx := o.snap.Index.Snapshot()
	boost := o.snap.CoEngagement(o.coTerm(q))
	out := make([]float32, len(o.itemNode))
	for i, n := range o.itemNode {
		p, u, _ := idx.Priors(n)
		if newUser {
			p = u
		}
		out[i] = o.opts.PriorWeight*p + boost[n]
	}
	return out
}

// coTerm is the co-engagement term of q's re-rank, from the user's engaged
// ads in the store as of the query, as POST /v1/retrieve reads them.
func (o *Ours) coTerm(q *Query) serving.CoTerm {
	co := serving.CoTerm{Weight: o.opts.CoEngageWeight}
	if co.Weight != 0 {
		co.Recent = o.snap.RecentAds(o.store, o.userNode[q.User], q.AsOf)
	}
	return co
}

// priorTerm is the prior term of q's re-rank, as POST /v1/retrieve chooses
// it from the user's events in the store as of the query.
func (o *Ours) priorTerm(q *Query) serving.PriorTerm {
	return serving.PriorTerm{Weight: o.opts.PriorWeight, NewUser: o.snap.NewUser(o.store.Degree(o.userNode[q.User], q.AsOf))}
}

// TokenLevels returns our token assignment of the ads for the truth
// protocol: per prototype level, finest first, each ad's argmax prototype
// (as of the cut, from the snapshot built by Fit).
func (o *Ours) TokenLevels() TokenLevels {
	return func(context.Context) ([]map[string]int, error) {
		if o.snap == nil || o.model == nil {
			return nil, fmt.Errorf("%w: token levels before Fit", ErrBadConfig)
		}
		ads := o.snap.Embeddings[graph.NodeAd]
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
				out[L-1-l][id] = arg // model levels are coarse first
			}
		}
		return out, nil
	}
}

// oursTokens is the production token index: the user vector's query bag,
// postings, exclusions and exact re-rank through serving.Snapshot.RetrieveVector.
type oursTokens struct {
	o       *Ours
	exclude *roaring.Bitmap
	// Candidates accumulates the docs re-ranked, for the mean per query.
	candidates, queries int
}

var (
	_ Recommender  = (*oursTokens)(nil)
	_ Approximator = (*oursTokens)(nil)
)

func (t *oursTokens) Name() string  { return MethodOursTokens }
func (t *oursTokens) Exact() string { return MethodOursDense }

// Fit checks that the dense method built the snapshot (it is fitted first).
func (t *oursTokens) Fit(context.Context, *TrainView) error {
	if t.o.snap == nil {
		return fmt.Errorf("%w: %s is fitted before %s", ErrBadConfig, MethodOursTokens, MethodOursDense)
	}
	t.exclude = roaring.New()
	return nil
}

// TopK retrieves through the snapshot, excluding the user's history.
func (t *oursTokens) TopK(ctx context.Context, q *Query, dst []int32) ([]int32, error) {
	u, err := t.o.EmbedUser(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("embed user %d: %w", q.User, err)
	}
	t.exclude.Clear()
	for _, in := range q.History {
		t.exclude.Add(t.o.itemNode[in.Item])
	}
	_, res, err := t.o.snap.RetrieveVector(ctx, u, q.K, nil, t.exclude, t.o.priorTerm(q), t.o.coTerm(q))
	if err != nil {
		return nil, err
	}
	t.candidates += res.Candidates
	t.queries++
	dst = dst[:0]
	for _, h := range res.Hits {
		it, ok := t.o.nodeItem[h.ID]
		if !ok || q.Excluded(it) {
			continue
		}
		dst = append(dst, it)
	}
	return dst, nil
}

// MeanCandidates returns the mean number of ads the token index re-ranked
// per query so far (0 before any query).
func (o *Ours) MeanCandidates() float64 {
	if o.tokens.queries == 0 {
		return 0
	}
	return float64(o.tokens.candidates) / float64(o.tokens.queries)
}
