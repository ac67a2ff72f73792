package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/retrieval"
	"github.com/hir-ads/hir/serving"
)

// syncBuffer is an io.Writer safe for concurrent use whose contents can be
// read while it is written.
type syncBuffer struct {
	mtx sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mtx.Lock()
	defer b.mtx.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mtx.Lock()
	defer b.mtx.Unlock()
	return b.buf.String()
}

func serveTestEnv(t *testing.T) (*env, *syncBuffer, *syncBuffer) {
	t.Helper()
	var out, errw syncBuffer
	return &env{stdout: &out, stderr: &errw, logger: slog.New(slog.NewTextHandler(&errw, nil))}, &out, &errw
}

func TestEnvAPIKeys(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"one", "abcdefgh1", []string{"abcdefgh1"}},
		{"spaces and blanks", " k1-aaaaaaa , ,k2-bbbbbbb,", []string{"k1-aaaaaaa", "k2-bbbbbbb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, envAPIKeys(tc.in)); diff != "" {
				t.Errorf("envAPIKeys(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr net.Addr
		want string
	}{
		{"unspecified v6", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://127.0.0.1:8080"},
		{"unspecified v4", &net.TCPAddr{IP: net.IPv4zero, Port: 80}, "http://127.0.0.1:80"},
		{"loopback", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}, "http://127.0.0.1:41234"},
		{"v6 host", &net.TCPAddr{IP: net.ParseIP("::1"), Port: 9}, "http://[::1]:9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := baseURL(tc.addr); got != tc.want {
				t.Errorf("baseURL(%v) = %q, want %q", tc.addr, got, tc.want)
			}
		})
	}
}

// TestServeRedisUnreachable: with --redis pointing at nothing, serve fails
// at once with a clear error, before touching the data directory.
func TestServeRedisUnreachable(t *testing.T) {
	e, _, _ := serveTestEnv(t)
	dir := filepath.Join(t.TempDir(), "data")
	start := time.Now()
	err := serve(context.Background(), e, serveConfig{dataDir: dir, init: true, addr: "127.0.0.1:0", redis: "127.0.0.1:1"})
	if !errors.Is(err, errRedisUnreachable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("serve with unreachable --redis = %v, want errRedisUnreachable naming the address", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("serve took %v to give up", d)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data directory created before Redis answered: %v", err)
	}
}

// TestServeAndTrainFlags checks the exit codes of bad and good flags of
// hir serve and hir train.
func TestServeAndTrainFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"no data", []string{"serve"}, 2},
		{"bad log level", []string{"serve", "--data", "x", "--log-level", "loud"}, 2},
		{"bad fresh rank", []string{"serve", "--data", "x", "--fresh-rank", "-1"}, 2},
		{"bad train-spectral", []string{"serve", "--data", "x", "--train-spectral", "many"}, 2},
		{"error band not a number", []string{"serve", "--data", "x", "--error-band", "NaN"}, 2},
		{"error band infinite", []string{"serve", "--data", "x", "--error-band", "+Inf"}, 2},
		{"redis unreachable", []string{"serve", "--data", "DIR", "--redis", "127.0.0.1:1"}, 1},
		{"bad replica id", []string{"serve", "--data", "DIR", "--redis", "127.0.0.1:1", "--replica-id", "a/b"}, 1},
		{"bad debug address", []string{"serve", "--data", "DIR", "--debug-addr", "256.0.0.1:0"}, 1},
		{"help", []string{"serve", "-h"}, 0},
		{"train: no data", []string{"train"}, 2},
		{"train: bad steps", []string{"train", "--data", "DIR", "--steps", "x"}, 2},
		{"train: bad debug address", []string{"train", "--data", "DIR", "--debug-addr", "256.0.0.1:0"}, 1},
		{"train: help", []string{"train", "-h"}, 0},
		{"train: bad spectral", []string{"train", "--data", "DIR", "--spectral", "x"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, a := range tc.args {
				if a == "DIR" {
					tc.args[i] = t.TempDir()
				}
			}
			var out, errw bytes.Buffer
			if code := run(context.Background(), tc.args, &out, &errw); code != tc.code {
				t.Errorf("run(%v) = %d, want %d; stderr:\n%s", tc.args, code, tc.code, errw.String())
			}
		})
	}
}

