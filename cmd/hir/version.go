package main

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/hir-ads/hir/model"
)

// runVersion prints the module version, the commit it was built from, the Go
// version and the GoMLX backend the model code runs on.
func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "version", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	version, commit, goVersion := "(devel)", "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		var rev, when, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = ", modified"
				}
			}
		}
		if rev != "" {
			commit = rev
			if when != "" || dirty != "" {
				commit += " (" + when + dirty + ")"
			}
		}
	}
	backend := "unavailable"
	if be, err := model.Backend(); err == nil {
		backend = be.Name() + ": " + be.Description()
	} else {
		backend += ": " + err.Error()
	}
	fmt.Fprintf(e.stdout, "hir %s\ncommit %s\ngo %s\ngomlx backend %s\n", version, commit, goVersion, backend)
	return nil
}
