package serving

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"go.uber.org/goleak"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/rank"
	"github.com/hir-ads/hir/retrieval"
)

func TestMain(m *testing.M) {
	if os.Getenv("GOMLX_BACKEND") == "" {
		os.Setenv("GOMLX_BACKEND", "go")
	}
	goleak.VerifyTestMain(m,
		// bleve starts a process-wide analysis queue in an init function.
		goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
	)
}

const testKey = "test-key-0123456789"

// testEnv is a server on a real event log and graph store, reachable over
// real HTTP through the generated client; every response the client sees is
// validated against openapi.yaml.
type testEnv struct {
	t      *testing.T
	srv    *Server
	http   *httptest.Server
	client *api.ClientWithResponses
	log    *eventlog.Log
	dir    string
	logBuf *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newEnv(t *testing.T, opts Options) *testEnv {
	t.Helper()
	dir := t.TempDir()
	log, store, _, err := OpenStore(context.Background(), eventlog.Options{Dir: dir + "/log", NoSync: true}, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.APIKeys == nil {
		opts.APIKeys = []string{testKey}
	}
	if opts.Retrieval.Rank == (rank.Options{}) && opts.Retrieval.Weights == (rank.Weights{}) {
		r := defaultRetrieval()
		r.Build, r.EmbedCacheSize = opts.Retrieval.Build, opts.Retrieval.EmbedCacheSize
		opts.Retrieval = r
	}
	srv, err := New(opts, log, store)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	env := &testEnv{t: t, srv: srv, http: hs, log: log, dir: dir, logBuf: buf}
	env.client = env.newClient(testKey)
	t.Cleanup(func() {
		hs.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return env
}

// newClient returns a generated client sending key (none when empty) whose
// responses are validated against the spec.
func (e *testEnv) newClient(key string) *api.ClientWithResponses {
	e.t.Helper()
	c, err := api.NewClientWithResponses(e.http.URL,
		api.WithHTTPClient(&http.Client{Transport: &validatingTransport{t: e.t, router: specRouter(e.t)}}),
		api.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			return nil
		}))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

var (
	specOnce sync.Once
	specRtr  routers.Router
	specErr  error
)

func specRouter(t testing.TB) routers.Router {
	specOnce.Do(func() {
		var doc *openapi3.T
		if doc, specErr = api.GetSwagger(); specErr != nil {
			return
		}
		doc.Servers = nil // match any host
		specRtr, specErr = legacy.NewRouter(doc)
	})
	if specErr != nil {
		t.Fatalf("load openapi spec: %v", specErr)
	}
	return specRtr
}

// validatingTransport checks every response against openapi.yaml with
// openapi3filter.ValidateResponse (status documented, content type, body
// schema).
type validatingTransport struct {
	t      *testing.T
	router routers.Router
}

func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	checkResponse(v.t, v.router, req, res.StatusCode, res.Header, body)
	return res, nil
}

func checkResponse(t testing.TB, router routers.Router, req *http.Request, status int, h http.Header, body []byte) {
	t.Helper()
	route, params, err := router.FindRoute(req)
	if err != nil {
		return // not an API route (404 tests)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: status, Header: h, Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s -> %d does not match openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, status, err, body)
	}
}

// raw sends a request with a raw body and returns status, headers and body.
func (e *testEnv) raw(method, path, contentType, key string, body io.Reader) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	checkResponse(e.t, specRouter(e.t), req, res.StatusCode, res.Header, b)
	return res.StatusCode, res.Header, b
}

// decodeProblem decodes a problem+json body, failing the test when it is not one.
func decodeProblem(t testing.TB, h http.Header, body []byte) api.Problem {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json (body %s)", ct, body)
	}
	var p api.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode problem %s: %v", body, err)
	}
	return p
}

// counts is what a rejected request must leave unchanged.
type counts struct {
	logBatches, logEvents, logEntities uint64
	graphEvents                        int64
	graphNodes                         [graph.NumNodeTypes]int
}

func (e *testEnv) counts() counts {
	st := e.log.Stats()
	c := counts{logBatches: st.Batches, logEvents: st.Events, logEntities: st.Entities,
		graphEvents: e.srv.Store().NumEvents()}
	for ty := 1; ty < graph.NumNodeTypes; ty++ {
		c.graphNodes[ty] = e.srv.Store().NumNodes(graph.NodeType(ty))
	}
	return c
}

// world is a small planted-interest ads world as API payloads: each ad
// belongs to one topic (its text uses the topic's words, its campaign is the
// topic's); users click ads of their topic and mark some others
// not_interested.
type world struct {
	entities []api.Entity
	events   []api.Event
	adTopic  map[string]int
	topics   int
}

var topicWords = [][]string{
	{"running", "shoes", "marathon", "sneaker", "trail", "jogging"},
	{"espresso", "coffee", "grinder", "barista", "latte", "beans"},
	{"guitar", "amplifier", "strings", "pedal", "chord", "acoustic"},
	{"tent", "camping", "sleeping", "backpack", "hiking", "lantern"},
}

const worldT0 = int64(1_700_000_000_000)

func newWorld(users, ads, eventsPerUser int, seed uint64) *world {
	return newWorldAt(users, ads, eventsPerUser, seed, worldT0)
}

