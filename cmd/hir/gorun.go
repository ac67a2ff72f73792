package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopWithGoRun, when the process was started by `go run` (its executable
// sits in a go-build temporary directory), sends the process one SIGTERM as
// soon as its parent is gone: `go run` exits on SIGTERM without passing it
// on, which would leave the server running. So stopping `go run ./cmd/hir
// demo` stops the server too, gracefully, as a direct SIGTERM does. The
// watch (a poll of the parent pid every 200 ms) ends with ctx. Started any
// other way, nothing changes. (Linux's PR_SET_PDEATHSIG does not fit: it
// fires as each thread of the parent exits, and a second signal forces an
// exit.)
func stopWithGoRun(ctx context.Context, logger *slog.Logger) {
	exe, err := os.Executable()
	if err != nil || !startedByGoRun(exe) {
		return
	}
	ppid := os.Getppid()
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if os.Getppid() != ppid {
				logger.Info("go run exited: stopping the server")
				if p, err := os.FindProcess(os.Getpid()); err == nil {
					_ = p.Signal(syscall.SIGTERM)
				}
				return
			}
		}
	}()
}

// startedByGoRun reports whether exe is a binary `go run` built:
// .../go-build*/b001/exe/NAME.
func startedByGoRun(exe string) bool {
	dir := filepath.Dir(exe)
	work, ok := strings.CutPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build")
	return filepath.Base(dir) == "exe" && ok && work != "" && strings.Trim(work, "0123456789") == ""
}
