package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// stopWithGoRun makes the process receive SIGTERM when its parent dies, if
// it was started by `go run` (its executable sits in a go-build temporary
// directory). `go run` exits on SIGTERM without passing it on, which would
// leave the server running; this way stopping `go run ./cmd/hir demo`
// stops the server too (gracefully, like a direct SIGTERM). Started any
// other way, nothing changes.
func stopWithGoRun(logger *slog.Logger) {
	exe, err := os.Executable()
	if err != nil || !startedByGoRun(exe) {
		return
	}
	ppid := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		logger.Warn("started by go run, but cannot ask for SIGTERM when it exits", "err", err)
		return
	}
	if os.Getppid() != ppid { // go run exited before the request took effect
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}

// startedByGoRun reports whether exe is a binary `go run` built: .../go-build*/b001/exe/NAME.
func startedByGoRun(exe string) bool {
	dir := filepath.Dir(exe)
	return filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build")
}