// newWorldAt is newWorld with its events from t0 (unix ms) on.
func newWorldAt(users, ads, eventsPerUser int, seed uint64, t0 int64) *world {
	rng := rand.New(rand.NewPCG(seed, 7))
	w := &world{adTopic: map[string]int{}, topics: len(topicWords)}
	byTopic := make([][]string, w.topics)
	for i := range ads {
		topic := i % w.topics
		words := topicWords[topic]
		id := fmt.Sprintf("ad%d", i)
		text := fmt.Sprintf("%s %s %s", words[rng.IntN(6)], words[rng.IntN(6)], words[rng.IntN(6)])
		status := "active"
		if i%10 == 9 {
			status = "paused"
		}
		w.entities = append(w.entities, api.Entity{Type: api.Ad, Id: id, Text: &text,
			Attrs: &map[string]string{"status": status}})
		w.adTopic[id] = topic
		byTopic[topic] = append(byTopic[topic], id)
		w.events = append(w.events, apiEvent(fmt.Sprintf("s-%s", id), api.Ad, id, api.Campaign,
			fmt.Sprintf("camp%d", topic), api.InCampaign, t0))
	}
	for c := range w.topics {
		w.events = append(w.events, apiEvent(fmt.Sprintf("s-camp%d", c), api.Campaign, fmt.Sprintf("camp%d", c),
			api.Advertiser, fmt.Sprintf("adv%d", c%2), api.OfAdvertiser, t0))
	}
	const day = 24 * 3600 * 1000
	for u := range users {
		topic := u % w.topics
		uid := fmt.Sprintf("u%d", u)
		for e := range eventsPerUser {
			ts := t0 + day + int64(rng.IntN(30*day))
			typ := api.Click
			var ad string
			if rng.Float64() < 0.85 {
				ad = byTopic[topic][rng.IntN(len(byTopic[topic]))]
				if e%4 == 3 {
					typ = api.Purchase
				}
			} else {
				other := (topic + 1 + rng.IntN(w.topics-1)) % w.topics
				ad = byTopic[other][rng.IntN(len(byTopic[other]))]
				typ = api.NotInterested
			}
			w.events = append(w.events, apiEvent(fmt.Sprintf("e-%s-%d", uid, e), api.User, uid, api.Ad, ad, typ, ts))
		}
	}
	return w
}

func apiEvent(id string, st api.NodeType, src string, dt api.NodeType, dst string, typ api.EdgeType, ts int64) api.Event {
	ev := api.Event{Id: &id, Src: api.Ref{Type: st, Id: src}, Dst: api.Ref{Type: dt, Id: dst}, Type: typ}
	if err := ev.Ts.FromEventTs0(ts); err != nil {
		panic(err)
	}
	return ev
}

// ingest posts the world through the generated client in batches.
func (e *testEnv) ingest(w *world) {
	e.t.Helper()
	ctx := context.Background()
	res, err := e.client.PostEntitiesWithResponse(ctx, api.EntitiesRequest{Entities: w.entities})
	if err != nil || res.JSON200 == nil {
		e.t.Fatalf("post entities: %v %s", err, res.Body)
	}
	for lo := 0; lo < len(w.events); lo += 500 {
		res, err := e.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: w.events[lo:min(lo+500, len(w.events))]})
		if err != nil || res.JSON200 == nil {
			e.t.Fatalf("post events: %v %s", err, res.Body)
		}
	}
}

// tinyTrain is a model small enough for tests on a shared 2-core machine.
func tinyTrain() model.TrainConfig {
	var c model.TrainConfig
	c.Model = model.Config{Dim: 16, Heads: 2, Layers: 1, FFNDim: 32, EmbedDim: 16, HashK: 8, HashDim: 16,
		TextBkts: 512, TextLen: 8, AttrBkts: 64, AttrLen: 4, VectorDim: 4, Prototypes: []int{4, 8}}
	c.Sampler.Teacher = graph.ViewOptions{MaxNodes: 8, Hops: 2}
	c.Sampler.Student = graph.ViewOptions{MaxNodes: 4, Hops: 1}
	c.Pairs = 8
	c.Steps = 6
	c.EvalEvery = 6
	c.LogEvery = 6
	return c
}

// runningServer is a Server whose Run serves a loopback listener.
type runningServer struct {
	srv    *Server
	log    *eventlog.Log
	addr   string
	cancel context.CancelFunc // starts the shutdown
	done   <-chan error       // Run's result
}

// runServer opens the log of logOpts with its store, makes a Server of
// opts over them and runs it on a free loopback port until cancel.
func runServer(t *testing.T, logOpts eventlog.Options, opts Options) *runningServer {
	t.Helper()
	log, store, _, err := OpenStore(context.Background(), logOpts, graphOptions())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(opts, log, store)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	return &runningServer{srv: srv, log: log, addr: ln.Addr().String(), cancel: cancel, done: done}
}

func eventlogOptions(dir string) eventlog.Options {
	return eventlog.Options{Dir: dir + "/log", NoSync: true}
}

func tinyQuantizer() index.QuantizerOptions {
	return index.QuantizerOptions{ResidualCodes: 4, Seed: 1}
}

func graphOptions() graph.Options { return graph.Options{} }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func eventlogBatch(ents []graph.Entity, evs []graph.Event) eventlog.Batch {
	return eventlog.Batch{Entities: ents, Events: evs}
}

// defaultRetrieval returns the service's default retrieval options.
func defaultRetrieval() retrieval.Options {
	return retrieval.Options{Rank: rank.DefaultOptions(), Weights: rank.DefaultWeights()}
}
