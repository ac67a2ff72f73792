package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hir-ads/hir/serving"
)

// runCeiling serves the HTTP ceiling of POST /v1/retrieve
// (serving.NewCeilingHandler) until ctx ends: `hir bench` against it
// measures what the HTTP layer alone answers on this machine, the
// reference of the serving benchmark's ratios.
func runCeiling(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "ceiling", "[--addr 127.0.0.1:18479]")
	addr := fs.String("addr", "127.0.0.1:18479", "listen address")
	if err := parse(fs, args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: serving.NewCeilingHandler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(e.stdout, "HIR ceiling: serving on http://%s\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
