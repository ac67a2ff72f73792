package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/eval"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/serving"
)

// restEvalTolerance is how far the service's recall@20 may be from the
// in-process token index's on the same model and split. Both score the same
// weights over the same graph with the same re-rank, so they agree exactly
// today; the margin allows one or two queries to change an answer (a query
// of n relevant items losing one moves the mean by 1/(n·queries), 0.004 to
// 0.02 here), not a systematic drift.
const restEvalTolerance = 0.01

// restEvalWorld is a small synthetic world with enough clicks for about 50
// chrono queries.
func restEvalWorld() dataset.SynthOptions {
	return dataset.SynthOptions{Users: 300, Ads: 150, Seed: 1, Coarse: 4, Mid: 8, Fine: 16, Days: 20, EventsPerUser: 80}
}

// tinyTrain is the demo test's model and schedule, which train in seconds.
func tinyTrain() model.TrainConfig { return tinyDemo("", "").train }

// startServe runs serve on a free loopback port over an empty data
// directory and returns its base URL; the server stops when the test ends.
func startServe(t *testing.T, dataDir string, train model.TrainConfig) string {
	t.Helper()
	e, _, stderr := serveTestEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	cfg := serveConfig{dataDir: dataDir, init: true, addr: "127.0.0.1:0", train: train, prior: defaultPriorFlags(),
		ready: func(_ context.Context, _ *serving.Server, a net.Addr) { addrs <- a }}
	go func() { done <- serve(ctx, e, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not shut down")
		}
	})
	select {
	case a := <-addrs:
		return baseURL(a)
	case err := <-done:
		t.Fatalf("serve returned early: %v\n%s", err, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start\n%s", stderr)
	}
	return ""
}