// TestServeDebugAddr checks that --debug-addr serves Go's profiles on a
// second listener, and that the API's listener does not.
func TestServeDebugAddr(t *testing.T) {
	e, _, stderr := serveTestEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := map[string]int{}
	ready := func(ctx context.Context, _ *serving.Server, addr net.Addr) {
		defer cancel()
		m := regexp.MustCompile(`addr=(http://\S+/debug/pprof/)`).FindStringSubmatch(stderr.String())
		if m == nil {
			t.Errorf("no profile address logged:\n%s", stderr)
			return
		}
		for name, url := range map[string]string{"index": m[1], "heap": m[1] + "heap?debug=1",
			"goroutines": m[1] + "goroutine?debug=1", "api listener": baseURL(addr) + "/debug/pprof/"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			got[name] = res.StatusCode
		}
	}
	if err := serve(ctx, e, serveConfig{dataDir: t.TempDir(), addr: "127.0.0.1:0", debugAddr: "127.0.0.1:0", ready: ready}); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr)
	}
	want := map[string]int{"index": 200, "heap": 200, "goroutines": 200, "api listener": 404}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status per path (-want +got):\n%s", diff)
	}
}

// TestServeAddrFile: --addr-file holds the listen address once the
// listener is open, whole, and no temporary file is left beside it.
func TestServeAddrFile(t *testing.T) {
	e, _, stderr := serveTestEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	file := filepath.Join(dir, "addr")
	var got, want string
	ready := func(_ context.Context, _ *serving.Server, addr net.Addr) {
		defer cancel()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("read --addr-file: %v", err)
		}
		got, want = string(b), addr.String()+"\n"
	}
	if err := serve(ctx, e, serveConfig{dataDir: filepath.Join(dir, "data"), init: true, addr: "127.0.0.1:0", addrFile: file, ready: ready}); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr)
	}
	if got != want || strings.HasSuffix(got, ":0\n") {
		t.Errorf("--addr-file holds %q, want %q", got, want)
	}
	if _, err := os.Stat(file + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left: %v", err)
	}
}

// TestServeWithoutModel serves an empty data directory: ingestion works
// with an API key, retrieval answers 503 problem+json
// until a model exists, and the server shuts down cleanly when its context
// ends.
func TestServeWithoutModel(t *testing.T) {
	e, _, stderr := serveTestEnv(t)
	const key = "env-key-0123456789"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		name   string
		status int
		ctype  string
		body   string
	}
	var results []result
	done := make(chan error, 1)
	ready := func(ctx context.Context, srv *serving.Server, addr net.Addr) {
		defer cancel() // then serve shuts down
		base := baseURL(addr)
		do := func(name, method, path, auth, body string) {
			req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			results = append(results, result{name, res.StatusCode, res.Header.Get("Content-Type"), string(b)})
		}
		ents := `{"entities":[{"type":"user","id":"u1"},{"type":"ad","id":"a1","text":"red shoes"}]}`
		do("ingest no key", http.MethodPost, "/v1/entities", "", ents)
		do("ingest", http.MethodPost, "/v1/entities", key, ents)
		do("events", http.MethodPost, "/v1/events", key,
			`{"events":[{"id":"e1","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1700000000000}]}`)
		do("retrieve", http.MethodPost, "/v1/retrieve", "", `{"user":{"type":"user","id":"u1"}}`)
		do("readyz", http.MethodGet, "/readyz", "", "")
		do("model", http.MethodGet, "/v1/model", "", "")
		do("metrics", http.MethodGet, "/metrics", "", "")
	}
	dir := t.TempDir()
	go func() {
		done <- serve(ctx, e, serveConfig{dataDir: dir, addr: "127.0.0.1:0",
			apiKeys: []string{"other-key-xxxxxxx", key}, ready: ready})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr)
		}
	case <-time.After(50 * time.Second):
		t.Fatalf("serve did not shut down\n%s", stderr)
	}
	want := map[string]int{"ingest no key": 401, "ingest": 200, "events": 200, "retrieve": 503, "readyz": 503,
		"model": 200, "metrics": 200}
	if len(results) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(results), len(want), results)
	}
	for _, r := range results {
		if r.status != want[r.name] {
			t.Errorf("%s: status %d, want %d: %s", r.name, r.status, want[r.name], r.body)
		}
		if r.status >= 400 && r.ctype != "application/problem+json" {
			t.Errorf("%s: content type %q, want application/problem+json", r.name, r.ctype)
		}
	}
	if i := slices.IndexFunc(results, func(r result) bool { return r.name == "metrics" }); i >= 0 &&
		!strings.Contains(results[i].body, "hir_http_request_duration_seconds") {
		t.Errorf("metrics lack hir_http_request_duration_seconds:\n%.500s", results[i].body)
	}

	// The events are durable: a second serve replays them.
	e2, _, stderr2 := serveTestEnv(t)
	ctx2, cancel2 := context.WithCancel(context.Background())
	var events int64
	err := serve(ctx2, e2, serveConfig{dataDir: dir, addr: "127.0.0.1:0", ready: func(_ context.Context, srv *serving.Server, _ net.Addr) {
		events = srv.Store().NumEvents()
		cancel2()
	}})
	if err != nil {
		t.Fatalf("second serve: %v\n%s", err, stderr2)
	}
	if events != 1 {
		t.Errorf("replayed %d events, want 1", events)
	}
}

