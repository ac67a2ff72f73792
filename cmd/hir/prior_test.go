package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/rank"
)

func TestPriorFlags(t *testing.T) {
	def := rank.DefaultOptions()
	with := func(edit func(*rank.Options)) rank.Options {
		o := rank.DefaultOptions()
		edit(&o)
		return o
	}
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		weights rank.Weights
		opts    rank.Options
	}{
		{name: "defaults", weights: rank.DefaultWeights(), opts: def},
		{name: "co-engagement set", args: []string{"--coengage-weight", "2.5", "--coengage-window", "7", "--coengage-history", "9", "--coengage-half-life", "3", "--coengage-age-half-life", "1h"},
			weights: rank.Weights{Prior: rank.DefaultPriorWeight, CoEngagement: 2.5, NewAdShare: rank.DefaultNewAdShare},
			opts: with(func(o *rank.Options) {
				o.CoEngage = rank.CoEngageOptions{WindowAds: 7, HistoryAds: 9, HalfLifeAds: 3, HalfLife: time.Hour}
			})},
		{name: "no co-engagement time decay", args: []string{"--coengage-age-half-life", "-1h"},
			weights: rank.DefaultWeights(), opts: with(func(o *rank.Options) { o.CoEngage.HalfLife = -time.Hour })},
		{name: "co-engagement off", args: []string{"--coengage-weight", "0", "--coengage-window", "-1"},
			weights: rank.Weights{Prior: rank.DefaultPriorWeight, NewAdShare: rank.DefaultNewAdShare}, opts: with(func(o *rank.Options) { o.CoEngage.WindowAds = -1 })},
		{name: "set", args: []string{"--prior-weight", "1", "--prior-half-life", "48h", "--prior-impressions", "0.25", "--fresh-window", "720h", "--fresh-rank", "5", "--fresh-events", "7", "--new-user-events", "2", "--new-user-shrink", "0.5"},
			weights: rank.Weights{Prior: 1, CoEngagement: rank.DefaultCoEngageWeight, NewAdShare: rank.DefaultNewAdShare},
			opts: with(func(o *rank.Options) {
				o.Prior = rank.PriorOptions{HalfLife: 48 * time.Hour, ImpressionWeight: 0.25, FreshWindow: 720 * time.Hour, FreshRank: 5, FreshEvents: 7, NewUserShrink: 0.5}
				o.NewUser = 2
			})},
		{name: "negative turns settings off, a weight of zero its term", args: []string{"--prior-weight", "0", "--prior-half-life", "-1h", "--prior-impressions", "-1", "--fresh-window", "-1h", "--fresh-events", "-1", "--new-user-events", "-1", "--new-user-shrink", "-1", "--new-ad-share", "0"},
			weights: rank.Weights{CoEngagement: rank.DefaultCoEngageWeight},
			opts: with(func(o *rank.Options) {
				o.Prior = rank.PriorOptions{HalfLife: -time.Hour, ImpressionWeight: -1, FreshWindow: -time.Hour, FreshRank: rank.DefaultFreshRank, FreshEvents: -1, NewUserShrink: -1}
				o.NewUser = -1
			})},
		{name: "zero takes the defaults", args: []string{"--prior-half-life", "0", "--prior-impressions", "0", "--fresh-window", "0", "--fresh-rank", "0", "--fresh-events", "0", "--new-user-events", "0", "--new-user-shrink", "0", "--coengage-window", "0", "--coengage-history", "0", "--coengage-half-life", "0", "--coengage-age-half-life", "0"},
			weights: rank.DefaultWeights(), opts: def},
		{name: "negative weight", args: []string{"--prior-weight", "-1"}, wantErr: true},
		{name: "NaN impressions", args: []string{"--prior-impressions", "NaN"}, wantErr: true},
		{name: "negative fresh rank", args: []string{"--fresh-rank", "-1"}, wantErr: true},
		{name: "negative co-engagement weight", args: []string{"--coengage-weight", "-1"}, wantErr: true},
		{name: "co-engagement weight too large", args: []string{"--coengage-weight", "5000"}, wantErr: true},
		{name: "new-ad share set", args: []string{"--new-ad-share", "0.2"},
			weights: rank.Weights{Prior: rank.DefaultPriorWeight, CoEngagement: rank.DefaultCoEngageWeight, NewAdShare: 0.2}, opts: def},
		{name: "negative new-ad share", args: []string{"--new-ad-share", "-0.1"}, wantErr: true},
		{name: "new-ad share too large", args: []string{"--new-ad-share", "0.6"}, wantErr: true},
		{name: "negative co-engagement history", args: []string{"--coengage-history", "-1"}, wantErr: true},
		{name: "negative co-engagement half-life", args: []string{"--coengage-half-life", "-1"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			p := defaultPriorFlags()
			p.register(fs, "weight")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := p.check()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("check(%q) = nil, want an error", tc.args)
				}
				return
			}
			if err != nil {
				t.Fatalf("check(%q): %v", tc.args, err)
			}
			if w := p.weights(); w != tc.weights {
				t.Errorf("weights %+v, want %+v", w, tc.weights)
			}
			if o := p.options().WithDefaults(); o != tc.opts {
				t.Errorf("options %+v, want %+v", o, tc.opts)
			}
			if pinned := slices.Contains(tc.args, "--prior-weight"); p.weightSet != pinned {
				t.Errorf("prior weight set = %v, want %v (a given --prior-weight is served in place of the calibrated one)", p.weightSet, pinned)
			}
		})
	}
}

// TestBadFlagValueIsReported checks that a flag value refused after parsing
// (a range check) exits 2 with a message naming it, not silently.
func TestBadFlagValueIsReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"serve prior weight", []string{"serve", "--data", t.TempDir(), "--prior-weight", "-1"}, "prior weight"},
		{"eval protocol", []string{"eval", "--data", t.TempDir(), "--protocol", "nope"}, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := run(t.Context(), tc.args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tc.want)
			}
		})
	}
}
