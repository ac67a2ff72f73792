package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
)

// curlCall is one parsed curl command line.
type curlCall struct {
	method, url, body string
	header            http.Header
}

// shellWords splits a line into words, honouring single quotes and,
// outside them, backslash escapes (what the demo prints).
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted, escaped := false, false, false
	for _, r := range line {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case !quoted && r == '\\':
			escaped, inWord = true, true
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// parseCurl parses the curl lines the demo prints.
func parseCurl(line string) (curlCall, error) {
	w, err := shellWords(line)
	if err != nil {
		return curlCall{}, err
	}
	c := curlCall{method: http.MethodGet, header: http.Header{}}
	if len(w) == 0 || w[0] != "curl" {
		return c, fmt.Errorf("not a curl line: %q", line)
	}
	for i := 1; i < len(w); i++ {
		arg := func() (string, error) {
			if i+1 >= len(w) {
				return "", fmt.Errorf("%s without a value in %q", w[i], line)
			}
			i++
			return w[i], nil
		}
		switch w[i] {
		case "-sS":
		case "-X":
			if c.method, err = arg(); err != nil {
				return c, err
			}
		case "-H":
			h, err := arg()
			if err != nil {
				return c, err
			}
			k, v, ok := strings.Cut(h, ": ")
			if !ok {
				return c, fmt.Errorf("bad header %q", h)
			}
			c.header.Add(k, v)
		case "-d":
			if c.body, err = arg(); err != nil {
				return c, err
			}
		default:
			if strings.HasPrefix(w[i], "-") || c.url != "" {
				return c, fmt.Errorf("unexpected argument %q in %q", w[i], line)
			}
			c.url = w[i]
		}
	}
	if c.url == "" {
		return c, fmt.Errorf("no URL in %q", line)
	}
	return c, nil
}

func TestCurlRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		call demoCall
		want curlCall
	}{
		{"get", demoCall{method: http.MethodGet, path: "/v1/model"},
			curlCall{method: "GET", url: "http://h:1/v1/model", header: http.Header{}}},
		{"post with key", demoCall{method: http.MethodPost, path: "/v1/events", auth: true, body: map[string]any{"a": "b c"}},
			curlCall{method: "POST", url: "http://h:1/v1/events", body: `{"a":"b c"}`,
				header: http.Header{"Authorization": {"Bearer k-123"}, "Content-Type": {"application/json"}}}},
		{"query string", demoCall{method: http.MethodGet, path: "/v1/entities/ad/a1/similar?target_type=ad&k=5"},
			curlCall{method: "GET", url: "http://h:1/v1/entities/ad/a1/similar?target_type=ad&k=5", header: http.Header{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, err := tc.call.curl("http://h:1", "k-123")
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseCurl(line)
			if err != nil {
				t.Fatal(err)
			}
			if got.method != tc.want.method || got.url != tc.want.url || got.body != tc.want.body ||
				fmt.Sprint(got.header) != fmt.Sprint(tc.want.header) {
				t.Errorf("parseCurl(%q) = %+v, want %+v", line, got, tc.want)
			}
		})
	}
	// A single quote in a body is escaped for the shell, and reads back.
	line, err := (demoCall{method: http.MethodPost, path: "/x", body: "it's"}).curl("http://h", "k")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := parseCurl(line); err != nil || got.body != `"it's"` {
		t.Errorf("parseCurl(%q) = body %q (%v), want the JSON string \"it's\"", line, got.body, err)
	}
}

