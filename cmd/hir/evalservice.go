package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/eval"
	"github.com/hir-ads/hir/graph"
)

// methodService is the name of `hir eval --service` in the reports.
const methodService = "service"

// Defaults of the service method's options.
const (
	defaultServiceBatch        = 2000
	defaultServiceTrainTimeout = 30 * time.Minute
	defaultServiceHTTPTimeout  = 60 * time.Second
	serviceRetries             = 6
	servicePollInterval        = 250 * time.Millisecond
)

// serviceOptions configure [serviceMethod].
type serviceOptions struct {
	// URL is the service's base URL (http://host:port).
	URL string
	// APIKey is sent as a bearer token ("": none).
	APIKey string
	// NoIngest: the service already holds exactly the training window and
	// serves a model trained on it; Fit posts nothing and trains nothing.
	NoIngest bool
	// InlineUsers: post no user entity, so that every user the training
	// events do not name is one the service has never seen; each retrieve
	// carries the user's profile inline (user_content), as an ad server
	// knows it at request time. A 404 would be scored as an empty list and
	// counted.
	InlineUsers bool
	// NoProfiles: post each user entity with its id alone, no text or
	// attributes, as a client that knows its users only by their events.
	NoProfiles bool
	// TrainTimeout bounds the training round Fit waits for (default 30m).
	TrainTimeout time.Duration
	// PriorWeight, CoengagementWeight and NewAdShare, when set, are sent
	// with every retrieve (prior_weight, coengagement_weight,
	// new_ad_share), overriding the server's re-rank weights for these
	// queries; nil sends none.
	PriorWeight, CoengagementWeight, NewAdShare *float32
	// Batch is the number of entities or events per ingest request
	// (default 2000).
	Batch int
	// Logger receives progress (default discard).
	Logger *slog.Logger
}

// serviceMethod scores a running HIR service through its public REST API,
// with the generated client of package api: Fit posts the training view
// (every entity of the catalog, then the structure and engagement events at
// or before the cut) and has the service train on it; TopK asks POST
// /v1/retrieve with exclude_seen; Observe posts the replayed events (in
// batches, flushed before the next query). It implements eval.Recommender
// and eval.Observer. Not safe for concurrent use.
type serviceMethod struct {
	opts   serviceOptions
	client *api.ClientWithResponses
	log    *slog.Logger
	cat    *eval.Catalog

	version  string         // the model version scored, set by Fit
	pending  []api.Event    // observed events not posted yet
	observed int            // events observed so far (their ids)
	obsErr   error          // first error of a flush, returned by the next TopK
	notFound int            // queries answered 404 (user unknown to the service)
	seen     map[int32]bool // the items of the answer being built
}

var (
	_ eval.Recommender = (*serviceMethod)(nil)
	_ eval.Observer    = (*serviceMethod)(nil)
)