// runEvalJSON runs `hir eval` with args and returns its JSON report and
// stdout.
func runEvalJSON(t *testing.T, args ...string) (*eval.Report, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append(append([]string{"eval"}, args...), "--json", out), &stdout, &stderr); code != 0 {
		t.Fatalf("hir eval %v: exit %d\n%s", args, code, stderr.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep eval.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return &rep, stdout.String()
}

// TestEvalService scores a real `hir serve` on a small synthetic world
// through its REST API (`hir eval --service`, chrono) and the model it
// trained in process (`hir eval --model`): the service's recall is
// non-trivial and matches the in-process token index's.
func TestEvalService(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	world := t.TempDir()
	if _, err := dataset.Synth(ctx, restEvalWorld(), world); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	base := startServe(t, dataDir, tinyTrain())

	svc, stdout := runEvalJSON(t, "--data", world, "--service", base)
	if !strings.Contains(stdout, "| service | all |") || !strings.Contains(stdout, "0 queries answered 404") {
		t.Errorf("stdout lacks the service row or the 404 count:\n%s", stdout)
	}
	ours, _ := runEvalJSON(t, "--data", world, "--model", dataDir, "--methods", "ours", "--exhaustive-max", "16384")
	rs, ro := svc.Get(methodService, eval.SliceAll), ours.Get(eval.MethodOursTokens, eval.SliceAll)
	if rs == nil || ro == nil {
		t.Fatalf("results: service %v, ours-tokens %v", rs, ro)
	}
	key := eval.MetricKey("recall", 20)
	got, want := rs.Metrics[key], ro.Metrics[key]
	t.Logf("recall@20: service %.4f, in-process ours-tokens %.4f (%d queries)", got, want, rs.Queries)
	if rs.Queries != ro.Queries || rs.Queries < 20 {
		t.Errorf("service queries %d, in-process %d: want the same, >= 20", rs.Queries, ro.Queries)
	}
	if got <= 0 {
		t.Errorf("service recall@20 = %v, want > 0", got)
	}
	if math.Abs(got-want) > restEvalTolerance {
		t.Errorf("service recall@20 = %.4f, want within %v of in-process ours-tokens %.4f", got, restEvalTolerance, want)
	}

	// The service now holds exactly the training window: scored again
	// without ingesting or training, it answers the same.
	again, _ := runEvalJSON(t, "--data", world, "--service", base, "--service-no-ingest")
	if ra := again.Get(methodService, eval.SliceAll); ra == nil || ra.Metrics[key] != got || ra.Queries != rs.Queries {
		t.Errorf("--service-no-ingest result %+v, want recall@20 %v over %d queries", ra, got, rs.Queries)
	}

	// The counting terms off per request (prior_weight 0,
	// coengagement_weight 0): the service ranks by the embeddings alone,
	// as the in-process token index does with the same weights, and the
	// answers differ from the defaults'.
	off := []string{"--prior-weight", "0", "--coengage-weight", "0"}
	svcOff, stdout := runEvalJSON(t, append([]string{"--data", world, "--service", base, "--service-no-ingest"}, off...)...)
	if !strings.Contains(stdout, "re-rank weights prior_weight 0, coengagement_weight 0") {
		t.Errorf("stdout does not name the per-request weights:\n%s", stdout)
	}
	oursOff, _ := runEvalJSON(t, append([]string{"--data", world, "--model", dataDir, "--methods", "ours", "--exhaustive-max", "16384"}, off...)...)
	rs, ro = svcOff.Get(methodService, eval.SliceAll), oursOff.Get(eval.MethodOursTokens, eval.SliceAll)
	if rs == nil || ro == nil {
		t.Fatalf("weights off: service %v, ours-tokens %v", rs, ro)
	}
	t.Logf("weights off, recall@20: service %.4f, in-process ours-tokens %.4f", rs.Metrics[key], ro.Metrics[key])
	if math.Abs(rs.Metrics[key]-ro.Metrics[key]) > restEvalTolerance {
		t.Errorf("weights off: service recall@20 = %.4f, want within %v of in-process ours-tokens %.4f", rs.Metrics[key], restEvalTolerance, ro.Metrics[key])
	}
	if ndcg := eval.MetricKey("ndcg", 20); rs.Metrics[ndcg] == svc.Get(methodService, eval.SliceAll).Metrics[ndcg] {
		t.Errorf("weights off: ndcg@20 %v equals the defaults': the weights were not sent", rs.Metrics[ndcg])
	}
}

// TestEvalServiceInlineUsers replays the test window into the service
// (each event posted after the queries it could answer) with no user
// entities posted: users the service has not seen yet answer 404, counted.
// The world's impressions are dropped, since every synthetic click follows
// an impression of the same ad and would leave replay no query.
func TestEvalServiceInlineUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	synth := t.TempDir()
	opts := restEvalWorld()
	opts.Users, opts.Ads = 150, 100
	if _, err := dataset.Synth(ctx, opts, synth); err != nil {
		t.Fatal(err)
	}
	world := t.TempDir()
	for _, name := range []string{"entities.jsonl", "events.jsonl"} {
		raw, err := os.ReadFile(filepath.Join(synth, name))
		if err != nil {
			t.Fatal(err)
		}
		var kept []byte
		for line := range strings.Lines(string(raw)) {
			if !strings.Contains(line, `"type":"impression"`) {
				kept = append(kept, line...)
			}
		}
		if err := os.WriteFile(filepath.Join(world, name), kept, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := startServe(t, t.TempDir(), tinyTrain())
	rep, stdout := runEvalJSON(t, "--data", world, "--service", base, "--service-inline-users", "--protocol", "replay")
	r := rep.Get(methodService, eval.SliceAll)
	if r == nil || r.Queries < 20 {
		t.Fatalf("service result %v, want >= 20 queries\n%s", r, stdout)
	}
	t.Logf("replay, inline users: %d queries, hit@20 %.4f\n%s", r.Queries, r.Metrics[eval.MetricKey("hit", 20)], stdout)
	// Users whose first event lies in the window were never posted: the
	// service answers them all the same (new-user candidates), never 404.
	if !strings.Contains(stdout, "; 0 queries answered 404") {
		t.Errorf("never-seen users answered 404:\n%s", stdout)
	}
	if hit := r.Metrics[eval.MetricKey("hit", 20)]; hit == 0 {
		t.Errorf("never-seen users: hit@20 0, want new-user candidates that hit")
	}
}

func TestParseEvalServiceFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		methods []string
		service bool
		// prior and coengage are the weights sent per request ("": none).
		prior, coengage string
	}{
		{name: "service alone", args: []string{"--data", "d", "--service", "http://h:1"}, service: true, methods: []string{}},
		{name: "service with baselines", args: []string{"--data", "d", "--service", "http://h:1", "--methods", "popularity,service"},
			service: true, methods: []string{"popularity"}},
		{name: "per-request weights", args: []string{"--data", "d", "--service", "http://h:1", "--prior-weight", "0", "--coengage-weight", "0.5"},
			service: true, methods: []string{}, prior: "0", coengage: "0.5"},
		{name: "service method without URL", args: []string{"--data", "d", "--methods", "service"}, wantErr: true},
		{name: "URL without service method", args: []string{"--data", "d", "--service", "http://h:1", "--methods", "bpr"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseEvalFlags(testEnv(), tc.args)
			if tc.wantErr {
				if !errors.Is(err, errUsage) {
					t.Fatalf("parseEvalFlags(%q) error = %v, want errUsage", tc.args, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseEvalFlags(%q): %v", tc.args, err)
			}
			if f.useService != tc.service || f.useOurs || strings.Join(f.cfg.Methods, ",") != strings.Join(tc.methods, ",") {
				t.Errorf("service %v ours %v methods %v, want service %v, no ours, methods %v",
					f.useService, f.useOurs, f.cfg.Methods, tc.service, tc.methods)
			}
			str := func(v *float32) string {
				if v == nil {
					return ""
				}
				return fmt.Sprint(*v)
			}
			if p, c := str(f.service.PriorWeight), str(f.service.CoengagementWeight); p != tc.prior || c != tc.coengage {
				t.Errorf("per-request weights %q, %q, want %q, %q", p, c, tc.prior, tc.coengage)
			}
		})
	}
}

// TestEvalServiceNoProfiles checks what --service-no-profiles posts: every
// user entity with its id alone, ads with their content.
func TestEvalServiceNoProfiles(t *testing.T) {
	var posted []api.Entity
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.EntitiesRequest
		if r.URL.Path != "/v1/entities" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		posted = append(posted, req.Entities...)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(api.IngestResult{Entities: len(req.Entities)})
	}))
	defer srv.Close()
	cat := &eval.Catalog{Users: []string{"u1", "u2"}, Items: []string{"a1"}, Entities: map[graph.Ref]*graph.Entity{
		{Type: graph.NodeUser, ID: "u1"}: {Type: graph.NodeUser, ID: "u1", Text: "engineer", Attrs: map[string]string{"age": "25-34"}},
		{Type: graph.NodeAd, ID: "a1"}:   {Type: graph.NodeAd, ID: "a1", Text: "guitar strings", Attrs: map[string]string{"year": "1998"}},
	}}
	for _, noProfiles := range []bool{false, true} {
		posted = nil
		s, err := newServiceMethod(serviceOptions{URL: srv.URL, NoProfiles: noProfiles})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.postEntities(context.Background(), cat); err != nil {
			t.Fatal(err)
		}
		byID := map[string]api.Entity{}
		for _, e := range posted {
			byID[e.Id] = e
		}
		u1, a1, u2 := byID["u1"], byID["a1"], byID["u2"]
		if len(posted) != 3 || a1.Text == nil || *a1.Text != "guitar strings" || a1.Attrs == nil || u2.Text != nil || u2.Attrs != nil {
			t.Fatalf("no profiles %v: posted %+v, want u1, u2 (bare) and a1 with its content", noProfiles, posted)
		}
		if bare := u1.Text == nil && u1.Attrs == nil; bare != noProfiles {
			t.Errorf("no profiles %v: u1 posted as %+v", noProfiles, u1)
		}
	}
}
