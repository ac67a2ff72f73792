package serving

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hir-ads/hir/serving/middleware"
	"github.com/hir-ads/hir/serving/problem"
)

// RequestIDHeader is the header that carries the request id in both
// directions: a sane incoming value is kept, otherwise one is generated.
const RequestIDHeader = problem.RequestIDHeader

func requestIDFrom(ctx context.Context) string { return problem.RequestID(ctx) }

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

// needKey reports whether r's route needs an API key (when keys are
// configured): the write and admin endpoints always; with
// Options.ReadAuth every other route too, but openRoutes and the /ui
// page's files.
func (s *Server) needKey(r *http.Request) bool {
	route := r.Method + " " + r.URL.Path
	return writeRoutes[route] || (s.opts.ReadAuth && !openRoutes[route] && !isUIRoute(r.URL.Path))
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
		caller := middleware.PrincipalFrom(r).Key
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
