package serving

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/hir-ads/hir/serving/problem"
)

type ctxKey int

const principalKey ctxKey = iota

// RequestIDHeader is the header that carries the request id in both
// directions: a sane incoming value is kept, otherwise one is generated.
const RequestIDHeader = problem.RequestIDHeader

func requestIDFrom(ctx context.Context) string { return problem.RequestID(ctx) }

// requestID tags each request with an id (kept from the client when it is
// short and printable), echoes it in the response and stores it in the
// context for logs, spans and problem instances.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := problem.NewRequestID(r.Header.Get(RequestIDHeader))
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(problem.WithRequestID(r.Context(), id)))
	})
}

// observe starts a server span per request (continuing a W3C traceparent),
// records the latency histogram by route, and writes one access-log line.
func (s *Server) observe(next http.Handler) http.Handler {
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.tel.tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method),
				attribute.String("url.path", r.URL.Path),
				attribute.String("hir.request_id", requestIDFrom(r.Context()))))
		defer span.End()
		rec := problem.NewRecorder(w)
		next.ServeHTTP(rec, r.WithContext(ctx))
		status := rec.Status()
		if status == 0 {
			status = http.StatusOK
			if r.Context().Err() != nil {
				status = 499 // the client went away before an answer
			}
		}
		route := r.URL.Path
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		} else {
			route = "unmatched"
		}
		span.SetName(r.Method + " " + route)
		span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		elapsed := time.Since(start)
		s.tel.reqDuration.Record(context.WithoutCancel(ctx), elapsed.Seconds(), metric.WithAttributes(
			attribute.String("http.route", route), attribute.String("http.request.method", r.Method),
			attribute.Int("http.response.status_code", status)))
		s.logger.LogAttrs(ctx, accessLevel(status), "http request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
			slog.Int("status", status), slog.Int64("bytes", rec.Bytes()), slog.Duration("duration", elapsed),
			slog.String("request_id", requestIDFrom(r.Context())), slog.String("remote", r.RemoteAddr))
	})
}

// recoverer turns a panic in a handler into a logged 500 problem. An
// http.ErrAbortHandler panic is re-raised, as net/http expects.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.writeProblem(w, r, fmt.Errorf("recover from panic: %v", v))
		}()
		next.ServeHTTP(w, r)
	})
}

// principal is who a request comes from, for rate limiting and logs.
type principal struct {
	key     string // "key:<sha256 prefix>" or "ip:<addr>"
	keyed   bool   // a valid API key was presented
	present bool   // an Authorization header was present
}

// authenticate checks the bearer API key, if any, against the configured
// keys in constant time.
func (s *Server) authenticate(r *http.Request) principal {
	h := r.Header.Get("Authorization")
	if h != "" {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer") // RFC 9110: the scheme is case-insensitive
		if ok {
			sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			for _, k := range s.keyHashes {
				if subtle.ConstantTimeCompare(sum[:], k[:]) == 1 {
					return principal{key: "key:" + hex.EncodeToString(sum[:6]), keyed: true, present: true}
				}
			}
		}
		return principal{key: "ip:" + clientIP(r), present: true}
	}
	return principal{key: "ip:" + clientIP(r)}
}

// identify stores the request's principal in its context, for the rate
// limiter and auth that follow.
func (s *Server) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := s.authenticate(r)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
	})
}

func principalFrom(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey).(principal)
	return p
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// writeRoutes are the endpoints that always need an API key (when keys are
// configured).
var writeRoutes = map[string]bool{
	"POST /v1/entities":    true,
	"POST /v1/events":      true,
	"POST /v1/model/train": true,
}

// openRoutes never need a key: probes, the metrics scrape and the API
// description.
var openRoutes = map[string]bool{
	"GET /healthz": true,
	"GET /readyz":  true,
	"GET /metrics": true,
	// The API description.
	"GET /openapi.yaml": true,
	"GET /openapi.json": true,
	"GET /docs":         true,
}

