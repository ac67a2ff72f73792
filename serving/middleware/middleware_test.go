package middleware

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/hir-ads/hir/serving/problem"
)

func TestRecoverer(t *testing.T) {
	var got error
	h := Recoverer(func(w http.ResponseWriter, _ *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusInternalServerError)
	})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 500 || got == nil || !strings.Contains(got.Error(), "boom") {
		t.Fatalf("panic answered %d with error %v, want 500 naming the panic", w.Code, got)
	}
	abort := Recoverer(func(http.ResponseWriter, *http.Request, error) { t.Error("ErrAbortHandler answered") })(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler re-raised", v)
		}
	}()
	abort.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}

func TestObserveLogsEachRequest(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	hist, err := noop.NewMeterProvider().Meter("t").Float64Histogram("d")
	if err != nil {
		t.Fatal(err)
	}
	obs := Observe(tracenoop.NewTracerProvider().Tracer("t"), hist, logger)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		cancel  bool
		want    string
	}{
		{"written", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }, false, "status=418"},
		{"nothing written", func(http.ResponseWriter, *http.Request) {}, false, "status=200"},
		{"client gone", func(http.ResponseWriter, *http.Request) {}, true, "status=499"},
		{"marked", func(w http.ResponseWriter, _ *http.Request) { problem.MarkStatus(w, 499) }, false, "status=499"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf.Reset()
			r := httptest.NewRequest("GET", "/v1/x", nil)
			if tc.cancel {
				ctx, cancel := context.WithCancel(r.Context())
				cancel()
				r = r.WithContext(ctx)
			}
			RequestID(obs(tc.handler)).ServeHTTP(httptest.NewRecorder(), r)
			line := buf.String()
			if !strings.Contains(line, tc.want) || !strings.Contains(line, "request_id=") || !strings.Contains(line, `msg="http request"`) {
				t.Fatalf("access log %q, want %s and a request id", line, tc.want)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	key := "secret"
	keys := [][32]byte{sha256.Sum256([]byte(key))}
	var refused error
	writeErr := func(w http.ResponseWriter, _ *http.Request, err error) {
		refused = err
		w.WriteHeader(http.StatusUnauthorized)
	}
	needKey := func(r *http.Request) bool { return r.Method == http.MethodPost }
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := PrincipalFrom(r); p.Key == "" {
			t.Error("no principal in the context")
		}
		w.WriteHeader(http.StatusNoContent)
	})
	for _, tc := range []struct {
		name, method, auth string
		keyed              bool
		want               int
	}{
		{"no keys configured: a write passes", "POST", "", false, 204},
		{"write without a key", "POST", "", true, 401},
		{"write with the key", "POST", "Bearer " + key, true, 204},
		{"write with the key, scheme in capitals", "POST", "BEARER " + key, true, 204},
		{"read without a key", "GET", "", true, 204},
		{"read with a wrong key", "GET", "Bearer nope", true, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused = nil
			r := httptest.NewRequest(tc.method, "/x", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			w := httptest.NewRecorder()
			Identify(keys)(Auth(tc.keyed, needKey, writeErr)(ok)).ServeHTTP(w, r)
			if w.Code != tc.want || (tc.want == 401) != errors.Is(refused, ErrUnauthorized) {
				t.Fatalf("answered %d (refused with %v), want %d", w.Code, refused, tc.want)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	l := NewLimiter(1, 2, 10)
	var refused int
	writeErr := func(w http.ResponseWriter, _ *http.Request, err error) {
		if errors.Is(err, ErrRateLimited) {
			refused++
		}
		w.WriteHeader(http.StatusTooManyRequests)
	}
	h := Identify(nil)(RateLimit(l, func(r *http.Request) bool { return r.URL.Path == "/healthz" }, writeErr)(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	codes := map[int]int{}
	for range 5 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
		codes[w.Code]++
	}
	if codes[204] != 2 || codes[429] != 3 || refused != 3 {
		t.Fatalf("5 requests at a burst of 2: %v, want 2 passed and 3 refused", codes)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	if w.Code != 204 {
		t.Fatalf("exempt probe answered %d, want 204", w.Code)
	}
	other := httptest.NewRequest("GET", "/x", nil)
	other.RemoteAddr = "192.0.2.7:1234"
	w = httptest.NewRecorder()
	h.ServeHTTP(w, other)
	if w.Code != 204 {
		t.Fatalf("another client answered %d, want its own bucket", w.Code)
	}
}

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
		{"caller holds its share", []string{"a", "a", "a"}, ctx, "a", ErrCallerBusy},
		{"every slot held: shed after the wait", []string{"a", "b", "c", "d"}, ctx, "e", ErrOverloaded},
		{"client gone while waiting", []string{"a", "b", "c", "d"}, cancelled, "e", context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission(4, 20*time.Millisecond) // three slots per caller
			for _, c := range tc.held {
				if err := a.Acquire(ctx, c); err != nil {
					t.Fatalf("acquire for %s: %v", c, err)
				}
			}
			err := a.Acquire(tc.ctx, tc.caller)
			if !errors.Is(err, tc.want) {
				t.Fatalf("acquire = %v, want %v", err, tc.want)
			}
			if err == nil {
				a.Release(tc.caller)
			}
			for _, c := range tc.held {
				a.Release(c)
			}
			if len(a.slots) != 0 || len(a.caller) != 0 || a.waiting.Load() != 0 {
				t.Errorf("after releasing everything: %d slots held, callers %v, %d waiting", len(a.slots), a.caller, a.waiting.Load())
			}
		})
	}
	if NewAdmission(-1, time.Second) != nil {
		t.Error("a negative MaxInFlight must turn admission control off")
	}
}
