package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// errUnhealthy is returned when the probed URL does not answer 200.
var errUnhealthy = errors.New("unhealthy")

// runHealthcheck probes a URL once and fails unless it answers 200: the
// container image's HEALTHCHECK (a scratch image has no curl).
func runHealthcheck(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "healthcheck", "[--url http://127.0.0.1:8080/readyz] [--timeout 3s]")
	url := fs.String("url", "http://127.0.0.1:8080/readyz", "URL to GET; healthy when it answers 200")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnhealthy, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %s", errUnhealthy, *url, res.Status)
	}
	return nil
}
