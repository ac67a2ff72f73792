package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/hir-ads/hir/serving"
)

func TestPriorFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		weight  float32
		opts    serving.PriorOptions
		// co and coWeight are checked when co is set.
		co       serving.CoEngageOptions
		coWeight float32
	}{
		{name: "defaults", weight: serving.DefaultPriorWeight, opts: serving.PriorOptions{HalfLife: serving.DefaultPriorHalfLife,
			Impressions: serving.DefaultPriorImpressions, FreshWindow: serving.DefaultFreshWindow, FreshRank: serving.DefaultFreshRank,
			FreshEvents: serving.DefaultFreshEvents, NewUserEvents: serving.DefaultNewUserEvents,
			NewUserShrink: serving.DefaultNewUserShrink},
			co:       serving.CoEngageOptions{Window: serving.DefaultCoEngageWindow, History: serving.DefaultCoEngageHistory, HalfLife: serving.DefaultCoEngageHalfLife},
			coWeight: serving.DefaultCoEngageWeight},
		{name: "co-engagement set", args: []string{"--coengage-weight", "2.5", "--coengage-window", "7", "--coengage-history", "9", "--coengage-half-life", "3"},
			weight: serving.DefaultPriorWeight, opts: serving.PriorOptions{HalfLife: serving.DefaultPriorHalfLife,
				Impressions: serving.DefaultPriorImpressions, FreshWindow: serving.DefaultFreshWindow, FreshRank: serving.DefaultFreshRank,
				FreshEvents: serving.DefaultFreshEvents, NewUserEvents: serving.DefaultNewUserEvents, NewUserShrink: serving.DefaultNewUserShrink},
			co: serving.CoEngageOptions{Window: 7, History: 9, HalfLife: 3}, coWeight: 2.5},
		{name: "co-engagement off", args: []string{"--coengage-weight", "0", "--coengage-window", "0"},
			weight: serving.DefaultPriorWeight, opts: serving.PriorOptions{HalfLife: serving.DefaultPriorHalfLife,
				Impressions: serving.DefaultPriorImpressions, FreshWindow: serving.DefaultFreshWindow, FreshRank: serving.DefaultFreshRank,
				FreshEvents: serving.DefaultFreshEvents, NewUserEvents: serving.DefaultNewUserEvents, NewUserShrink: serving.DefaultNewUserShrink},
			co: serving.CoEngageOptions{Window: -1, History: serving.DefaultCoEngageHistory, HalfLife: serving.DefaultCoEngageHalfLife}, coWeight: -1},
		{name: "set", args: []string{"--prior-weight", "1", "--prior-half-life", "48h", "--prior-impressions", "0.25", "--fresh-window", "720h", "--fresh-rank", "5", "--fresh-events", "7", "--new-user-events", "2", "--new-user-shrink", "0.5"},
			weight: 1, opts: serving.PriorOptions{HalfLife: 48 * time.Hour, Impressions: 0.25, FreshWindow: 720 * time.Hour, FreshRank: 5, FreshEvents: 7, NewUserEvents: 2, NewUserShrink: 0.5}},
		{name: "zero turns parts off", args: []string{"--prior-weight", "0", "--prior-half-life", "0", "--prior-impressions", "0", "--fresh-window", "0", "--fresh-events", "0", "--new-user-events", "0", "--new-user-shrink", "0"},
			weight: -1, opts: serving.PriorOptions{HalfLife: -1, Impressions: -1, FreshWindow: -1, FreshRank: serving.DefaultFreshRank, FreshEvents: -1, NewUserEvents: -1, NewUserShrink: -1}},
		{name: "negative weight", args: []string{"--prior-weight", "-1"}, wantErr: true},
		{name: "negative impressions", args: []string{"--prior-impressions", "-0.5"}, wantErr: true},
		{name: "fresh rank 0", args: []string{"--fresh-rank", "0"}, wantErr: true},
		{name: "negative fresh events", args: []string{"--fresh-events", "-1"}, wantErr: true},
		{name: "negative new-user events", args: []string{"--new-user-events", "-1"}, wantErr: true},
		{name: "negative new-user shrink", args: []string{"--new-user-shrink", "-0.1"}, wantErr: true},
		{name: "negative co-engagement weight", args: []string{"--coengage-weight", "-1"}, wantErr: true},
		{name: "co-engagement weight too large", args: []string{"--coengage-weight", "5000"}, wantErr: true},
		{name: "co-engagement history 0", args: []string{"--coengage-history", "0"}, wantErr: true},
		{name: "co-engagement half-life 0", args: []string{"--coengage-half-life", "0"}, wantErr: true},
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
			if w := p.servingWeight(); w != tc.weight {
				t.Errorf("weight %v, want %v", w, tc.weight)
			}
			if o := p.options(); o != tc.opts {
				t.Errorf("options %+v, want %+v", o, tc.opts)
			}
			if tc.co != (serving.CoEngageOptions{}) {
				if o, w := p.coOptions(), p.coWeightServing(); o != tc.co || w != tc.coWeight {
					t.Errorf("co-engagement %+v weight %v, want %+v %v", o, w, tc.co, tc.coWeight)
				}
			}
		})
	}
}