// newServiceMethod returns the service method for opts.URL.
func newServiceMethod(opts serviceOptions) (*serviceMethod, error) {
	if opts.TrainTimeout <= 0 {
		opts.TrainTimeout = defaultServiceTrainTimeout
	}
	if opts.Batch <= 0 {
		opts.Batch = defaultServiceBatch
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	url := strings.TrimRight(opts.URL, "/")
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("--service %q: want an http:// or https:// URL", opts.URL)
	}
	copts := []api.ClientOption{api.WithHTTPClient(&retryDoer{c: &http.Client{Timeout: defaultServiceHTTPTimeout}})}
	if opts.APIKey != "" {
		key := opts.APIKey
		copts = append(copts, api.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
	}
	c, err := api.NewClientWithResponses(url, copts...)
	if err != nil {
		return nil, fmt.Errorf("service client: %w", err)
	}
	return &serviceMethod{opts: opts, client: c, log: opts.Logger, seen: make(map[int32]bool)}, nil
}

func (s *serviceMethod) Name() string { return methodService }

// Version returns the model version the service answered with ("" before
// Fit).
func (s *serviceMethod) Version() string { return s.version }

// Weights describes the re-rank weights the queries carry: the ones sent
// per request, the server's defaults for the rest.
func (s *serviceMethod) Weights() string {
	w := func(name string, v *float32) string {
		if v == nil {
			return name + " server default"
		}
		return fmt.Sprintf("%s %g", name, *v)
	}
	return w("prior_weight", s.opts.PriorWeight) + ", " + w("coengagement_weight", s.opts.CoengagementWeight) +
		", " + w("new_ad_share", s.opts.NewAdShare)
}

// NotFound returns the number of queries the service answered 404 (a user
// it does not know), scored as empty lists.
func (s *serviceMethod) NotFound() int { return s.notFound }

// Fit posts the training view and waits for the service to train on it,
// unless NoIngest; then it checks that a model is served.
func (s *serviceMethod) Fit(ctx context.Context, train *eval.TrainView) error {
	s.cat = train.Catalog
	if !s.opts.NoIngest {
		if err := s.postEntities(ctx, train.Catalog); err != nil {
			return err
		}
		if err := s.postTrainEvents(ctx, train); err != nil {
			return err
		}
		if err := s.train(ctx); err != nil {
			return err
		}
	}
	st, err := s.model(ctx)
	if err != nil {
		return err
	}
	if !st.Ready || st.Version == nil {
		return errors.New("the service serves no model (train it, or drop --service-no-ingest)")
	}
	s.version = *st.Version
	s.log.Info("service ready", "version", s.version)
	return nil
}

// postEntities posts every entity of the catalog, sorted by type and id as
// the in-process store adds them, then a bare entity for each user and ad
// the catalog names without one (they exist in the in-process store too).
// With InlineUsers, no user entity is posted; with NoProfiles, each bare.
func (s *serviceMethod) postEntities(ctx context.Context, cat *eval.Catalog) error {
	refs := make([]graph.Ref, 0, len(cat.Entities))
	for r := range cat.Entities {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b graph.Ref) int { return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.ID, b.ID)) })
	ents := make([]api.Entity, 0, len(refs))
	for _, r := range refs {
		switch {
		case r.Type == graph.NodeUser && s.opts.InlineUsers:
			continue
		case r.Type == graph.NodeUser && s.opts.NoProfiles:
			ents = append(ents, api.Entity{Type: api.User, Id: r.ID})
		default:
			ents = append(ents, apiEntity(cat.Entities[r]))
		}
	}
	for _, id := range cat.Items {
		if _, ok := cat.Entities[graph.Ref{Type: graph.NodeAd, ID: id}]; !ok {
			ents = append(ents, api.Entity{Type: api.Ad, Id: id})
		}
	}
	if !s.opts.InlineUsers {
		for _, id := range cat.Users {
			if _, ok := cat.Entities[graph.Ref{Type: graph.NodeUser, ID: id}]; !ok {
				ents = append(ents, api.Entity{Type: api.User, Id: id})
			}
		}
	}
	for b := range slices.Chunk(ents, s.opts.Batch) {
		res, err := s.client.PostEntitiesWithResponse(ctx, api.EntitiesRequest{Entities: b})
		if err != nil {
			return fmt.Errorf("post entities: %w", err)
		}
		if res.JSON200 == nil {
			return statusErr("post entities", res.HTTPResponse, res.Body)
		}
	}
	s.log.Info("posted entities", "entities", len(ents))
	return nil
}

// postTrainEvents posts the structure events, then the engagement events of
// the training view, as the in-process store adds them (engagement weight 1).
func (s *serviceMethod) postTrainEvents(ctx context.Context, train *eval.TrainView) error {
	evs := make([]api.Event, 0, len(train.Structure)+len(train.Interactions))
	for i := range train.Structure {
		ev := apiEvent(&train.Structure[i])
		if ev.Id == nil {
			id := "hir-eval:s" + strconv.Itoa(i)
			ev.Id = &id
		}
		evs = append(evs, ev)
	}
	for i, in := range train.Interactions {
		ev := s.interactionEvent(in)
		id := "hir-eval:t" + strconv.Itoa(i)
		ev.Id = &id
		evs = append(evs, ev)
	}
	if err := s.postEvents(ctx, evs); err != nil {
		return err
	}
	s.log.Info("posted training events", "structure", len(train.Structure), "engagement", len(train.Interactions))
	return nil
}

