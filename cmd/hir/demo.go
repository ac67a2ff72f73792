package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/serving"
	"github.com/hir-ads/hir/serving/apidoc"
)

// demoDone is the last line the demo prints once its examples are out.
const demoDone = "# The server runs until Ctrl-C."

// demoConfig is what `hir demo` runs with.
type demoConfig struct {
	addr  string
	data  string // "" : a temporary directory, removed at exit
	synth dataset.SynthOptions
	train model.TrainConfig
	// maxClockSkew: see serveConfig.
	maxClockSkew time.Duration
	// prepare stops after the first model is trained, without serving
	// (a container's init step); it needs data.
	prepare bool
}

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "demo", "[--addr 127.0.0.1:8080] [--data DIR] [--users N] [--ads M] [--steps S] [--prepare]")
	cfg := demoConfig{}
	fs.StringVar(&cfg.addr, "addr", defaultAddr, "listen address (loopback by default; 127.0.0.1:0 picks a free port, \":8080\" listens on every interface)")
	fs.DurationVar(&cfg.maxClockSkew, "max-clock-skew", serving.DefaultMaxClockSkew, "refuse events dated more than this ahead of the server clock (negative: no limit)")
	fs.StringVar(&cfg.data, "data", "", "data directory; reused when it already holds a model (default: a temporary directory removed at exit)")
	fs.IntVar(&cfg.synth.Users, "users", 500, "synthetic users (--users 2000 --ads 5000 --steps 50 for a bigger world and a better first model)")
	fs.IntVar(&cfg.synth.Ads, "ads", 1000, "synthetic ads")
	fs.Uint64Var(&cfg.synth.Seed, "seed", 1, "world and training seed")
	fs.IntVar(&cfg.train.Steps, "steps", 10, "training steps of the first model (sized with the world so that the demo serves within about 20 s on 2 idle cores)")
	fs.BoolVar(&cfg.prepare, "prepare", false, "synthesise, import and train into --data, then exit without serving (an init step; needs --data)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.prepare && cfg.data == "" {
		fmt.Fprintln(e.stderr, "--prepare needs --data")
		return errUsage
	}
	cfg.train.Seed = cfg.synth.Seed
	return demo(ctx, e, cfg)
}