// tinyDemo is a demo world and model that train in seconds.
func tinyDemo(addr, dir string) demoConfig {
	var tc model.TrainConfig
	tc.Model = model.Config{Dim: 16, Heads: 2, Layers: 1, FFNDim: 32, EmbedDim: 16, HashK: 8, HashDim: 16,
		TextBkts: 512, TextLen: 8, AttrBkts: 64, AttrLen: 4, VectorDim: 4, Prototypes: []int{4, 8}}
	tc.Sampler.Teacher = graph.ViewOptions{MaxNodes: 8, Hops: 2}
	tc.Sampler.Student = graph.ViewOptions{MaxNodes: 4, Hops: 1}
	tc.Pairs, tc.Steps, tc.EvalEvery, tc.LogEvery, tc.Seed = 8, 6, 6, 6, 3
	return demoConfig{addr: addr, data: dir, train: tc, synth: dataset.SynthOptions{
		Users: 80, Ads: 120, Seed: 3, Coarse: 2, Mid: 4, Fine: 8, Advertisers: 3, Campaigns: 12, Products: 30,
		EventsPerUser: 40}}
}

// TestDemo runs the demo on a tiny world on a free port, executes every
// curl call it prints with net/http and checks the answers, then drives
// `hir bench` against the same server.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	e, stdout, stderr := serveTestEnv(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- demo(ctx, e, tinyDemo("127.0.0.1:0", dir)) }()

	deadline := time.After(50 * time.Second)
	for !strings.Contains(stdout.String(), demoDone) {
		select {
		case err := <-done:
			t.Fatalf("demo returned early: %v\nstderr:\n%s", err, stderr)
		case <-deadline:
			t.Fatalf("demo printed no examples in time\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	out := stdout.String()
	t.Logf("demo output:\n%s", out)
	var calls []curlCall
	var base string
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if _, rest, ok := strings.Cut(line, " at http://"); ok && base == "" {
			base = "http://" + rest
		}
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		c, err := parseCurl(line)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	if len(calls) < 12 || base == "" || strings.HasSuffix(base, ":0") {
		t.Fatalf("got %d curl calls and base %q, want >= 12 and a real port", len(calls), base)
	}
	var sawToken, sawNewAd, sawFresh bool
	for _, c := range calls {
		req, err := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = c.header
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.url, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			t.Errorf("%s %s %s: status %d: %s", c.method, c.url, c.body, res.StatusCode, body)
			continue
		}
		switch {
		case strings.Contains(c.url, "/v1/tokens/"):
			sawToken = true
		case strings.Contains(c.body, `"context_events"`):
			var r struct {
				FreshUser  bool              `json:"fresh_user"`
				Candidates []json.RawMessage `json:"candidates"`
			}
			if err := json.Unmarshal(body, &r); err != nil || !r.FreshUser || len(r.Candidates) == 0 {
				t.Errorf("fresh user retrieval = %s (%v), want fresh_user and candidates", body, err)
			}
			sawFresh = true
		case strings.Contains(c.body, `"exclude_seen":false`):
			// The ad posted just before must be a candidate of its campaign.
			var r struct {
				Candidates []struct {
					ID string `json:"id"`
				} `json:"candidates"`
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			for _, cand := range r.Candidates {
				if strings.HasPrefix(cand.ID, "demo-ad-") {
					sawNewAd = true
				}
			}
			if !sawNewAd {
				t.Errorf("the new ad is not among the campaign's candidates: %s", body)
			}
		}
	}
	if !sawToken || !sawFresh {
		t.Errorf("token call %v, fresh-user call %v: want both printed", sawToken, sawFresh)
	}

	t.Run("bench", func(t *testing.T) {
		for _, mode := range []string{benchKnown, benchFresh} {
			profiles, err := benchProfilesFromWorld(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			cfg := benchConfig{url: base, mode: mode, duration: 20 * time.Second, requests: 40, concurrency: 2, k: 10, seed: 1}
			bodies, err := benchBodies(profiles, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			rep, err := benchRun(ctx, cfg, bodies)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Requests != 40 || rep.Errors != 0 || rep.Status["200"] != 40 || rep.QPS <= 0 ||
				rep.LatencyMS.P50 <= 0 || rep.LatencyMS.P99 < rep.LatencyMS.P50 {
				t.Errorf("%s bench report = %+v, want 40 requests, all 200", mode, rep)
			}
		}
	})

	t.Run("spec examples", func(t *testing.T) { checkSpecExamples(t, base, printedKey(out)) })

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("demo: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not shut down")
	}
}
