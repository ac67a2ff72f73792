package serving

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/retrieval"
	"github.com/hir-ads/hir/serving/middleware"
	"github.com/hir-ads/hir/serving/problem"
)

// Sentinel errors. Handlers wrap them; writeProblem maps each to its HTTP
// status. Callers outside the package may test for them with errors.Is.
var (
	// ErrNoSnapshot means no model has been trained or loaded yet.
	ErrNoSnapshot = retrieval.ErrNoGeneration
	// ErrBadRequest marks an invalid request (body, parameter or filter).
	ErrBadRequest = errors.New("bad request")
	// ErrNotFound marks an unknown entity, token or route.
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized means a missing or wrong bearer API key.
	ErrUnauthorized = middleware.ErrUnauthorized
	// ErrRateLimited means the caller's token bucket is empty.
	ErrRateLimited = middleware.ErrRateLimited
	// ErrOverloaded means the server is handling Options.MaxInFlight
	// requests and none finished within Options.MaxQueueWait: the request
	// was not started. Answered with 503 and Retry-After: 1.
	ErrOverloaded = middleware.ErrOverloaded
	// errCallerBusy means the caller (API key, else client IP) already
	// holds its share of the requests in flight (three quarters of
	// Options.MaxInFlight). Answered with 429 and Retry-After: 1.
	errCallerBusy = middleware.ErrCallerBusy
	// ErrBodyTooLarge means the request body exceeds Options.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrUnsupportedMediaType means the request body is not application/json.
	ErrUnsupportedMediaType = errors.New("content type must be application/json")
	// ErrMethodNotAllowed means the route exists but not for this method.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrTrainingInProgress means a training run is already running.
	ErrTrainingInProgress = errors.New("a training run is already in progress")
	// ErrNoTrainer means the server has no trainer configured.
	ErrNoTrainer = errors.New("training is not configured on this server")
	// ErrShuttingDown means the server is draining and accepts no new work.
	ErrShuttingDown = middleware.ErrDraining
	// ErrClusterUnavailable means the cluster's shared event stream (Redis)
	// did not take a write: the batch is not acknowledged (retry; events
	// with ids are deduplicated). Answered with 503 and Retry-After.
	ErrClusterUnavailable = errors.New("the cluster's shared event stream (Redis) is unavailable: the batch is not acknowledged (one stored here reaches the other replicas once Redis is back); retry later (events with ids are deduplicated)")
	// ErrBodyTimeout means the request body was not received within
	// Options.BodyReadTimeout.
	ErrBodyTimeout = middleware.ErrBodyTimeout
	// errClientClosed means the client closed the connection before its
	// request body was complete: nobody is left to answer (499).
	errClientClosed = middleware.ErrClientClosed
	// ErrEventConflict means an ingested event repeats a stored event id
	// with a different payload (409): the batch is not stored.
	ErrEventConflict = errors.New("event id already stored with a different payload")
	// ErrWritesFailing is /readyz's answer while the event log cannot write
	// (a full disk or an I/O error): ingestion answers 507 or 503 until the
	// log recovers by itself; reads are still served.
	ErrWritesFailing = errors.New("event log writes are failing (disk full or I/O error; see the server log): ingestion is refused until they work again, reads are served")
)

// ItemError is a validation error of one item of a batch request. Its
// message names the item, as in `events[3]: src: unknown node type "usr"`,
// and writeProblem reports Index in the problem's "item" member.
type ItemError struct {
	Field string // "entities" or "events"
	Index int
	// Member, when set, names the item's offending member, as in
	// `events[3].ts: ...`.
	Member string
	Err    error
}

// Error implements error.
func (e *ItemError) Error() string {
	if e.Member != "" {
		return fmt.Sprintf("%s[%d].%s: %v", e.Field, e.Index, e.Member, e.Err)
	}
	return fmt.Sprintf("%s[%d]: %v", e.Field, e.Index, e.Err)
}

// Unwrap returns the underlying error.
func (e *ItemError) Unwrap() error { return e.Err }

// badRequestf returns an error wrapping ErrBadRequest whose message is the
// formatted text alone.
func badRequestf(format string, args ...any) error {
	return &statusError{sentinel: ErrBadRequest, msg: fmt.Sprintf(format, args...)}
}

// notFoundf returns an error wrapping ErrNotFound whose message is the
// formatted text alone.
func notFoundf(format string, args ...any) error {
	return &statusError{sentinel: ErrNotFound, msg: fmt.Sprintf(format, args...)}
}

