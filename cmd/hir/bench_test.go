package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hir-ads/hir/dataset"
)

func TestLatencySummary(t *testing.T) {
	ms := time.Millisecond
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * ms // unsorted on purpose
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want benchLatency
	}{
		{"empty", nil, benchLatency{}},
		{"one", []time.Duration{3 * ms}, benchLatency{Mean: 3, P50: 3, P90: 3, P99: 3, Max: 3}},
		{"two", []time.Duration{4 * ms, 2 * ms}, benchLatency{Mean: 3, P50: 2, P90: 4, P99: 4, Max: 4}},
		{"1..100", hundred, benchLatency{Mean: 50.5, P50: 50, P90: 90, P99: 99, Max: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, latencySummary(slices.Clone(tc.in))); diff != "" {
				t.Errorf("latencySummary mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBenchBodies(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.txt")
	if err := os.WriteFile(path, []byte("# user ads\nu1 a1 a2\n\nu2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	profiles, err := benchProfilesFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(profiles) != 2 || profiles[0].user != "u1" || len(profiles[0].ads) != 2 || profiles[1].user != "u2" {
		t.Fatalf("benchProfilesFromFile = %+v", profiles)
	}
	now := time.UnixMilli(1_800_000_000_000)
	for _, tc := range []struct {
		name string
		mode string
		want []string
	}{
		{"known", benchKnown, []string{`{"user":{"type":"user","id":"u1"},"k":7}`, `{"user":{"type":"user","id":"u2"},"k":7}`}},
		{"fresh", benchFresh, []string{`{"user":{"type":"user","id":"bench-fresh-0"},"k":7,"context_events":[` +
			`{"dst":{"type":"ad","id":"a1"},"type":"click","ts":1799999880000},` +
			`{"dst":{"type":"ad","id":"a2"},"type":"click","ts":1799999940000}]}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bodies, err := benchBodies(profiles, benchConfig{mode: tc.mode, k: 7, seed: 1}, now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range bodies {
				got = append(got, string(b))
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("benchBodies(%s) mismatch (-want +got):\n%s", tc.mode, diff)
			}
		})
	}
	if _, err := benchBodies(profiles[1:], benchConfig{mode: benchFresh, k: 1}, now); err == nil {
		t.Error("fresh bodies from a user without ads: want an error")
	}
}

// TestBenchProfilesFromWorld reads a synthetic world and checks the
// profiles against the events file itself.
func TestBenchProfilesFromWorld(t *testing.T) {
	dir := t.TempDir()
	if _, err := dataset.Synth(context.Background(), dataset.SynthOptions{Users: 30, Ads: 40, Seed: 2, Coarse: 2, Mid: 4, Fine: 8,
		Advertisers: 2, Campaigns: 4, Products: 10, EventsPerUser: 20}, dir); err != nil {
		t.Fatal(err)
	}
	profiles, err := benchProfilesFromWorld(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// Count user->ad engagement events straight from events.jsonl.
	raw, err := os.ReadFile(filepath.Join(dir, dataset.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for line := range bytes.Lines(raw) {
		var ev struct {
			Src, Dst struct{ Type, ID string }
			Type     string
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Src.Type == "user" && ev.Dst.Type == "ad" {
			want[ev.Src.ID]++
		}
	}
	got := map[string]int{}
	for _, p := range profiles {
		got[p.user] = p.events
		if len(p.ads) > benchContextEvents {
			t.Errorf("%s has %d context ads, want at most %d", p.user, len(p.ads), benchContextEvents)
		}
	}
	if len(want) == 0 {
		t.Fatal("the world has no user->ad events")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("profile event counts mismatch (-want +got):\n%s", diff)
	}
}

func TestBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no source", []string{"bench"}},
		{"two sources", []string{"bench", "--data", "x", "--users-file", "y"}},
		{"bad mode", []string{"bench", "--data", "x", "--mode", "warm"}},
		{"zero concurrency", []string{"bench", "--data", "x", "--concurrency", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			if code := run(context.Background(), tc.args, &out, &errw); code != 2 {
				t.Errorf("run(%v) = %d, want 2; stderr:\n%s", tc.args, code, errw.String())
			}
		})
	}
}

// TestBenchRunClosedLoop checks that the load generator never has more
// requests at the server than its clients: a request is not cut off at the
// end of the warm-up or of the measurement (a cut-off request goes on
// running in the server beside the next ones, and a server bounding each
// caller's share answered such overlaps with 429).
func TestBenchRunClosedLoop(t *testing.T) {
	const clients = 3
	var running, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(30 * time.Millisecond) // a handler that does not watch its client
		if n > clients {
			http.Error(w, "too many requests of this caller in flight", http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"candidates":[]}`))
	}))
	defer srv.Close()
	cfg := benchConfig{url: srv.URL, mode: benchKnown, concurrency: clients, warmup: 45 * time.Millisecond,
		duration: 200 * time.Millisecond, k: 10}
	rep, err := benchRun(context.Background(), cfg, [][]byte{[]byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 0 || peak.Load() > clients {
		t.Errorf("errors %d (%v), peak requests at the server %d, want 0 and at most %d", rep.Errors, rep.Status, peak.Load(), clients)
	}
	if rep.Requests == 0 {
		t.Errorf("no request measured: %+v", rep)
	}
}

// TestBenchRunReusesConnections checks that every client keeps its
// connection whatever the size of the answers: a body left partly unread
// closes its connection, and a load generator that opened one per request
// measured the server's accept path instead of its retrieval (answers of
// k = 100 candidates are larger than the part read for error messages).
func TestBenchRunReusesConnections(t *testing.T) {
	const clients = 3
	answer := bytes.Repeat([]byte(" "), 20000)
	answer = append([]byte(`{"candidates":[]`), append(answer, '}')...)
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	cfg := benchConfig{url: srv.URL, mode: benchKnown, concurrency: clients, warmup: 20 * time.Millisecond,
		duration: 200 * time.Millisecond, k: 100}
	rep, err := benchRun(context.Background(), cfg, [][]byte{[]byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 0 || rep.Requests < 10 {
		t.Fatalf("errors %d, requests %d", rep.Errors, rep.Requests)
	}
	// A connection goes back to the idle pool just after its answer is
	// read, so a client's next request may now and then dial before it is
	// back (net/http then keeps both): a few more than one per client.
	if n := conns.Load(); n > 2*clients {
		t.Errorf("%d connections opened for %d requests of %d clients, want at most %d", n, rep.Requests, clients, 2*clients)
	}
}
