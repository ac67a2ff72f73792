package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// debugHandler serves Go's runtime profiles under /debug/pprof/ (CPU,
// heap, allocations, goroutines, mutex and block profiles, execution
// traces).
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// listenDebug opens the --debug-addr listener and logs the profiles' address.
func listenDebug(addr string, logger *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-addr: listen: %w", err)
	}
	logger.Info("serving profiles", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return ln, nil
}

// serveDebug serves debugHandler on ln until ctx ends.
func serveDebug(ctx context.Context, ln net.Listener, logger *slog.Logger) {
	srv := &http.Server{Handler: debugHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("debug listener stopped", "err", err)
	}
}
