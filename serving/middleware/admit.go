package middleware

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Admission control's refusals.
var (
	// ErrOverloaded means every slot is held and none came free within the
	// wait: the request was not started.
	ErrOverloaded = errors.New("server overloaded: the request was not started; retry after the Retry-After delay")
	// ErrCallerBusy means the caller (API key, else client IP) already
	// holds its share of the slots.
	ErrCallerBusy = errors.New("too many requests of this caller in flight: the request was not started; retry after the Retry-After delay")
)

// Admission bounds the requests handled at once (Options.MaxInFlight),
// the share of them one caller (API key, else client IP) may hold, and the
// time and number of requests waiting for a slot. Safe for concurrent use.
type Admission struct {
	slots      chan struct{} // one token per request being handled
	waiting    atomic.Int64  // requests waiting for a slot
	maxWaiting int64
	maxWait    time.Duration
	perCaller  int // slots one caller may hold or wait for

	mtx    sync.Mutex
	caller map[string]int // slots held or awaited per caller; mtx must be held
}

// NewAdmission returns admission control of maxInFlight requests at once,
// each caller up to three quarters of them, a request waiting at most
// maxWait for a slot; nil (no bound) for a negative maxInFlight.
func NewAdmission(maxInFlight int, maxWait time.Duration) *Admission {
	if maxInFlight < 0 {
		return nil
	}
	return &Admission{slots: make(chan struct{}, maxInFlight), maxWaiting: int64(maxInFlight), maxWait: maxWait,
		perCaller: max(1, maxInFlight*3/4), caller: map[string]int{}}
}

// Acquire takes a slot for caller, waiting at most maxWait when none is
// free. It returns ErrOverloaded when the request is to be shed,
// ErrCallerBusy when caller holds its whole share (slow bodies from one
// client cannot take every slot), or ctx's error when ctx ended first.
func (a *Admission) Acquire(ctx context.Context, caller string) error {
	a.mtx.Lock()
	if a.caller[caller] >= a.perCaller {
		a.mtx.Unlock()
		return ErrCallerBusy
	}
	a.caller[caller]++
	a.mtx.Unlock()
	err := a.wait(ctx)
	if err != nil {
		a.leave(caller)
	}
	return err
}

func (a *Admission) wait(ctx context.Context) error {
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

// Release returns caller's slot.
func (a *Admission) Release(caller string) {
	<-a.slots
	a.leave(caller)
}

func (a *Admission) leave(caller string) {
	a.mtx.Lock()
	if a.caller[caller]--; a.caller[caller] <= 0 {
		delete(a.caller, caller)
	}
	a.mtx.Unlock()
}

// InFlight is the number of slots held now.
func (a *Admission) InFlight() int { return len(a.slots) }

// Admit applies admission control a (after Identify): a request that gets
// no slot is answered by writeErr with the error of Acquire (the
// server's: 503, or 429 when its caller holds its whole share, with
// Retry-After) before anything of it is read, and shed is called for it.
// Requests exempt names pass without a slot; a nil a lets everything
// through.
func Admit(a *Admission, exempt func(*http.Request) bool, shed func(context.Context), writeErr func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if a == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if exempt(r) {
				next.ServeHTTP(w, r)
				return
			}
			caller := PrincipalFrom(r).Key
			if err := a.Acquire(r.Context(), caller); err != nil {
				if errors.Is(err, ErrOverloaded) || errors.Is(err, ErrCallerBusy) {
					shed(r.Context())
				}
				writeErr(w, r, err) // a client that left while waiting: 499 in the log
				return
			}
			defer a.Release(caller)
			next.ServeHTTP(w, r)
		})
	}
}
