package serving

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/serving/problem"
)

// TestAdmissionOverHTTP holds every slot of a server (as requests being
// handled do) and checks what other requests get over HTTP: the caller
// holding its whole share 429, another caller 503 overloaded after the
// queue wait, both with Retry-After and never started; probes, /metrics
// and the API description are answered; once the slots are free,
// requests are served again.
func TestAdmissionOverHTTP(t *testing.T) {
	const other = "other-key-0123456789"
	env := newEnv(t, Options{MaxInFlight: 4, MaxQueueWait: 30 * time.Millisecond, RatePerSecond: -1,
		APIKeys: []string{testKey, other}})
	const body = `{"events":[{"id":"e1","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1700000000000}]}`
	do := func(method, path, key, body string) (*http.Response, string) {
		req, _ := http.NewRequest(method, env.http.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	// hold takes a slot as a request of key being handled does.
	var held []string
	hold := func(key string) {
		caller := callerKey(key)
		if err := env.srv.admission.Acquire(t.Context(), caller); err != nil {
			t.Fatal(err)
		}
		held = append(held, caller)
	}
	for range 3 {
		hold(testKey) // this caller's whole share
	}
	hold(other)

	for _, tc := range []struct {
		name, method, path, key, body string
		wantStatus                    int
		wantType                      string
	}{
		{"the busy caller's next request", http.MethodPost, "/v1/events", testKey, strings.Replace(body, "e1", "e2", 1), http.StatusTooManyRequests, "rate-limited"},
		{"another caller, every slot held", http.MethodPost, "/v1/events", other, strings.Replace(body, "e1", "e3", 1), http.StatusServiceUnavailable, "overloaded"},
		{"read, every slot held", http.MethodGet, "/v1/model", "", "", http.StatusServiceUnavailable, "overloaded"},
		{"liveness probe", http.MethodGet, "/healthz", "", "", http.StatusOK, ""},
		{"metrics", http.MethodGet, "/metrics", "", "", http.StatusOK, ""},
		{"API description", http.MethodGet, "/openapi.yaml", "", "", http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, got := do(tc.method, tc.path, tc.key, tc.body)
			if res.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d %s, want %d", res.StatusCode, got, tc.wantStatus)
			}
			if tc.wantType == "" {
				return
			}
			if res.Header.Get("Retry-After") != "1" || !strings.Contains(got, problem.TypeBase+tc.wantType) {
				t.Errorf("answer = Retry-After %q %s, want Retry-After 1 and type %s", res.Header.Get("Retry-After"), got, tc.wantType)
			}
		})
	}
	if _, m := do(http.MethodGet, "/metrics", "", ""); !strings.Contains(m, "hir_http_shed_total 3") || !strings.Contains(m, "hir_http_inflight 4") {
		t.Errorf("metrics lack hir_http_shed_total 3 and hir_http_inflight 4:\n%s", grepLines(m, "hir_http_"))
	}
	// The shed requests were never started: their events are not stored.
	if n := env.srv.Store().NumEvents(); n != 0 {
		t.Errorf("%d events stored while every request was shed, want 0", n)
	}
	for _, caller := range held {
		env.srv.admission.Release(caller)
	}
	if res, got := do(http.MethodPost, "/v1/events", other, strings.Replace(body, "e1", "e4", 1)); res.StatusCode != http.StatusOK {
		t.Errorf("after the slots were freed: %d %s, want 200", res.StatusCode, got)
	}
}

// callerKey is the admission caller of a request made with API key key.
func callerKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "key:" + hex.EncodeToString(sum[:6])
}

// TestSlowBodiesHoldNoSlot (issue 48, defect 2): slow bodies from two
// callers, more of them than the server has slots, hold no admission slot
// while their bytes trickle in, so a third caller is served throughout; a
// slow body that completes is then handled.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	const other = "other-key-0123456789"
	env := newEnv(t, Options{MaxInFlight: 4, MaxQueueWait: 30 * time.Millisecond, RatePerSecond: -1,
		APIKeys: []string{testKey, other}})
	addr := strings.TrimPrefix(env.http.URL, "http://")
	const body = `{"events":[{"id":"e1","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1700000000000}]}`
	slow := func(key string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			key, len(body), body[:10])
		return c
	}
	var conns []net.Conn
	for range 6 {
		conns = append(conns, slow(testKey), slow(other))
	}
	time.Sleep(100 * time.Millisecond) // let the server take them up
	for i := range 8 {
		res, err := http.Get(env.http.URL + "/v1/model")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusServiceUnavailable || res.StatusCode == http.StatusTooManyRequests {
			t.Fatalf("request %d of a third caller beside 12 slow bodies: %d %s", i, res.StatusCode, b)
		}
	}
	if n := env.srv.admission.InFlight(); n != 0 {
		t.Errorf("%d slots held by unfinished bodies, want 0", n)
	}
	conns[0].Write([]byte(body[10:]))
	res, err := http.ReadResponse(bufio.NewReader(conns[0]), nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("a slow body that completes: %v %v, want 200", res, err)
	}
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
