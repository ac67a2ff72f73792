package middleware

import (
	"net/http"

	"github.com/hir-ads/hir/serving/problem"
)

// RequestID tags each request with an id (kept from the client's
// problem.RequestIDHeader when it is short and printable), echoes it in
// the response and stores it in the context for logs, spans and problem
// instances (problem.RequestID).
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := problem.NewRequestID(r.Header.Get(problem.RequestIDHeader))
		w.Header().Set(problem.RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(problem.WithRequestID(r.Context(), id)))
	})
}
