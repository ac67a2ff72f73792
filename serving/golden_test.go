package serving

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden.json from the answers of this build")

// goldenT0 is when the golden world starts: after the wall clock of any
// run, so that the service answers as of its newest event (serving time is
// the later of the clock and the newest event), whenever the test runs.
const goldenT0 = int64(4_102_444_800_000) // 2100-01-01

// goldenRequests are the reads TestGoldenAnswers records: every read
// endpoint that answers from the served state.
var goldenRequests = []struct{ method, path, body string }{
	{"POST", "/v1/retrieve", `{"user":{"type":"user","id":"u1"},"k":10,"explain":true}`},
	{"POST", "/v1/retrieve", `{"user":{"type":"user","id":"u2"},"k":10,"filter":{"attr":"status","eq":"active"},"new_ad_share":0}`},
	{"POST", "/v1/retrieve", `{"user":{"type":"user","id":"visitor"},"k":10,"context_events":[{"dst":{"type":"ad","id":"ad2"},"type":"click","ts":4105000000000}],"user_content":{"text":"guitar amplifier"}}`},
	{"POST", "/v1/retrieve", `{"user":{"type":"user","id":"u3"},"k":10,"query":"guitar","prior_weight":0,"coengagement_weight":0}`},
	{"GET", "/v1/entities/user/u1/interests", ""},
	{"GET", "/v1/entities/ad/ad5/similar?k=10", ""},
	{"GET", "/v1/entities/user/u4/similar?k=10", ""},
	{"GET", "/v1/tokens?level=0", ""},
	{"GET", "/v1/tokens?level=1&limit=5", ""},
	{"GET", "/v1/tokens/0.0", ""},
	{"GET", "/v1/tokens/0.0/members?limit=10", ""},
	{"GET", "/v1/entities/user/u1/events?limit=5", ""},
	{"GET", "/v1/map?limit=20", ""},
	{"POST", "/v1/map/project", `{"entities":[{"type":"user","id":"u1"},{"type":"ad","id":"ad3"},{"type":"ad","id":"nope"}]}`},
}

// TestGoldenAnswers checks every read endpoint's answers on a fixed world
// (goldenT0) and a model trained on it (training is deterministic for a
// seed) against
// those recorded in testdata/golden.json: a change meant to keep behaviour
// (a refactor of the read path) keeps them. A change meant to alter answers
// records them again with -update, and the diff of the file shows what
// moved. Numbers compare within 1e-4 (relative), the rest exactly.
func TestGoldenAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	env := newExploreEnvOf(t, Options{MaxClockSkew: -1}, newWorldAt(24, 40, 12, 5, goldenT0))
	got := make([]goldenAnswer, 0, len(goldenRequests))
	for _, r := range goldenRequests {
		var body *bytes.Reader
		ct := ""
		if r.body != "" {
			body, ct = bytes.NewReader([]byte(r.body)), "application/json"
		} else {
			body = bytes.NewReader(nil)
		}
		status, _, raw := env.raw(r.method, r.path, ct, "", body)
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s %s: %d %s: %v", r.method, r.path, status, raw, err)
		}
		got = append(got, goldenAnswer{Request: r.method + " " + r.path + " " + r.body, Status: status, Body: v})
	}
	path := filepath.Join("testdata", "golden.json")
	if *updateGolden {
		raw, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with go test ./serving -run TestGoldenAnswers -update)", err)
	}
	var want []goldenAnswer
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		t.Fatalf("%d answers recorded, %d requests: record them again with -update", len(want), len(got))
	}
	for i := range got {
		if got[i].Request != want[i].Request {
			t.Fatalf("answer %d is for %q, the request is %q: record them again with -update", i, want[i].Request, got[i].Request)
		}
		if got[i].Status != want[i].Status {
			t.Errorf("%s: status %d, recorded %d", got[i].Request, got[i].Status, want[i].Status)
		}
		if diffs := goldenDiff("", got[i].Body, want[i].Body, nil); len(diffs) > 0 {
			t.Errorf("%s: %d differences from the recorded answer, first: %s", got[i].Request, len(diffs), strings.Join(diffs[:min(5, len(diffs))], "; "))
		}
	}
}

// goldenAnswer is one recorded answer.
type goldenAnswer struct {
	Request string `json:"request"`
	Status  int    `json:"status"`
	Body    any    `json:"body"`
}

// goldenDiff appends to diffs where got differs from want (decoded JSON),
// at path: numbers within 1e-4 of the larger magnitude (at least 1), the
// rest exactly.
func goldenDiff(path string, got, want any, diffs []string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return append(diffs, fmt.Sprintf("%s: %v, recorded %v", path, got, want))
		}
		for k := range w {
			if _, ok := g[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: missing", path, k))
			}
		}
		for k, gv := range g {
			wv, ok := w[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: not recorded", path, k))
				continue
			}
			diffs = goldenDiff(path+"."+k, gv, wv, diffs)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return append(diffs, fmt.Sprintf("%s: %v, recorded %v", path, got, want))
		}
		for i := range w {
			diffs = goldenDiff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i], diffs)
		}
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-4*max(1, math.Abs(g), math.Abs(w)) {
			return append(diffs, fmt.Sprintf("%s: %v, recorded %v", path, got, want))
		}
	default:
		if got != want {
			return append(diffs, fmt.Sprintf("%s: %v, recorded %v", path, got, want))
		}
	}
	return diffs
}

// TestGoldenDiff checks the comparison TestGoldenAnswers makes.
func TestGoldenDiff(t *testing.T) {
	dec := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		got, want string
		diffs     int
	}{
		{`{"a":[1,2,{"b":"x"}]}`, `{"a":[1,2,{"b":"x"}]}`, 0},
		{`{"s":0.50000001}`, `{"s":0.5}`, 0},
		{`{"s":0.501}`, `{"s":0.5}`, 1},
		{`{"a":[1,2]}`, `{"a":[1,2,3]}`, 1},
		{`{"b":"y"}`, `{"b":"x"}`, 1},
		{`{"a":1}`, `{"a":1,"b":2}`, 1},
		{`{"a":1,"c":2}`, `{"a":1}`, 1},
		{`{"a":null}`, `{"a":1}`, 1},
	} {
		if got := goldenDiff("", dec(tc.got), dec(tc.want), nil); len(got) != tc.diffs {
			t.Errorf("%s against %s: %v, want %d differences", tc.got, tc.want, got, tc.diffs)
		}
	}
}
