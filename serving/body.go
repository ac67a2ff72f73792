package serving

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

// ingestRoutes are the endpoints whose bodies may be as large as
// Options.MaxBodyBytes; every other body is capped at
// Options.MaxReadBodyBytes.
var ingestRoutes = map[string]bool{
	"POST /v1/entities": true,
	"POST /v1/events":   true,
}

// bodyChunk is the first buffer of a body read and the smallest step of
// its growth; the buffer doubles as the body arrives.
const bodyChunk = 16 << 10

// bufferedBody is a request body read whole by readBody.
type bufferedBody struct {
	*bytes.Reader
	buf []byte
}

func (*bufferedBody) Close() error { return nil }

// deadlineBody bounds the time to read any request body, from the end of
// its headers, by a read deadline on the connection (Options.BodyReadTimeout).
// It comes first, so that a request refused before its body is read (401,
// 429, ...) is bounded too: net/http discards up to 256 KiB of an unread
// body after the handler returns, and without a deadline a client that
// trickles it would hold the connection for as long as it likes. readBody
// lifts the deadline once the body is read whole; a later request on the
// connection gets net/http's own header deadline.
func (s *Server) deadlineBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// readBody reads a request's whole body before the request takes an
// admission slot, so that a slow body holds no slot while its bytes trickle
// in and cannot starve well-behaved clients. The body is capped at
// Options.MaxBodyBytes on the ingest routes and Options.MaxReadBodyBytes
// elsewhere (a declared Content-Length over the cap gets 413 before a byte
// is read), must arrive within Options.BodyReadTimeout (408), and its
// buffer takes its bytes from the server's body budget as it grows (503
// when the budget is spent), which bounds the memory of bodies being read
// or waiting however many connections send them. A server that starts to
// drain cuts the reads in progress short (503). Every refusal here closes
// the connection: the rest of such a body is not worth reading.
func (s *Server) readBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hasBody(r) {
			next.ServeHTTP(w, r)
			return
		}
		limit := s.opts.MaxReadBodyBytes
		if ingestRoutes[r.Method+" "+r.URL.Path] {
			limit = s.opts.MaxBodyBytes
		}
		rc := http.NewResponseController(w)
		refuse := func(err error) {
			_ = rc.SetReadDeadline(time.Now()) // whatever net/http would still read fails at once
			w.Header().Set("Connection", "close")
			s.writeProblem(w, r, err)
		}
		if r.ContentLength > limit {
			refuse(&http.MaxBytesError{Limit: limit})
			return
		}
		stop := context.AfterFunc(s.drainCtx, func() { _ = rc.SetReadDeadline(time.Now()) })
		buf, held, err := s.readAll(r, http.MaxBytesReader(w, r.Body, limit), limit)
		stop()
		defer s.releaseBody(held)
		if err != nil {
			refuse(s.bodyError(r, err))
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		r.Body = &bufferedBody{Reader: bytes.NewReader(buf), buf: buf}
		next.ServeHTTP(w, r)
	})
}

// errBodyBudget ends a body read when the server's body budget is spent.
var errBodyBudget = errors.New("body budget spent")

// readAll reads body whole into a buffer that grows as bytes arrive,
// taking each growth from the body budget. It returns the bytes, the
// budget held (to release when the request ends, also on error) and the
// read's error.
func (s *Server) readAll(r *http.Request, body io.Reader, limit int64) ([]byte, int64, error) {
	size := int64(bodyChunk)
	if r.ContentLength > 0 {
		size = min(size, r.ContentLength+1) // +1: room to see EOF without growing
	}
	var held int64
	grow := func(n int64) bool {
		if s.bodyBudget != nil && !s.bodyBudget.TryAcquire(n) {
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

func (s *Server) releaseBody(n int64) {
	if s.bodyBudget != nil && n > 0 {
		s.bodyBudget.Release(n)
	}
}

// newBodyBudget returns the semaphore of body bytes held at once:
// maxInFlight bodies of maxBody bytes (nil, no bound, when maxInFlight is
// negative).
func newBodyBudget(maxInFlight int, maxBody int64) *semaphore.Weighted {
	if maxInFlight < 0 {
		return nil
	}
	return semaphore.NewWeighted(int64(maxInFlight) * max(maxBody, bodyChunk))
}

// bodyError maps a failed body read to the error answered.
func (s *Server) bodyError(r *http.Request, err error) error {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, errBodyBudget):
		return fmt.Errorf("%w (request bodies being read hold the server's body budget)", ErrOverloaded)
	case s.drainCtx.Err() != nil:
		return ErrShuttingDown
	case errors.As(err, &ne) && ne.Timeout():
		return &statusError{sentinel: ErrBodyTimeout,
			msg: "the request body was not received within the server's time limit"}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), r.Context().Err() != nil:
		return fmt.Errorf("read request body: %w: %w", errClientClosed, err)
	}
	return fmt.Errorf("read request body: %w", err)
}
