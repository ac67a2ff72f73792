package middleware

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"golang.org/x/sync/semaphore"
)

// Body reading's refusals (beside *http.MaxBytesError for a body over its
// cap, and ErrOverloaded when the body budget is spent).
var (
	// ErrBodyTimeout means the request body was not received within its
	// read deadline.
	ErrBodyTimeout = errors.New("request body not received in time")
	// ErrClientClosed means the client closed the connection before its
	// request body was complete: nobody is left to answer.
	ErrClientClosed = errors.New("client closed the request before its body was complete")
	// ErrDraining means the server started to drain while the body was
	// being read.
	ErrDraining = errors.New("server is shutting down")
)

// messageError carries a client-facing message for a sentinel.
type messageError struct {
	sentinel error
	msg      string
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.sentinel }

// bodyChunk is the first buffer of a body read and the smallest step of
// its growth; the buffer doubles as the body arrives.
const bodyChunk = 16 << 10

// bufferedBody is a request body read whole by ReadBody.
type bufferedBody struct {
	*bytes.Reader
	buf []byte
}

func (*bufferedBody) Close() error { return nil }

// Body returns the bytes of r's body when ReadBody read it whole (and
// false otherwise, as for a handler used without the stage).
func Body(r *http.Request) ([]byte, bool) {
	bb, ok := r.Body.(*bufferedBody)
	if !ok {
		return nil, false
	}
	return bb.buf, true
}

// DeadlineBody bounds the time to read any request body, from the end of
// its headers, by a read deadline on the connection at timeout.
// It comes first, so that a request refused before its body is read (401,
// 429, ...) is bounded too: net/http discards up to 256 KiB of an unread
// body after the handler returns, and without a deadline a client that
// trickles it would hold the connection for as long as it likes. ReadBody
// lifts the deadline once the body is read whole; a later request on the
// connection gets net/http's own header deadline.
func DeadlineBody(timeout time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hasBody(r) {
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// BodyOptions shape ReadBody.
type BodyOptions struct {
	// MaxBytes caps a body, and MaxLargeBytes the body of a request Large
	// names (the ingest routes).
	MaxBytes, MaxLargeBytes int64
	Large                   func(*http.Request) bool
	// Budget, when not nil, is the semaphore of body bytes held at once
	// (NewBodyBudget).
	Budget *semaphore.Weighted
	// Drain ends when the server starts to drain: reads in progress are
	// cut short.
	Drain context.Context
}

func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// ReadBody reads a request's whole body before the request takes an
// admission slot, so that a slow body holds no slot while its bytes trickle
// in and cannot starve well-behaved clients. The body is capped at
// o.MaxLargeBytes where o.Large says so and o.MaxBytes elsewhere (a
// declared Content-Length over the cap is refused before a byte is read:
// the server's 413), must arrive within DeadlineBody's deadline
// (ErrBodyTimeout: 408), and its buffer takes its bytes from o.Budget as
// it grows (ErrOverloaded when the budget is spent: 503), which bounds the memory of bodies being read
// or waiting however many connections send them. A server that starts to
// drain cuts the reads in progress short (ErrDraining: 503). Every refusal,
// answered by writeErr, closes the connection: the rest of such a body is
// not worth reading.
func ReadBody(o BodyOptions, writeErr func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !hasBody(r) {
				next.ServeHTTP(w, r)
				return
			}
			limit := o.MaxBytes
			if o.Large(r) {
				limit = o.MaxLargeBytes
			}
			rc := http.NewResponseController(w)
			refuse := func(err error) {
				_ = rc.SetReadDeadline(time.Now()) // whatever net/http would still read fails at once
				w.Header().Set("Connection", "close")
				writeErr(w, r, err)
			}
			if r.ContentLength > limit {
				refuse(&http.MaxBytesError{Limit: limit})
				return
			}
			stop := context.AfterFunc(o.Drain, func() { _ = rc.SetReadDeadline(time.Now()) })
			buf, held, err := readAll(r, http.MaxBytesReader(w, r.Body, limit), limit, o.Budget)
			stop()
			defer releaseBody(o.Budget, held)
			if err != nil {
				refuse(bodyError(r, o.Drain, err))
				return
			}
			_ = rc.SetReadDeadline(time.Time{})
			r.Body = &bufferedBody{Reader: bytes.NewReader(buf), buf: buf}
			next.ServeHTTP(w, r)
		})
	}
}

// errBodyBudget ends a body read when the server's body budget is spent.
var errBodyBudget = errors.New("body budget spent")

// readAll reads body whole into a buffer that grows as bytes arrive,
// taking each growth from the body budget. It returns the bytes, the
// budget held (to release when the request ends, also on error) and the
// read's error.
func readAll(r *http.Request, body io.Reader, limit int64, budget *semaphore.Weighted) ([]byte, int64, error) {
	size := int64(bodyChunk)
	if r.ContentLength > 0 {
		size = min(size, r.ContentLength+1) // +1: room to see EOF without growing
	}
	var held int64
	grow := func(n int64) bool {
		if budget != nil && !budget.TryAcquire(n) {
			return false
		}
		held += n
		return true
	}
	if !grow(size) {
		return nil, held, errBodyBudget
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			next := min(int64(cap(buf))*2, limit+1)
			if !grow(next - int64(cap(buf))) {
				return nil, held, errBodyBudget
			}
			buf = append(make([]byte, 0, next), buf...)
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}

func releaseBody(budget *semaphore.Weighted, n int64) {
	if budget != nil && n > 0 {
		budget.Release(n)
	}
}

// NewBodyBudget returns the semaphore of body bytes held at once:
// maxInFlight bodies of maxBody bytes (nil, no bound, when maxInFlight is
// negative).
func NewBodyBudget(maxInFlight int, maxBody int64) *semaphore.Weighted {
	if maxInFlight < 0 {
		return nil
	}
	return semaphore.NewWeighted(int64(maxInFlight) * max(maxBody, bodyChunk))
}

// bodyError maps a failed body read to the error answered.
func bodyError(r *http.Request, drain context.Context, err error) error {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, errBodyBudget):
		return fmt.Errorf("%w (request bodies being read hold the server's body budget)", ErrOverloaded)
	case drain.Err() != nil:
		return ErrDraining
	case errors.As(err, &ne) && ne.Timeout():
		return &messageError{sentinel: ErrBodyTimeout,
			msg: "the request body was not received within the server's time limit"}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), r.Context().Err() != nil:
		return fmt.Errorf("read request body: %w: %w", ErrClientClosed, err)
	}
	return fmt.Errorf("read request body: %w", err)
}
