// Package problem holds what the HTTP layer's middleware and handlers
// share below both: the request's identity (the id every log line, span
// and problem names), the status marks a response carries for the access
// log when nothing is written, and the writer of RFC 9457
// application/problem+json answers.
//
// It imports nothing of the service but its generated API types, so that
// the middleware stages and the handlers (package serving) can both use it.
package problem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/hir-ads/hir/api"
)

// TypeBase prefixes the "type" URI of every problem the server writes.
const TypeBase = "https://hir.dev/problems/"

// RequestIDHeader is the header that carries the request id in both
// directions: a sane incoming value is kept, otherwise one is generated.
const RequestIDHeader = "X-Request-Id"

type ctxKey struct{}

// RequestID returns the id of the request whose context ctx is ("": none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// WithRequestID returns ctx carrying the request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// NewRequestID returns id when it is a sane client-chosen request id
// (1-64 printable ASCII characters, no spaces), else a random one.
func NewRequestID(id string) string {
	if saneID(id) {
		return id
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func saneID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// Marker is a response writer that records a status for the access log
// and the metrics when none is written (a client that went away: 499).
type Marker interface {
	MarkStatus(status int)
}

// MarkStatus records status on the first Marker among w and the writers
// it wraps (Unwrap), as http.ResponseController finds them.
func MarkStatus(w http.ResponseWriter, status int) {
	for {
		switch rw := w.(type) {
		case Marker:
			rw.MarkStatus(status)
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = rw.Unwrap()
		default:
			return
		}
	}
}

// Recorder remembers the status and size of a response, for the access
// log and the metrics.
type Recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

// NewRecorder wraps w.
func NewRecorder(w http.ResponseWriter) *Recorder { return &Recorder{ResponseWriter: w} }

// WriteHeader implements http.ResponseWriter.
func (rec *Recorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (rec *Recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// MarkStatus implements Marker: status stands unless one was written.
func (rec *Recorder) MarkStatus(status int) {
	if rec.status == 0 {
		rec.status = status
	}
}

// Status is the status written or marked (0: none yet).
func (rec *Recorder) Status() int { return rec.status }

// Bytes is the size of the body written.
func (rec *Recorder) Bytes() int64 { return rec.bytes }

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *Recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// Problem is one RFC 9457 answer.
type Problem struct {
	Status int
	Slug   string // the type URI's last segment, after TypeBase
	Title  string
	Detail string // "": none
	Item   *int   // the index of the batch item at fault, if any
}

// Write answers p to r as application/problem+json; its instance is the
// request's path (clipped by the caller) and request id. Headers the
// answer needs beside it (Retry-After, WWW-Authenticate) are the caller's
// to set first.
func Write(w http.ResponseWriter, r *http.Request, path string, p Problem) {
	out := api.Problem{Status: p.Status, Title: p.Title, Item: p.Item}
	typ := TypeBase + p.Slug
	out.Type = &typ
	instance := path
	if id := RequestID(r.Context()); id != "" {
		instance += "#req=" + id
	}
	out.Instance = &instance
	if p.Detail != "" {
		d := p.Detail
		out.Detail = &d
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(out)
}