func (s *serviceMethod) postEvents(ctx context.Context, evs []api.Event) error {
	for b := range slices.Chunk(evs, s.opts.Batch) {
		res, err := s.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: b})
		if err != nil {
			return fmt.Errorf("post events: %w", err)
		}
		if res.JSON200 == nil {
			return statusErr("post events", res.HTTPResponse, res.Body)
		}
	}
	return nil
}

// train triggers a training round (waiting out one already running) and
// polls GET /v1/model until it has ended with a new model version.
func (s *serviceMethod) train(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.TrainTimeout)
	defer cancel()
	before := ""
	if st, err := s.model(ctx); err != nil {
		return err
	} else if st.Version != nil {
		before = *st.Version
	}
	for {
		res, err := s.client.TrainModelWithResponse(ctx)
		if err != nil {
			return fmt.Errorf("trigger training: %w", err)
		}
		if res.StatusCode() == http.StatusAccepted {
			break
		}
		if res.StatusCode() != http.StatusConflict {
			return statusErr("trigger training", res.HTTPResponse, res.Body)
		}
		// A round is running (or another replica leads): wait for it, then
		// train again, so that the model covers everything posted.
		if _, err := s.waitIdle(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	st, err := s.waitIdle(ctx)
	if err != nil {
		return err
	}
	if st.Version == nil || *st.Version == before {
		return fmt.Errorf("the service's training round ended without a new model (still %q; see its log)", before)
	}
	s.log.Info("service trained", "version", *st.Version, "seconds", time.Since(start).Seconds())
	return nil
}

// waitIdle polls GET /v1/model until no training round runs.
func (s *serviceMethod) waitIdle(ctx context.Context) (*api.ModelStatus, error) {
	for {
		st, err := s.model(ctx)
		if err != nil {
			return nil, err
		}
		if st.Training == nil || !*st.Training {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the service's training round: %w", ctx.Err())
		case <-time.After(servicePollInterval):
		}
	}
}

func (s *serviceMethod) model(ctx context.Context) (*api.ModelStatus, error) {
	res, err := s.client.GetModelWithResponse(ctx)
	if err != nil {
		return nil, fmt.Errorf("get model status: %w", err)
	}
	if res.JSON200 == nil {
		return nil, statusErr("get model status", res.HTTPResponse, res.Body)
	}
	return res.JSON200, nil
}

// TopK asks the service for the user's candidates, excluding the ads the
// user has events with, and maps them back to items. A 404 (a user the
// service does not know) is an empty list, counted in NotFound.
func (s *serviceMethod) TopK(ctx context.Context, q *eval.Query, dst []int32) ([]int32, error) {
	if err := s.flush(ctx); err != nil {
		return nil, err
	}
	k, exclude := q.K, true
	uid := s.cat.Users[q.User]
	body := api.RetrieveRequest{User: &api.Ref{Type: api.User, Id: uid}, K: &k, ExcludeSeen: &exclude,
		PriorWeight: s.opts.PriorWeight, CoengagementWeight: s.opts.CoengagementWeight, NewAdShare: s.opts.NewAdShare}
	if s.opts.InlineUsers {
		body.UserContent = userContent(s.cat.Entities[graph.Ref{Type: graph.NodeUser, ID: uid}])
	}
	res, err := s.client.RetrieveCandidatesWithResponse(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("retrieve: %w", err)
	}
	dst = dst[:0]
	switch {
	case res.StatusCode() == http.StatusNotFound:
		s.notFound++
		return dst, nil
	case res.JSON200 == nil:
		return nil, statusErr("retrieve", res.HTTPResponse, res.Body)
	}
	clear(s.seen)
	for _, c := range res.JSON200.Candidates {
		if c.Type != api.Ad {
			continue
		}
		it, ok := s.cat.Item(c.Id)
		if !ok || q.Excluded(it) {
			continue
		}
		if s.seen[it] {
			continue
		}
		s.seen[it] = true
		dst = append(dst, it)
		if len(dst) == q.K {
			break
		}
	}
	return dst, nil
}

// userContent is a retrieve request's inline profile of the user entity e
// (nil without one).
func userContent(e *graph.Entity) *struct {
	Attrs *map[string]string `json:"attrs,omitempty"`
	Text  *string            `json:"text,omitempty"`
} {
	if e == nil || (e.Text == "" && len(e.Attrs) == 0) {
		return nil
	}
	uc := &struct {
		Attrs *map[string]string `json:"attrs,omitempty"`
		Text  *string            `json:"text,omitempty"`
	}{}
	if e.Text != "" {
		t := e.Text
		uc.Text = &t
	}
	if len(e.Attrs) > 0 {
		a := maps.Clone(e.Attrs)
		uc.Attrs = &a
	}
	return uc
}

// Observe queues the replayed event; it is posted before the next query.
func (s *serviceMethod) Observe(in eval.Interaction) {
	ev := s.interactionEvent(in)
	id := "hir-eval:r" + strconv.Itoa(s.observed)
	ev.Id = &id
	s.observed++
	s.pending = append(s.pending, ev)
}

// flush posts the queued observed events; a failure is kept and returned
// by every later flush.
func (s *serviceMethod) flush(ctx context.Context) error {
	if s.obsErr != nil || len(s.pending) == 0 {
		return s.obsErr
	}
	if err := s.postEvents(ctx, s.pending); err != nil {
		s.obsErr = fmt.Errorf("post observed events: %w", err)
		return s.obsErr
	}
	s.pending = s.pending[:0]
	return nil
}

func (s *serviceMethod) interactionEvent(in eval.Interaction) api.Event {
	var ts api.Event_Ts
	_ = ts.FromEventTs0(in.TS) // marshalling an int64 cannot fail
	w := float32(1)
	return api.Event{
		Src:  api.Ref{Type: api.User, Id: s.cat.Users[in.User]},
		Dst:  api.Ref{Type: api.Ad, Id: s.cat.Items[in.Item]},
		Type: api.EdgeType(in.Type.String()), Ts: ts, Weight: &w,
	}
}

func apiEntity(e *graph.Entity) api.Entity {
	out := api.Entity{Type: api.NodeType(e.Type.String()), Id: e.ID}
	if e.Text != "" {
		t := e.Text
		out.Text = &t
	}
	if len(e.Attrs) > 0 {
		a := e.Attrs
		out.Attrs = &a
	}
	if len(e.Vector) > 0 {
		v := e.Vector
		out.Vector = &v
	}
	return out
}

func apiEvent(ev *graph.Event) api.Event {
	var ts api.Event_Ts
	_ = ts.FromEventTs0(ev.TS)
	w := ev.Weight
	out := api.Event{
		Src:  api.Ref{Type: api.NodeType(ev.Src.Type.String()), Id: ev.Src.ID},
		Dst:  api.Ref{Type: api.NodeType(ev.Dst.Type.String()), Id: ev.Dst.ID},
		Type: api.EdgeType(ev.Type.String()), Ts: ts, Weight: &w,
	}
	if ev.ID != "" {
		id := ev.ID
		out.Id = &id
	}
	return out
}

// statusErr describes an unexpected answer of the service.
func statusErr(what string, res *http.Response, body []byte) error {
	if len(body) > 512 {
		body = body[:512]
	}
	code := 0
	if res != nil {
		code = res.StatusCode
	}
	return fmt.Errorf("%s: service answered %d: %s", what, code, strings.TrimSpace(string(body)))
}

// retryDoer retries a request the service answered 429 (rate limited) or
// 503, honouring Retry-After, with exponential backoff otherwise.
type retryDoer struct{ c *http.Client }

func (d *retryDoer) Do(req *http.Request) (*http.Response, error) {
	wait := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		res, err := d.c.Do(req)
		if err != nil || attempt == serviceRetries || req.GetBody == nil && req.Body != nil ||
			(res.StatusCode != http.StatusTooManyRequests && res.StatusCode != http.StatusServiceUnavailable) {
			return res, err
		}
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
	}
}
