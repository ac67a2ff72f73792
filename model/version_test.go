package model

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mkVersion creates DIR/models/name with the given files (a config.json
// makes it a complete version).
func mkVersion(t *testing.T, dataDir, name string, files ...string) string {
	t.Helper()
	dir := filepath.Join(dataDir, modelsDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// names lists DIR/models and the files of its version directories as
// "vN" and "vN/file", sorted.
func names(t *testing.T, dataDir string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(dataDir, modelsDir)
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		out = append(out, e.Name())
		if files, err := os.ReadDir(filepath.Join(root, e.Name())); err == nil {
			for _, f := range files {
				out = append(out, e.Name()+"/"+f.Name())
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	mkVersion(t, dir, "v1", FileConfig, "index.bin", "index.bin.tmp123", "embeddings.bin.tmp9")
	mkVersion(t, dir, ".tmp-v2-555", FileWeights)
	mkVersion(t, dir, ".candidate-v2", FileConfig, FileWeights)
	removed, err := CleanStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 4 {
		t.Errorf("removed %d paths, want 4: %v", len(removed), removed)
	}
	if got, want := names(t, dir), []string{"v1", "v1/config.json", "v1/index.bin"}; !slices.Equal(got, want) {
		t.Errorf("after CleanStale: %v, want %v", got, want)
	}
	if removed, err := CleanStale(t.TempDir()); err != nil || len(removed) != 0 {
		t.Errorf("CleanStale on a data dir without models = %v, %v; want nothing, nil", removed, err)
	}
}

func TestPrune(t *testing.T) {
	for _, tc := range []struct {
		name    string
		keep    int
		serving string
		want    []string
	}{
		{"keep all", 0, "", []string{"v1", "v2", "v3", "v4"}},
		{"keep 2", 2, "", []string{"v3", "v4"}},
		{"keep 2 serving v1", 2, "v1", []string{"v1", "v3", "v4"}},
		{"keep more than there are", 9, "", []string{"v1", "v2", "v3", "v4"}},
		{"keep 1", 1, "", []string{"v4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, v := range []string{"v1", "v2", "v3", "v4"} {
				mkVersion(t, dir, v, FileConfig)
			}
			serving := ""
			if tc.serving != "" {
				serving = filepath.Join(dir, modelsDir, tc.serving)
			}
			if _, err := Prune(dir, tc.keep, serving); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range names(t, dir) {
				if filepath.Dir(n) == "." {
					got = append(got, n)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("after Prune(keep %d, serving %q): %v, want %v", tc.keep, tc.serving, got, tc.want)
			}
		})
	}
}

func TestAcceptDiscard(t *testing.T) {
	dir := t.TempDir()
	mkVersion(t, dir, "v1", FileConfig)
	cand := &Checkpoint{Version: "v2", Dir: mkVersion(t, dir, ".candidate-v2", FileConfig)}
	if latest, _ := LatestVersionDir(dir); filepath.Base(latest) != "v1" {
		t.Errorf("latest version with a pending candidate = %s, want v1", latest)
	}
	if err := Accept(cand); err != nil {
		t.Fatal(err)
	}
	if latest, _ := LatestVersionDir(dir); latest != cand.Dir || filepath.Base(latest) != "v2" {
		t.Errorf("latest version after Accept = %s (checkpoint dir %s), want v2", latest, cand.Dir)
	}
	if err := Discard(cand); err == nil {
		t.Error("Discard removed an accepted version")
	}
	rejected := &Checkpoint{Version: "v3", Dir: mkVersion(t, dir, ".candidate-v3", FileConfig)}
	if err := Discard(rejected); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, dir), []string{"v1", "v1/config.json", "v2", "v2/config.json"}; !slices.Equal(got, want) {
		t.Errorf("after accepting v2 and discarding v3: %v, want %v", got, want)
	}
	// A version published meanwhile by another writer is not replaced.
	clash := &Checkpoint{Version: "v2", Dir: mkVersion(t, dir, ".candidate-v2", FileConfig, "marker")}
	if err := Accept(clash); err == nil {
		t.Error("Accept replaced an existing version")
	}
}

func TestVerifyChecksums(t *testing.T) {
	files := []string{FileConfig, FileWeights, FileOptimizer, FilePrototypes, FileMetrics}
	for _, tc := range []struct {
		name    string
		damage  func(dir string) error
		wantErr error // nil: passes; ErrCorrupt or fs.ErrNotExist otherwise
		naming  string
	}{
		{"intact", func(string) error { return nil }, nil, ""},
		{"flipped byte in the weights", func(dir string) error { return flip(filepath.Join(dir, FileWeights)) }, ErrCorrupt, FileWeights},
		{"flipped byte in the config", func(dir string) error { return flip(filepath.Join(dir, FileConfig)) }, ErrCorrupt, FileConfig},
		{"missing optimizer state", func(dir string) error { return os.Remove(filepath.Join(dir, FileOptimizer)) }, fs.ErrNotExist, FileOptimizer},
		{"damaged checksums file", func(dir string) error { return os.WriteFile(filepath.Join(dir, FileChecksums), []byte("{"), 0o644) }, ErrCorrupt, FileChecksums},
		{"written without checksums", func(dir string) error { return os.Remove(filepath.Join(dir, FileChecksums)) }, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := mkVersion(t, t.TempDir(), "v1", files...)
			if err := os.WriteFile(filepath.Join(dir, FileWeights), []byte("some weights, long enough to flip"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := writeChecksums(dir); err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			err := VerifyChecksums(dir)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("VerifyChecksums = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.naming) {
				t.Fatalf("VerifyChecksums = %v, want %v naming %s", err, tc.wantErr, tc.naming)
			}
		})
	}
}

// flip inverts one bit in the middle of the file at path.
func flip(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	b[len(b)/2] ^= 0x04
	return os.WriteFile(path, b, 0o644)
}

func TestQuarantine(t *testing.T) {
	dir := t.TempDir()
	mkVersion(t, dir, "v1", FileConfig)
	v2 := mkVersion(t, dir, "v2", FileConfig)
	moved, err := Quarantine(v2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(moved), ".damaged-v2-") {
		t.Errorf("moved to %s, want models/.damaged-v2-*", moved)
	}
	if latest, _ := LatestVersionDir(dir); filepath.Base(latest) != "v1" {
		t.Errorf("latest version after quarantining v2 = %s, want v1", latest)
	}
	if removed, err := CleanStale(dir); err != nil || len(removed) != 0 {
		t.Errorf("CleanStale removed %v (%v): a quarantined version stays for inspection", removed, err)
	}
}

// TestCalibrationPointString checks the form logs give calibration points:
// the popularity weight's value where a point has one (not the pointer).
func TestCalibrationPointString(t *testing.T) {
	half := float32(0.5)
	for _, tc := range []struct {
		p    CalibrationPoint
		want string
	}{
		{CalibrationPoint{NewAdScale: 2, Recall: 0.0135, NDCG: 0.0085}, "new_ad_scale=2 prior_weight=0 recall=0.0135 ndcg=0.0085"},
		{CalibrationPoint{Popularity: &half, Recall: 0.02364, NDCG: 0.01172}, "new_ad_scale=0 popularity_weight=0.5 prior_weight=0 recall=0.0236 ndcg=0.0117"},
		{CalibrationPoint{PriorWeight: 0.125, Recall: 0.0439, NDCG: 0.0198}, "new_ad_scale=0 prior_weight=0.125 recall=0.0439 ndcg=0.0198"},
		{CalibrationPoint{PriorWeight: 1, Recall: 0.2, NDCG: 0.1, ColdRecall: 0.25, ColdUsers: 4, Score: 0.55, Low: 0.5, High: 0.6, DiffLow: -0.01, DiffHigh: 0.02},
			"new_ad_scale=0 prior_weight=1 recall=0.2000 ndcg=0.1000 cold_recall=0.2500 (4 users) score=0.5500 [0.5000, 0.6000] diff [-0.0100, +0.0200]"},
	} {
		if got := fmt.Sprintf("%v", []CalibrationPoint{tc.p}); got != "["+tc.want+"]" {
			t.Errorf("got %s, want [%s]", got, tc.want)
		}
	}
}
