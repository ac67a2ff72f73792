package middleware

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hir-ads/hir/serving/problem"
)

// ErrOverBudget is the error Timeout answers for a request not done
// within its time budget; it wraps context.DeadlineExceeded.
var ErrOverBudget = fmt.Errorf("the request was not done within the server's time budget: %w", context.DeadlineExceeded)

// Timeout bounds each request at d. The handler runs, on the request's
// goroutine, with a context that ends after d, which the retrieval loops
// check, and writes into a buffer. When d passes first, a timer answers
// the request at once, whatever the handler is doing (writeErr with
// ErrOverBudget: the server's 503, type timeout, with Retry-After), and
// what the handler writes afterwards is dropped. The request keeps its
// admission slot until the handler has returned, so work cut short by the
// deadline still counts against the server's capacity.
func Timeout(d time.Duration, writeErr func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			bw := newBufferedWriter()
			var answer sync.Mutex // held by whichever of the timer and the request writes to w
			stopTimer := context.AfterFunc(ctx, func() {
				answer.Lock()
				defer answer.Unlock()
				if !bw.stop() {
					return // the handler has answered
				}
				if r.Context().Err() != nil {
					problem.MarkStatus(w, 499) // the client left: nobody to answer
					return
				}
				ew := newBufferedWriter()
				writeErr(ew, r, ErrOverBudget)
				ew.copyTo(w)
				_ = http.NewResponseController(w).Flush() // answered now, not when the handler returns
			})
			answered := false
			defer func() { // also on a panic, which recoverer answers: the timer never writes after this
				stopTimer()
				answer.Lock()
				defer answer.Unlock()
				if bw.finish() && answered {
					bw.copyTo(w)
				}
			}()
			next.ServeHTTP(bw, r.WithContext(ctx))
			answered = true
		})
	}
}

// bufferedWriter is the http.ResponseWriter a handler under timeout writes
// to: it keeps the answer until copyTo, and drops every write after stop.
type bufferedWriter struct {
	mu       sync.Mutex
	header   http.Header
	status   int
	mark     int // a status marked without an answer (499; problem.MarkStatus)
	body     bytes.Buffer
	stopped  bool // by stop: later writes are dropped
	finished bool // by finish: the answer is complete
}

func newBufferedWriter() *bufferedWriter { return &bufferedWriter{header: make(http.Header)} }

func (b *bufferedWriter) Header() http.Header { return b.header }

// MarkStatus implements problem.Marker: the status is copied with the
// answer (499: a client gone, nothing written).
func (b *bufferedWriter) MarkStatus(status int) { b.mark = status }

func (b *bufferedWriter) WriteHeader(code int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.status == 0 && !b.stopped {
		b.status = code
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return 0, http.ErrHandlerTimeout
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// stop drops every later write, and reports whether the answer was still
// to come (false after finish).
func (b *bufferedWriter) stop() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return false
	}
	b.stopped = true
	return true
}

// finish ends the answer, and reports whether it stands (false after stop).
func (b *bufferedWriter) finish() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	b.finished = true
	return true
}

// copyTo writes the buffered answer to w, with its length.
func (b *bufferedWriter) copyTo(w http.ResponseWriter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.status == 0 {
		if b.mark != 0 {
			problem.MarkStatus(w, b.mark)
		}
		return
	}
	h := w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	if h.Get("Content-Length") == "" && b.status >= 200 && b.status != http.StatusNoContent && b.status != http.StatusNotModified {
		h.Set("Content-Length", strconv.Itoa(b.body.Len()))
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}