// statusError carries a client-facing message and the sentinel that decides
// its status.
type statusError struct {
	sentinel error
	msg      string
}

func (e *statusError) Error() string { return e.msg }
func (e *statusError) Unwrap() error { return e.sentinel }

// classify maps err to an HTTP status, a problem type slug and a title.
func classify(err error) (status int, slug, title string) {
	var maxBytes *http.MaxBytesError
	var itemErr *ItemError
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var paramErr *api.InvalidParamFormatError
	var reqParamErr *api.RequiredParamError
	switch {
	case errors.Is(err, ErrBodyTooLarge), errors.As(err, &maxBytes):
		return http.StatusRequestEntityTooLarge, "body-too-large", "Request body too large"
	case errors.Is(err, ErrUnsupportedMediaType):
		return http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type"
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized, "unauthorized", "Unauthorized"
	case errors.Is(err, ErrRateLimited), errors.Is(err, errCallerBusy):
		return http.StatusTooManyRequests, "rate-limited", "Too many requests"
	case errors.Is(err, ErrMethodNotAllowed):
		return http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed"
	case errors.Is(err, ErrNotFound), errors.Is(err, retrieval.ErrNotFound):
		return http.StatusNotFound, "not-found", "Not found"
	case errors.Is(err, ErrTrainingInProgress):
		return http.StatusConflict, "training-in-progress", "Training in progress"
	case errors.Is(err, ErrEventConflict):
		return http.StatusConflict, "event-conflict", "Event id conflict"
	case errors.Is(err, ErrNotLeader):
		return http.StatusConflict, "not-leader", "Not the trainer leader"
	case errors.Is(err, ErrNoSnapshot):
		return http.StatusServiceUnavailable, "no-model", "No model available"
	case errors.Is(err, ErrNoTrainer):
		return http.StatusServiceUnavailable, "no-trainer", "Training not configured"
	case errors.Is(err, ErrShuttingDown):
		return http.StatusServiceUnavailable, "shutting-down", "Shutting down"
	case errors.Is(err, ErrOverloaded):
		return http.StatusServiceUnavailable, "overloaded", "Overloaded"
	case errors.Is(err, ErrBodyTimeout):
		return http.StatusRequestTimeout, "body-timeout", "Request body too slow"
	case errors.Is(err, errClientClosed):
		return 499, "client-closed-request", "Client closed request"
	case errors.Is(err, ErrWritesFailing):
		return http.StatusServiceUnavailable, "writes-failing", "Writes failing"
	case errors.Is(err, ErrClusterUnavailable):
		return http.StatusServiceUnavailable, "cluster-unavailable", "Cluster unavailable"
	case errors.Is(err, eventlog.ErrFailed) && errors.Is(err, syscall.ENOSPC):
		return http.StatusInsufficientStorage, "insufficient-storage", "Insufficient storage"
	case errors.Is(err, eventlog.ErrFailed):
		return http.StatusServiceUnavailable, "writes-failing", "Writes failing"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "timeout", "Request timed out"
	case errors.Is(err, ErrBadRequest), errors.Is(err, retrieval.ErrBadRequest), errors.As(err, &itemErr), errors.As(err, &syntaxErr),
		errors.As(err, &typeErr), errors.As(err, &paramErr), errors.As(err, &reqParamErr),
		errors.Is(err, retrieval.ErrBadFilter), errors.Is(err, retrieval.ErrBadQuery), errors.Is(err, retrieval.ErrBadTextQuery),
		isGraphValidation(err):
		return http.StatusBadRequest, "bad-request", "Bad request"
	case errors.Is(err, context.Canceled):
		// The client went away; 499 is nginx's convention and is only logged.
		return 499, "client-closed-request", "Client closed request"
	default:
		return http.StatusInternalServerError, "internal", "Internal server error"
	}
}

