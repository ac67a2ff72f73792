//go:build !linux

package main

import "log/slog"

// stopWithGoRun does nothing outside Linux: stop `go run ./cmd/hir demo`
// with Ctrl-C (SIGINT reaches the whole process group), or run the built
// binary.
func stopWithGoRun(*slog.Logger) {}
