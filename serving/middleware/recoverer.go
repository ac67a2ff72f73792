package middleware

import (
	"fmt"
	"net/http"
)

// Recoverer turns a panic in a handler into the answer writeErr gives an
// error naming it (the server's: a logged 500 problem). An
// http.ErrAbortHandler panic is re-raised, as net/http expects.
func Recoverer(writeErr func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				writeErr(w, r, fmt.Errorf("recover from panic: %v", v))
			}()
			next.ServeHTTP(w, r)
		})
	}
}