func isGraphValidation(err error) bool {
	for _, s := range []error{graph.ErrUnknownNodeType, graph.ErrUnknownEdgeType, graph.ErrMissingID,
		graph.ErrBadTimestamp, graph.ErrBadValue, graph.ErrBadID, graph.ErrEdgeNotAllowed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// writeProblem writes err as an RFC 9457 application/problem+json response and
// logs it once. The detail of a 5xx never carries internal error text.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	status, slug, title := classify(err)
	var detail string
	switch {
	case status == http.StatusInsufficientStorage:
		detail = "the server's disk is full: nothing of the request was stored; retry later"
		s.logger.WarnContext(r.Context(), "write refused: disk full", "path", r.URL.Path,
			"request_id", problem.RequestID(r.Context()), "err", err)
	case status >= 500 && status != http.StatusServiceUnavailable:
		detail = "the server failed to handle the request; see the server log for request " + problem.RequestID(r.Context())
		s.logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"request_id", problem.RequestID(r.Context()), "err", err)
	case status == http.StatusServiceUnavailable:
		// 503 sentinels carry client-facing text; anything else stays generic.
		detail = title
		for _, s := range []error{ErrNoSnapshot, ErrNoTrainer, ErrShuttingDown, ErrWritesFailing, ErrClusterUnavailable} {
			if errors.Is(err, s) {
				detail = s.Error()
			}
		}
		if errors.Is(err, context.DeadlineExceeded) {
			detail = "the request did not complete within the server's time limit"
		}
		if errors.Is(err, eventlog.ErrFailed) {
			detail = "the event log cannot write (see the server log): nothing of the request was stored; retry later"
			s.logger.WarnContext(r.Context(), "write refused: event log failing", "path", r.URL.Path,
				"request_id", problem.RequestID(r.Context()), "err", err)
		}
	default:
		detail = clipDetail(clientDetail(err))
		s.logger.DebugContext(r.Context(), "request rejected", "status", status, "path", clip(r.URL.Path),
			"request_id", problem.RequestID(r.Context()), "err", detail)
	}
	p := problem.Problem{Status: status, Slug: slug, Title: title, Detail: detail}
	var itemErr *ItemError
	if errors.As(err, &itemErr) {
		idx := itemErr.Index
		p.Item = &idx
	}
	switch {
	case status == http.StatusTooManyRequests, errors.Is(err, ErrOverloaded):
		w.Header().Set("Retry-After", "1")
	case errors.Is(err, eventlog.ErrFailed), errors.Is(err, ErrClusterUnavailable),
		status == http.StatusServiceUnavailable && !errors.Is(err, ErrNoTrainer):
		w.Header().Set("Retry-After", "5") // writes failing, no model yet, draining, or over time: retrying may help
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hir"`)
	}
	if status == http.StatusRequestTimeout {
		// The rest of the body is not worth waiting for: do not drain it.
		w.Header().Set("Connection", "close")
	}
	if status == 499 {
		problem.MarkStatus(w, 499) // nobody is listening: only logged and metered
		return
	}
	problem.Write(w, r, clip(r.URL.Path), p)
}

// maxDetailBytes bounds a problem's detail.
const maxDetailBytes = 512

// clipDetail bounds what a 4xx detail may repeat of the client's input:
// every space-separated token longer than maxEcho is clipped, and the whole
// to maxDetailBytes.
func clipDetail(d string) string {
	if len(d) <= maxEcho {
		return d
	}
	toks := strings.Split(d, " ")
	for i, t := range toks {
		toks[i] = clip(t)
	}
	d = strings.Join(toks, " ")
	if len(d) > maxDetailBytes {
		d = cutAtRune(d, maxDetailBytes) + "…"
	}
	return d
}

// clientDetail renders a 4xx error for the client, replacing encoding/json's
// Go-flavoured messages with JSON-flavoured ones.
func clientDetail(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		return fmt.Sprintf("request body exceeds %d bytes", maxBytes.Limit)
	case errors.As(err, &typeErr):
		msg := fmt.Sprintf("want %s, got JSON %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
		if typeErr.Field != "" {
			msg = strings.TrimPrefix(typeErr.Field, ".") + ": " + msg
		}
		return prefixOf(err, typeErr) + msg
	case errors.As(err, &syntaxErr):
		return prefixOf(err, syntaxErr) + fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	}
	return err.Error()
}

// prefixOf returns the text err's wrappers put before inner's message
// ("events[3]: "), so that rewriting inner keeps the item's name.
func prefixOf(err, inner error) string {
	full, in := err.Error(), inner.Error()
	if p, ok := strings.CutSuffix(full, in); ok {
		return p
	}
	return ""
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	case "float32", "float64":
		return "a number"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	}
	return goKind
}

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// isNotFound reports whether err means an unknown entity, token or route.
func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, retrieval.ErrNotFound)
}
