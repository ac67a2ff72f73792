package middleware

import (
	"errors"
	"net/http"
)

// ErrUnauthorized means a missing or wrong bearer API key.
var ErrUnauthorized = errors.New("missing or invalid API key")

// Auth enforces bearer API keys (after Identify): a request whose route
// needKey names must carry a valid key, and a request that carries a key
// must carry a valid one even where none is needed (a wrong key is a
// client's bug). keyed says whether any keys are configured; without
// them every request passes. A refusal is answered by writeErr with
// ErrUnauthorized.
func Auth(keyed bool, needKey func(*http.Request) bool, writeErr func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !keyed {
				next.ServeHTTP(w, r)
				return
			}
			p := PrincipalFrom(r)
			if (p.Present || needKey(r)) && !p.Keyed {
				writeErr(w, r, ErrUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
