package middleware

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
)

// Principal is who a request comes from, for the rate limiter, admission
// control and auth.
type Principal struct {
	Key     string // "key:<sha256 prefix>" or "ip:<addr>"
	Keyed   bool   // a valid API key was presented
	Present bool   // an Authorization header was present
}

type principalKey struct{}

// PrincipalFrom returns the principal Identify stored in r's context (the
// zero Principal without Identify).
func PrincipalFrom(r *http.Request) Principal {
	p, _ := r.Context().Value(principalKey{}).(Principal)
	return p
}

// Identify stores each request's principal in its context, for the stages
// that follow: the bearer API key when it is one of keys (SHA-256 sums,
// compared in constant time), else the client's IP.
func Identify(keys [][32]byte) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := authenticate(r, keys)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
		})
	}
}

func authenticate(r *http.Request, keys [][32]byte) Principal {
	h := r.Header.Get("Authorization")
	if h != "" {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer") // RFC 9110: the scheme is case-insensitive
		if ok {
			sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			for _, k := range keys {
				if subtle.ConstantTimeCompare(sum[:], k[:]) == 1 {
					return Principal{Key: "key:" + hex.EncodeToString(sum[:6]), Keyed: true, Present: true}
				}
			}
		}
		return Principal{Key: "ip:" + clientIP(r), Present: true}
	}
	return Principal{Key: "ip:" + clientIP(r)}
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
