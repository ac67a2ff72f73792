package model

import (
	"fmt"
	"os"
	"sync"

	"github.com/gomlx/gomlx/backends"
	_ "github.com/gomlx/gomlx/backends/default" // simplego always; XLA when GOMLX_BACKEND=xla:... (cgo builds)
)

var (
	backendOnce sync.Once
	backendVal  backends.Backend
	backendErr  error
)

// Backend returns the process-wide GoMLX backend, created on first use. It
// honours GOMLX_BACKEND (e.g. "go", "xla:cuda", "xla:/path/pjrt_plugin.so");
// when the variable is unset it uses the pure-Go backend instead of GoMLX's
// default, which would try to download XLA. The pure-Go backend ("go" without
// options) runs with parallelism=-1: its bounded worker pool can deadlock when
// several DotGenerals run at once. Safe for concurrent use.
func Backend() (backends.Backend, error) {
	backendOnce.Do(func() {
		if os.Getenv("GOMLX_NO_AUTO_INSTALL") == "" {
			_ = os.Setenv("GOMLX_NO_AUTO_INSTALL", "1")
		}
		config := os.Getenv("GOMLX_BACKEND")
		if config == "" || config == "go" {
			config = "go:parallelism=-1"
		}
		backendVal, backendErr = newQuietBackend(config)
		if backendErr != nil {
			backendErr = fmt.Errorf("create gomlx backend %q: %w", config, backendErr)
		}
	})
	return backendVal, backendErr
}

// newQuietBackend creates the backend. SimpleGo prints its parallelism
// setting to standard output with fmt.Printf, which would corrupt the JSON
// that commands write there, so stdout points at the null device while it is
// created. This runs once per process, before any of our output.
func newQuietBackend(config string) (backends.Backend, error) {
	if devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		stdout := os.Stdout
		os.Stdout = devNull
		defer func() {
			os.Stdout = stdout
			devNull.Close()
		}()
	}
	return backends.NewWithConfig(config)
}