// TestServePersistedSnapshot serves a data directory with a model twice:
// the first start-up embeds every entity and persists the snapshot files
// into the model's directory, the second loads them instead, and both
// answer retrieval identically.
func TestServePersistedSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	e0, _, stderr0 := serveTestEnv(t)
	dir := t.TempDir()
	cfg := tinyDemo("", dir)
	world := filepath.Join(dir, "world")
	if _, err := dataset.Synth(ctx, cfg.synth, world); err != nil {
		t.Fatal(err)
	}
	if _, _, err := importInto(ctx, e0, "jsonl", world, dir); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr0)
	}
	store, err := loadGraph(ctx, dir, 0, e0.logger)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := model.Train(ctx, store, cfg.train, dir, nil)
	if err != nil {
		t.Fatal(err)
	}

	// start serves dir once and returns the retrieval answers (candidates
	// only) of the first users, and the log.
	start := func() (map[string]string, string) {
		e, _, stderr := serveTestEnv(t)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		got := map[string]string{}
		err := serve(ctx, e, serveConfig{dataDir: dir, addr: "127.0.0.1:0", ready: func(ctx context.Context, srv *serving.Server, addr net.Addr) {
			defer cancel()
			for i := range 4 {
				u := srv.Store().Ref(graph.NodeID{Type: graph.NodeUser, Idx: uint32(i)}).ID
				res, err := http.Post(baseURL(addr)+"/v1/retrieve", "application/json",
					strings.NewReader(`{"user":{"type":"user","id":"`+u+`"},"k":10}`))
				if err != nil {
					t.Error(err)
					return
				}
				var body struct {
					Candidates json.RawMessage `json:"candidates"`
				}
				err = json.NewDecoder(res.Body).Decode(&body)
				res.Body.Close()
				if err != nil || res.StatusCode != http.StatusOK || len(body.Candidates) < 10 {
					t.Errorf("retrieve %s: %d %v %s", u, res.StatusCode, err, body.Candidates)
				}
				got[u] = string(body.Candidates)
			}
		}})
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr)
		}
		return got, stderr.String()
	}
	first, log1 := start()
	if !strings.Contains(log1, "no persisted snapshot files") || !strings.Contains(log1, "generation files persisted") {
		t.Errorf("first start-up did not build and persist the snapshot; log:\n%s", log1)
	}
	for _, f := range []string{retrieval.FileEmbeddings, retrieval.FileIndex} {
		if _, err := os.Stat(filepath.Join(ck.Dir, f)); err != nil {
			t.Errorf("first start-up did not persist %s: %v", f, err)
		}
	}
	second, log2 := start()
	if !strings.Contains(log2, "generation loaded from files") || strings.Contains(log2, "generation built") {
		t.Errorf("second start-up did not load the persisted snapshot; log:\n%s", log2)
	}
	if len(first) != 4 {
		t.Fatalf("got answers for %d users, want 4", len(first))
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("retrieval after a start-up from persisted files differs (-built +loaded):\n%s", diff)
	}
}