// auth enforces bearer API keys on write and admin endpoints, and on reads
// when Options.ReadAuth is set (except openRoutes and the /ui page's
// files). With no keys configured it lets everything through (a warning is
// logged at start-up).
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalFrom(r)
		if len(s.keyHashes) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		route := r.Method + " " + r.URL.Path
		need := writeRoutes[route] || (s.opts.ReadAuth && !openRoutes[route] && !isUIRoute(r.URL.Path))
		if (need || p.present) && !p.keyed {
			// A wrong key is refused even on an open route: it is a client bug.
			s.writeProblem(w, r, ErrUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// probeRoutes are exempt from the rate limit and from admission control:
// an orchestrator's health probes must not be shed with the traffic they
// judge.
var probeRoutes = map[string]bool{"/healthz": true, "/readyz": true}

// unadmittedRoutes are exempt from admission control: the probes, the
// metrics scrape and the API description (cheap, and what an operator
// reads during an overload).
var unadmittedRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true,
	"/openapi.yaml": true, "/openapi.json": true, "/docs": true}

// admission bounds the requests handled at once (Options.MaxInFlight),
// the share of them one caller (API key, else client IP) may hold, and the
// time and number of requests waiting for a slot. Safe for concurrent use.
type admission struct {
	slots      chan struct{} // one token per request being handled
	waiting    atomic.Int64  // requests waiting for a slot
	maxWaiting int64
	maxWait    time.Duration
	perCaller  int // slots one caller may hold or wait for

	mtx    sync.Mutex
	caller map[string]int // slots held or awaited per caller; mtx must be held
}

func newAdmission(maxInFlight int, maxWait time.Duration) *admission {
	if maxInFlight < 0 {
		return nil
	}
	return &admission{slots: make(chan struct{}, maxInFlight), maxWaiting: int64(maxInFlight), maxWait: maxWait,
		perCaller: max(1, maxInFlight*3/4), caller: map[string]int{}}
}

// acquire takes a slot for caller, waiting at most maxWait when none is
// free. It returns ErrOverloaded when the request is to be shed,
// errCallerBusy when caller holds its whole share (slow bodies from one
// client cannot take every slot), or ctx's error when ctx ended first.
func (a *admission) acquire(ctx context.Context, caller string) error {
	a.mtx.Lock()
	if a.caller[caller] >= a.perCaller {
		a.mtx.Unlock()
		return errCallerBusy
	}
	a.caller[caller]++
	a.mtx.Unlock()
	err := a.wait(ctx)
	if err != nil {
		a.leave(caller)
	}
	return err
}

func (a *admission) wait(ctx context.Context) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	if a.waiting.Add(1) > a.maxWaiting {
		a.waiting.Add(-1)
		return ErrOverloaded
	}
	defer a.waiting.Add(-1)
	t := time.NewTimer(a.maxWait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-t.C:
		return ErrOverloaded
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release returns caller's slot.
func (a *admission) release(caller string) {
	<-a.slots
	a.leave(caller)
}

func (a *admission) leave(caller string) {
	a.mtx.Lock()
	if a.caller[caller]--; a.caller[caller] <= 0 {
		delete(a.caller, caller)
	}
	a.mtx.Unlock()
}

// admit applies admission control: a request that gets no slot is shed
// with 503 (429 when its caller holds its whole share) and Retry-After
// before anything of it is read. unadmittedRoutes are exempt.
func (s *Server) admit(next http.Handler) http.Handler {
	if s.admission == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unadmittedRoutes[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		caller := principalFrom(r).key
		if err := s.admission.acquire(r.Context(), caller); err != nil {
			if errors.Is(err, ErrOverloaded) || errors.Is(err, errCallerBusy) {
				s.tel.shed.Add(r.Context(), 1)
			}
			s.writeProblem(w, r, err) // a client that left while waiting: 499 in the log
			return
		}
		defer s.admission.release(caller)
		next.ServeHTTP(w, r)
	})
}

// rateLimit applies a token bucket per principal (API key, else client IP)
// and answers 429 with Retry-After when it is empty. Probes are exempt.
func (s *Server) rateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.limiter == nil || probeRoutes[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		p := principalFrom(r)
		if !s.limiter.allow(p.key, time.Now()) {
			s.writeProblem(w, r, ErrRateLimited)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// keyedLimiter holds one token bucket per key. Buckets idle for longer than
// idleTTL are dropped when the table grows past maxKeys, bounding memory
// under a flood of distinct client addresses. Safe for concurrent use.
type keyedLimiter struct {
	limit   rate.Limit
	burst   int
	maxKeys int
	idleTTL time.Duration

	mtx     sync.Mutex
	buckets map[string]*bucket // mtx must be held
}

type bucket struct {
	lim      *rate.Limiter
	lastSeen time.Time
}

func newKeyedLimiter(perSecond float64, burst, maxKeys int) *keyedLimiter {
	return &keyedLimiter{limit: rate.Limit(perSecond), burst: burst, maxKeys: maxKeys,
		idleTTL: time.Minute, buckets: make(map[string]*bucket)}
}

func (l *keyedLimiter) allow(key string, now time.Time) bool {
	l.mtx.Lock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.maxKeys {
			l.sweepLocked(now)
		}
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	b.lastSeen = now
	l.mtx.Unlock()
	return b.lim.AllowN(now, 1)
}

// sweepLocked drops idle buckets, or all of them if none is idle (a flood);
// l.mtx must be held.
func (l *keyedLimiter) sweepLocked(now time.Time) {
	for k, b := range l.buckets {
		if now.Sub(b.lastSeen) > l.idleTTL {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= l.maxKeys {
		clear(l.buckets)
	}
}

func accessLevel(status int) slog.Level {
	switch {
	case status == 499:
		return slog.LevelInfo // the client's doing
	case status >= 500:
		return slog.LevelError
	case status >= 400:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