// demo synthesises a world into the data directory, imports it, trains a
// first model, then serves it like `hir serve` and prints curl calls with
// real ids that work against the running server.
func demo(ctx context.Context, e *env, cfg demoConfig) error {
	dir := cfg.data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "hir-demo-")
		if err != nil {
			return fmt.Errorf("create demo directory: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	key, err := demoKey()
	if err != nil {
		return err
	}
	_, noModel := model.LatestVersionDir(dir)
	if noModel != nil {
		if _, err := os.Stat(filepath.Join(dir, "log")); errors.Is(err, os.ErrNotExist) {
			world := filepath.Join(dir, "world")
			e.logger.Info("synthesising a world", "dir", world, "users", cfg.synth.Users, "ads", cfg.synth.Ads)
			if _, err := dataset.Synth(ctx, cfg.synth, world); err != nil {
				return fmt.Errorf("synthesise world: %w", err)
			}
			sum, stored, err := importInto(ctx, e, "jsonl", world, dir)
			if err != nil {
				return err
			}
			e.logger.Info("imported", "entities", sum.Entities, "events", sum.Events, "stored_events", stored.Events)
		}
	}
	store, err := loadGraph(ctx, dir, 0, e.logger)
	if err != nil {
		return err
	}
	ex, err := pickExamples(store)
	if err != nil {
		return err
	}
	if noModel != nil {
		start := time.Now()
		e.logger.Info("training the first model", "steps", cfg.train.Steps)
		tc := cfg.train
		tc.Logger = e.logger
		ck, err := model.Train(ctx, store, tc, dir, trainProgress(e.stderr, tc.WithDefaults().Steps)) // a bar on a terminal
		if err != nil {
			return fmt.Errorf("train first model: %w", err)
		}
		if _, err := calibrateDefault(ctx, ck, store, e.logger); err != nil {
			return fmt.Errorf("calibrate first model: %w", err)
		}
		e.logger.Info("trained", "version", ck.Version, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	if cfg.prepare {
		e.logger.Info("prepared; serve it with `hir serve --data DIR`", "dir", dir)
		return nil
	}
	return serve(ctx, e, serveConfig{
		dataDir: dir, addr: cfg.addr, apiKeys: []string{key}, train: cfg.train, maxClockSkew: cfg.maxClockSkew,
		prior: defaultPriorFlags(), keepModels: defaultKeepModels,
		ready: func(ctx context.Context, srv *serving.Server, addr net.Addr) {
			if err := printDemo(ctx, e.stdout, srv, baseURL(addr), key, dir, ex); err != nil {
				e.logger.Error("print demo calls", "err", err)
			}
		},
	})
}

// demoKey returns a fresh random API key.
func demoKey() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate API key: %w", err)
	}
	return "demo-" + hex.EncodeToString(b[:]), nil
}

// baseURL returns the http URL of a listening address, with loopback for an
// unspecified host.
func baseURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// demoExamples are real ids of the world the printed calls use.
type demoExamples struct {
	user       graph.Ref   // the user with the most engagement events
	userEvents int         // its engagement events
	clicked    []graph.Ref // ads it engaged with positively, most recent first
	ad         graph.Ref   // one of them, with a campaign
	campaign   graph.Ref   // ad's campaign
	product    graph.Ref   // ad's product ("" ID when none)
	advertiser graph.Ref   // the campaign's advertiser ("" ID when none)
	adText     string
	maxTS      int64
}

// pickExamples chooses the demo's ids from the graph.
func pickExamples(store *graph.Store) (*demoExamples, error) {
	ex := &demoExamples{maxTS: store.MaxTS()}
	var best graph.NodeID
	bestN := -1
	for i := range store.NumNodes(graph.NodeUser) {
		id := graph.NodeID{Type: graph.NodeUser, Idx: uint32(i)}
		n, pos := 0, 0
		store.Neighbors(id, ex.maxTS, func(e graph.Edge) bool {
			if e.Out && e.Nbr.Type == graph.NodeAd {
				n++
				if e.Type.IsPositive() {
					pos++
				}
			}
			return true
		})
		if pos >= 2 && n > bestN {
			best, bestN = id, n
		}
	}
	if bestN < 0 {
		return nil, errors.New("pick demo examples: no user with two positive ad events")
	}
	ex.user, ex.userEvents = store.Ref(best), bestN
	type hit struct {
		ad graph.NodeID
		ts int64
	}
	var hits []hit
	store.Neighbors(best, ex.maxTS, func(e graph.Edge) bool {
		if e.Out && e.Nbr.Type == graph.NodeAd && e.Type.IsPositive() {
			hits = append(hits, hit{e.Nbr, e.TS})
		}
		return true
	})
	slices.SortStableFunc(hits, func(a, b hit) int { return int(b.ts - a.ts) })
	seen := map[graph.NodeID]bool{}
	for _, h := range hits {
		if seen[h.ad] {
			continue
		}
		seen[h.ad] = true
		ex.clicked = append(ex.clicked, store.Ref(h.ad))
		if ex.campaign.ID != "" {
			continue
		}
		store.Neighbors(h.ad, ex.maxTS, func(e graph.Edge) bool {
			switch {
			case e.Out && e.Type == graph.EdgeInCampaign:
				ex.campaign = store.Ref(e.Nbr)
				store.Neighbors(e.Nbr, ex.maxTS, func(c graph.Edge) bool {
					if c.Out && c.Type == graph.EdgeOfAdvertiser {
						ex.advertiser = store.Ref(c.Nbr)
					}
					return true
				})
			case e.Out && e.Type == graph.EdgePromotes:
				ex.product = store.Ref(e.Nbr)
			}
			return true
		})
		if ex.campaign.ID != "" {
			ex.ad = store.Ref(h.ad)
			if en := store.Entity(h.ad); en != nil {
				ex.adText = en.Text
			}
		}
	}
	if ex.campaign.ID == "" {
		return nil, fmt.Errorf("pick demo examples: no ad of %s has a campaign", ex.user)
	}
	ex.clicked = ex.clicked[:min(len(ex.clicked), 3)]
	return ex, nil
}

// demoCall is one example request the demo prints as a curl command.
type demoCall struct {
	comment string
	method  string
	path    string
	body    any  // JSON-encoded; nil: no body
	auth    bool // send the API key
}

// curl renders c as one shell line, as GET /docs renders the documented
// examples (bodies single-quoted JSON).
func (c demoCall) curl(base, key string) (string, error) {
	x := apidoc.Example{Method: c.method, Path: c.path, Auth: c.auth}
	if c.body != nil {
		body, err := json.Marshal(c.body)
		if err != nil {
			return "", fmt.Errorf("encode %s body: %w", c.path, err)
		}
		x.Body = body
	}
	return x.Curl(base, key), nil
}

// demoCalls returns the example requests, in the order they must run (the
// new ad is posted before it is retrieved).
func demoCalls(ex *demoExamples, token string, now time.Time) []demoCall {
	ms := now.UnixMilli()
	ref := func(r graph.Ref) map[string]string { return map[string]string{"type": r.Type.String(), "id": r.ID} }
	var ctxEvents []map[string]any
	for i, a := range ex.clicked {
		ctxEvents = append(ctxEvents, map[string]any{"dst": ref(a), "type": "click", "ts": ms - int64(60_000*(i+1))})
	}
	newAd := graph.Ref{Type: graph.NodeAd, ID: fmt.Sprintf("demo-ad-%d", ms)}
	text := strings.ReplaceAll(ex.adText, "'", " ")
	if text == "" {
		text = "demo ad"
	}
	edges := []map[string]any{
		{"id": newAd.ID + "-campaign", "src": ref(newAd), "dst": ref(ex.campaign), "type": "in_campaign", "ts": ms},
	}
	if ex.product.ID != "" {
		edges = append(edges, map[string]any{"id": newAd.ID + "-product", "src": ref(newAd), "dst": ref(ex.product), "type": "promotes", "ts": ms})
	}
	filter := map[string]any{"attr": "campaign", "eq": ex.campaign.ID}
	if ex.advertiser.ID != "" {
		filter = map[string]any{"attr": "advertiser", "eq": ex.advertiser.ID}
	}
	calls := []demoCall{
		{comment: fmt.Sprintf("Top 10 ads for known user %s (%d ad events), with the interest tokens each matched", ex.user.ID, ex.userEvents),
			method: http.MethodPost, path: "/v1/retrieve", body: map[string]any{"user": ref(ex.user), "k": 10, "explain": true}},
		{comment: "A fresh user nobody has seen, embedded on the fly from three recent clicks (context_events)",
			method: http.MethodPost, path: "/v1/retrieve", body: map[string]any{
				"user": map[string]string{"type": "user", "id": fmt.Sprintf("fresh-%d", ms)}, "k": 10, "context_events": ctxEvents}},
		{comment: fmt.Sprintf("Known user, only ads of %s %s", filter["attr"], filter["eq"]),
			method: http.MethodPost, path: "/v1/retrieve", body: map[string]any{"user": ref(ex.user), "k": 10, "filter": filter}},
		{comment: fmt.Sprintf("The interest tokens (Bag-of-Meaning) of %s, with labels", ex.user.ID),
			method: http.MethodGet, path: "/v1/entities/user/" + ex.user.ID + "/interests"},
		{comment: fmt.Sprintf("Ads nearest to ad %s in the shared embedding space", ex.ad.ID),
			method: http.MethodGet, path: "/v1/entities/ad/" + ex.ad.ID + "/similar?target_type=ad&k=5"},
		{comment: fmt.Sprintf("Advertisers nearest to user %s", ex.user.ID),
			method: http.MethodGet, path: "/v1/entities/user/" + ex.user.ID + "/similar?target_type=advertiser&k=5"},
	}
	if token != "" {
		calls = append(calls, demoCall{comment: "One interest token: label, parent, children, size, sample members",
			method: http.MethodGet, path: "/v1/tokens/" + token})
	}
	return append(calls,
		demoCall{comment: "The serving model: version, training time, metrics, index size",
			method: http.MethodGet, path: "/v1/model"},
		demoCall{comment: fmt.Sprintf("Post an event: %s clicks %s (idempotent by id; needs the API key)", ex.user.ID, ex.clicked[0].ID),
			method: http.MethodPost, path: "/v1/events", auth: true, body: map[string]any{"events": []map[string]any{
				{"id": fmt.Sprintf("demo-click-%d", ms), "src": ref(ex.user), "dst": ref(ex.clicked[0]), "type": "click", "ts": ms}}}},
		demoCall{comment: "Post a new ad launching now (start_time: it is fresh, so its engagement prior starts at the fresh floor) ...",
			method: http.MethodPost, path: "/v1/entities", auth: true,
			body: map[string]any{"entities": []map[string]any{{"type": "ad", "id": newAd.ID, "text": text,
				"attrs": map[string]string{"status": "active", "start_time": time.UnixMilli(ms).UTC().Format(time.RFC3339)}}}}},
		demoCall{comment: fmt.Sprintf("... and its structure edges (campaign %s, product %s); it is indexed at once", ex.campaign.ID, ex.product.ID),
			method: http.MethodPost, path: "/v1/events", auth: true, body: map[string]any{"events": edges}},
		demoCall{comment: fmt.Sprintf("Retrieve within campaign %s: the new ad %s is a candidate", ex.campaign.ID, newAd.ID),
			method: http.MethodPost, path: "/v1/retrieve", body: map[string]any{"user": ref(ex.user), "k": 100,
				"exclude_seen": false, "filter": map[string]any{"attr": "campaign", "eq": ex.campaign.ID}}},
		demoCall{comment: "Train the next model version in the background (poll GET /v1/model)",
			method: http.MethodPost, path: "/v1/model/train", auth: true},
	)
}

// printDemo prints the server's address, its API key and the example curl
// calls. It reads one of the user's interest tokens from the running server
// so that the token call names a real one.
func printDemo(ctx context.Context, w io.Writer, srv *serving.Server, base, key, dir string, ex *demoExamples) error {
	version, ads := "none", 0
	if cur := srv.Served(); cur != nil {
		version, ads = cur.Version(), cur.IndexSize()
	}
	token, err := firstToken(ctx, base, ex.user)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nHIR demo: serving model %s (%d ads) at %s\ndata directory: %s\n", version, ads, base, dir)
	fmt.Fprintf(&b, "interest explorer (web page): %s/ui\n", base)
	fmt.Fprintf(&b, "API key (for POST /v1/entities, /v1/events, /v1/model/train): %s\n\n", key)
	for _, c := range demoCalls(ex, token, time.Now()) {
		line, err := c.curl(base, key)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "# %s\n%s\n\n", c.comment, line)
	}
	fmt.Fprintf(&b, "# Also: %s/metrics (Prometheus), %s/readyz\n%s\n", base, base, demoDone)
	_, err = io.WriteString(w, b.String())
	return err
}

// firstToken asks the server for user's interests and returns the first
// token ("" when it has none).
func firstToken(ctx context.Context, base string, user graph.Ref) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/entities/user/"+user.ID+"/interests", nil)
	if err != nil {
		return "", err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("get interests: %w", err)
	}
	defer res.Body.Close()
	var body struct {
		Tokens []struct {
			Token string `json:"token"`
		} `json:"tokens"`
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("get interests: status %s", res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return "", fmt.Errorf("decode interests: %w", err)
	}
	if len(body.Tokens) == 0 {
		return "", nil
	}
	return body.Tokens[0].Token, nil
}
