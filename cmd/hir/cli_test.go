package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkRun runs hir with args and checks its exit code and that its output
// (stdout and stderr) holds each of want; it returns the output.
func checkRun(t *testing.T, args []string, code int, want ...string) string {
	t.Helper()
	var out, errw bytes.Buffer
	got := run(context.Background(), args, &out, &errw)
	all := out.String() + errw.String()
	if got != code {
		t.Errorf("hir %v = %d, want %d; output:\n%s", args, got, code, all)
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("hir %v output lacks %q:\n%s", args, w, all)
		}
	}
	return all
}

// TestCLIExplainsItself (issue 52, goal 4): bare hir and a missing
// required flag exit 2 naming what is missing, without the whole flag
// list; hir version names the version, commit, Go and the GoMLX backend;
// commands that read a data directory never create one that does not
// exist, and say what to run instead.
func TestCLIExplainsItself(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo", "dir")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		want   []string
		unwant []string
	}{
		{"bare hir", nil, 2, []string{"Usage: hir <command>", "version"}, nil},
		{"help", []string{"help"}, 0, []string{"Usage: hir <command>"}, nil},
		{"version", []string{"version"}, 0, []string{"hir ", "commit ", "go go1.", "gomlx backend "}, nil},
		{"train without --data", []string{"train"}, 2, []string{"hir train: missing required flag --data", "hir train -h"}, []string{"-steps"}},
		{"serve without --data", []string{"serve"}, 2, []string{"hir serve: missing required flag --data"}, []string{"-addr"}},
		{"import without --src", []string{"import", "--data", missing}, 2, []string{"missing required flag --src"}, nil},
		{"log check without --data", []string{"log", "check"}, 2, []string{"missing required flag --data"}, nil},
		{"synth without --out", []string{"synth"}, 2, []string{"missing required flag --out"}, nil},
		{"calibrate without --data", []string{"calibrate"}, 2, []string{"missing required flag --data"}, nil},
		{"eval without --data", []string{"eval"}, 2, []string{"missing required flag --data"}, nil},
		{"train on a missing directory", []string{"train", "--data", missing}, 1, []string{"does not exist", "hir import --src SRC --data " + missing}, nil},
		{"calibrate on a missing directory", []string{"calibrate", "--data", missing}, 1, []string{"does not exist"}, nil},
		{"log check on a missing directory", []string{"log", "check", "--data", missing}, 1, []string{"does not exist"}, nil},
		{"log repair on a missing directory", []string{"log", "repair", "--data", missing}, 1, []string{"does not exist"}, nil},
		{"serve on a missing directory", []string{"serve", "--data", missing, "--addr", "127.0.0.1:0"}, 1, []string{"does not exist", "--init"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := checkRun(t, tc.args, tc.code, tc.want...)
			for _, w := range tc.unwant {
				if strings.Contains(all, w) {
					t.Errorf("hir %v output holds %q (the whole flag list):\n%s", tc.args, w, all)
				}
			}
			if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("hir %v created %s", tc.args, filepath.Dir(missing))
			}
		})
	}
}
