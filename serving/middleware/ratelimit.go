package middleware

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrRateLimited means the caller's token bucket is empty.
var ErrRateLimited = errors.New("rate limit exceeded")

// RateLimit applies l's token bucket of each request's principal (API
// key, else client IP; after Identify) and answers an empty one by
// writeErr with ErrRateLimited (the server's: 429 with Retry-After).
// Requests exempt names pass (the server's: its health probes); a nil l
// lets everything through.
func RateLimit(l *Limiter, exempt func(*http.Request) bool, writeErr func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if l == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if exempt(r) {
				next.ServeHTTP(w, r)
				return
			}
			if !l.Allow(PrincipalFrom(r).Key, time.Now()) {
				writeErr(w, r, ErrRateLimited)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Limiter holds one token bucket per key. Buckets idle for longer than
// idleTTL are dropped when the table grows past maxKeys, bounding memory
// under a flood of distinct client addresses. Safe for concurrent use.
type Limiter struct {
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

// NewLimiter returns a limiter of perSecond tokens a second and bursts of
// burst per key, holding at most maxKeys buckets.
func NewLimiter(perSecond float64, burst, maxKeys int) *Limiter {
	return &Limiter{limit: rate.Limit(perSecond), burst: burst, maxKeys: maxKeys,
		idleTTL: time.Minute, buckets: make(map[string]*bucket)}
}

// Allow takes a token of key's bucket at now; false when it is empty.
func (l *Limiter) Allow(key string, now time.Time) bool {
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
func (l *Limiter) sweepLocked(now time.Time) {
	for k, b := range l.buckets {
		if now.Sub(b.lastSeen) > l.idleTTL {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= l.maxKeys {
		clear(l.buckets)
	}
}
