package serving

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAdmissionAcquire(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		// held are the callers holding slots before the call.
		held   []string
		ctx    context.Context
		caller string
		want   error
	}{
		{"free slot", nil, ctx, "a", nil},
		{"last free slot", []string{"a", "a", "b"}, ctx, "c", nil},
		{"caller holds its share", []string{"a", "a", "a"}, ctx, "a", errCallerBusy},
		{"every slot held: shed after the wait", []string{"a", "b", "c", "d"}, ctx, "e", ErrOverloaded},
		{"client gone while waiting", []string{"a", "b", "c", "d"}, cancelled, "e", context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdmission(4, 20*time.Millisecond) // three slots per caller
			for _, c := range tc.held {
				if err := a.acquire(ctx, c); err != nil {
					t.Fatalf("acquire for %s: %v", c, err)
				}
			}
			err := a.acquire(tc.ctx, tc.caller)
			if !errors.Is(err, tc.want) {
				t.Fatalf("acquire = %v, want %v", err, tc.want)
			}
			if err == nil {
				a.release(tc.caller)
			}
			for _, c := range tc.held {
				a.release(c)
			}
			if len(a.slots) != 0 || len(a.caller) != 0 || a.waiting.Load() != 0 {
				t.Errorf("after releasing everything: %d slots held, callers %v, %d waiting", len(a.slots), a.caller, a.waiting.Load())
			}
		})
	}
	if newAdmission(-1, time.Second) != nil {
		t.Error("a negative MaxInFlight must turn admission control off")
	}
}

// TestAdmissionOverHTTP holds every slot of a server with slow request
// bodies over real TCP connections and checks what other requests get:
// the slow caller's next request 429, another caller's request 503
// overloaded after the queue wait, both with Retry-After and never
// started; probes, /metrics and the API description are answered; once the slow bodies end,
// requests are served again.
func TestAdmissionOverHTTP(t *testing.T) {
	const other = "other-key-0123456789"
	env := newEnv(t, Options{MaxInFlight: 4, MaxQueueWait: 30 * time.Millisecond, RatePerSecond: -1,
		APIKeys: []string{testKey, other}})
	addr := strings.TrimPrefix(env.http.URL, "http://")
	const body = `{"events":[{"id":"e1","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1700000000000}]}`
	// slow opens a POST /v1/events with key whose body never completes.
	slow := func(key string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			key, len(body), body[:10])
		return c
	}
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
	waitInFlight := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); len(env.srv.admission.slots) != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests in flight, want %d", len(env.srv.admission.slots), n)
			}
		}
	}
	var conns []net.Conn
	for range 3 {
		conns = append(conns, slow(testKey)) // the slow caller's whole share
	}
	waitInFlight(3)
	conns = append(conns, slow(other))
	waitInFlight(4)

	for _, tc := range []struct {
		name, method, path, key, body string
		wantStatus                    int
		wantType                      string
	}{
		{"slow caller's next request", http.MethodPost, "/v1/events", testKey, strings.Replace(body, "e1", "e2", 1), http.StatusTooManyRequests, "rate-limited"},
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
			if res.Header.Get("Retry-After") != "1" || !strings.Contains(got, problemTypeBase+tc.wantType) {
				t.Errorf("answer = Retry-After %q %s, want Retry-After 1 and type %s", res.Header.Get("Retry-After"), got, tc.wantType)
			}
		})
	}
	if _, m := do(http.MethodGet, "/metrics", "", ""); !strings.Contains(m, "hir_http_shed_total 3") || !strings.Contains(m, "hir_http_inflight 4") {
		t.Errorf("metrics lack hir_http_shed_total 3 and hir_http_inflight 4:\n%s", grepLines(m, "hir_http_"))
	}
	// The shed requests were never started: their events are not stored.
	if n := env.srv.Store().NumEvents(); n != 0 {
		t.Errorf("%d events stored while every request was shed or unfinished, want 0", n)
	}
	for _, c := range conns {
		c.Close()
	}
	waitInFlight(0)
	if res, got := do(http.MethodPost, "/v1/events", other, strings.Replace(body, "e1", "e4", 1)); res.StatusCode != http.StatusOK {
		t.Errorf("after the slow bodies ended: %d %s, want 200", res.StatusCode, got)
	}
	c := slow(testKey)
	defer c.Close()
	c.Write([]byte(body[10:]))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
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
