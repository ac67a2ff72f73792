package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/eval"
	"github.com/hir-ads/hir/model"
)

func testEnv() *env {
	return &env{stdout: io.Discard, stderr: io.Discard, logger: slog.New(slog.DiscardHandler)}
}

func TestParseEvalFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantErr  bool
		methods  []string
		ours     bool
		parts    bool
		context  bool
		narrow   bool
		newAd    float32
		band     float32
		protocol string
		window   string
		steps    int
		maxQ     int
	}{
		{name: "defaults", args: []string{"--data", "d"}, methods: eval.MethodNames(), ours: true,
			protocol: "chrono", window: "test", steps: model.DefaultSteps},
		{name: "replay validation", args: []string{"--data", "d", "--protocol", "replay", "--window", "validation", "--steps", "50", "--max-queries", "900"},
			methods: eval.MethodNames(), ours: true, protocol: "replay", window: "validation", steps: 50, maxQ: 900},
		{name: "methods subset", args: []string{"--data", "d", "--methods", "item-knn, ours,item-knn"},
			methods: []string{"item-knn"}, ours: true, protocol: "chrono", window: "test", steps: model.DefaultSteps},
		{name: "baselines only", args: []string{"--data", "d", "--protocol", "truth", "--methods", "popularity,bpr"},
			methods: []string{"popularity", "bpr"}, protocol: "truth", window: "test", steps: model.DefaultSteps},
		{name: "the embeddings' parts", args: []string{"--data", "d", "--methods", "ours-parts,popularity"},
			methods: []string{"popularity"}, ours: true, parts: true, protocol: "chrono", window: "test", steps: model.DefaultSteps},
		{name: "new-ad scale", args: []string{"--data", "d", "--new-ad-scale", "2"}, methods: eval.MethodNames(), ours: true,
			protocol: "chrono", window: "test", steps: model.DefaultSteps, newAd: 2},
		{name: "exact scoring", args: []string{"--data", "d", "--error-band", "-1"}, methods: eval.MethodNames(), ours: true,
			protocol: "chrono", window: "test", steps: model.DefaultSteps, band: -1},
		{name: "error band not a number", args: []string{"--data", "d", "--error-band", "NaN"}, wantErr: true},
		{name: "context users, narrow view", args: []string{"--data", "d", "--methods", "ours-context", "--narrow-request-view"},
			methods: []string{}, ours: true, context: true, narrow: true, protocol: "chrono", window: "test", steps: model.DefaultSteps},
		{name: "no data", args: []string{"--protocol", "chrono"}, wantErr: true},
		{name: "bad protocol", args: []string{"--data", "d", "--protocol", "online"}, wantErr: true},
		{name: "bad window", args: []string{"--data", "d", "--window", "train"}, wantErr: true},
		{name: "unknown method", args: []string{"--data", "d", "--methods", "popularity,hnsw"}, wantErr: true},
		{name: "no method", args: []string{"--data", "d", "--methods", ","}, wantErr: true},
		{name: "negative queries", args: []string{"--data", "d", "--max-queries", "-1"}, wantErr: true},
		{name: "negative prior weight", args: []string{"--data", "d", "--prior-weight", "-1"}, wantErr: true},
		{name: "negative new-ad scale", args: []string{"--data", "d", "--new-ad-scale", "-1"}, wantErr: true},
		{name: "infinite new-ad scale", args: []string{"--data", "d", "--new-ad-scale", "+Inf"}, wantErr: true},
		{name: "new-ad scale not a number", args: []string{"--data", "d", "--new-ad-scale", "NaN"}, wantErr: true},
		{name: "stray argument", args: []string{"--data", "d", "extra"}, wantErr: true},
		{name: "unknown flag", args: []string{"--data", "d", "--k", "5"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseEvalFlags(testEnv(), tc.args)
			if tc.wantErr {
				if !errors.Is(err, errUsage) {
					t.Fatalf("parseEvalFlags(%q) error = %v, want errUsage", tc.args, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseEvalFlags(%q): %v", tc.args, err)
			}
			if !slices.Equal(f.cfg.Methods, tc.methods) || f.useOurs != tc.ours || f.ours.Parts != tc.parts {
				t.Errorf("methods = %v ours %v parts %v, want %v ours %v parts %v", f.cfg.Methods, f.useOurs, f.ours.Parts, tc.methods, tc.ours, tc.parts)
			}
			if f.ours.NewAdScale != tc.newAd || f.ours.Build.Search.ErrorBand != tc.band {
				t.Errorf("new-ad scale %v error band %v, want %v %v", f.ours.NewAdScale, f.ours.Build.Search.ErrorBand, tc.newAd, tc.band)
			}
			if f.ours.Context != tc.context || f.ours.NarrowRequestView != tc.narrow {
				t.Errorf("context %v narrow view %v, want %v %v", f.ours.Context, f.ours.NarrowRequestView, tc.context, tc.narrow)
			}
			if f.cfg.Protocol != tc.protocol || f.cfg.Window != tc.window || f.ours.Train.Steps != tc.steps || f.cfg.MaxQueries != tc.maxQ {
				t.Errorf("protocol %q window %q steps %d max-queries %d, want %q %q %d %d", f.cfg.Protocol, f.cfg.Window,
					f.ours.Train.Steps, f.cfg.MaxQueries, tc.protocol, tc.window, tc.steps, tc.maxQ)
			}
			if f.ours.Build.Search.ExhaustiveMax != 1 {
				t.Errorf("exhaustive-max = %d, want 1", f.ours.Build.Search.ExhaustiveMax)
			}
		})
	}
}

// TestRunEvalBaselines runs `hir eval` end to end on a small synthetic world
// with baselines only (no model training): Markdown on stdout, JSON report on
// disk, exit code 0; and a bad flag exits 2.
func TestRunEvalBaselines(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	if _, err := dataset.Synth(ctx, dataset.SynthOptions{Users: 150, Ads: 150, Seed: 2, Coarse: 3, Mid: 6, Fine: 12, Days: 15}, data); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"eval", "--data", data, "--protocol", "truth", "--methods", "popularity,content", "--json", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("hir eval exit %d, stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "| popularity | all |") || !strings.Contains(stdout.String(), "interest_recall@20") {
		t.Errorf("stdout lacks the tables:\n%s", stdout.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep eval.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Protocol != "truth" || rep.Get("content", eval.SliceAll) == nil || rep.Truth == nil {
		t.Errorf("report protocol %q, content result %v, truth %v", rep.Protocol, rep.Get("content", eval.SliceAll), rep.Truth)
	}
	if code := run(ctx, []string{"eval", "--data", data, "--protocol", "nope"}, &stdout, &stderr); code != 2 {
		t.Errorf("bad protocol: exit %d, want 2", code)
	}
}
