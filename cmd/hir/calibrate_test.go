package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/model"
)

// TestCalibrateCommand runs `hir train --calibrate=false` and then `hir
// calibrate` on a small world: the version gains its calibration, which
// it loads with, and bad flags are refused.
func TestCalibrateCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	world, data := t.TempDir(), t.TempDir()
	if _, err := dataset.Synth(ctx, restEvalWorld(), world); err != nil {
		t.Fatal(err)
	}
	hir := func(args ...string) (int, string) {
		t.Helper()
		var out, errw bytes.Buffer
		code := run(ctx, args, &out, &errw)
		return code, out.String() + errw.String()
	}
	if code, out := hir("import", "--src", world, "--data", data); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, out)
	}
	if code, out := hir("train", "--data", data, "--steps", "2", "--calibrate=false"); code != 0 {
		t.Fatalf("train: exit %d\n%s", code, out)
	}
	dir, err := model.LatestVersionDir(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, model.FileCalibration)); !os.IsNotExist(err) {
		t.Fatalf("train --calibrate=false wrote a calibration: %v", err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a given prior weight", []string{"--prior-weight", "1"}, 2, "chooses the prior weight"},
		{"recent -0.5", []string{"--recent", "-0.5"}, 0, `"calibration":{"new_ad_scale"`},
		{"recent 1", []string{"--recent", "1"}, 2, "--recent 1"},
		{"every engagement after the split (the default)", nil, 0, `"calibration":{"new_ad_scale"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := hir(append([]string{"calibrate", "--data", data}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("calibrate %v: exit %d, want %d with %q; output:\n%s", tc.args, code, tc.code, tc.want, out)
			}
		})
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Calibration(); c == nil || len(c.Points) == 0 {
		t.Errorf("the version's calibration after hir calibrate = %+v, want one with points", c)
	}
}
