package main

import (
	"context"
	"fmt"

	"github.com/hir-ads/hir/dataset"
)

func runSynth(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "synth", "--out DIR [--users N] [--ads M] [--seed S]")
	var o dataset.SynthOptions
	out := fs.String("out", "", "output directory (required)")
	fs.IntVar(&o.Users, "users", 10000, "number of users")
	fs.IntVar(&o.Ads, "ads", 10000, "number of ads")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed; the same seed gives byte-identical files")
	fs.IntVar(&o.Days, "days", 30, "length of the event window in days")
	fs.Float64Var(&o.EventsPerUser, "events-per-user", 0, "mean engagement events per user (0: default)")
	fs.IntVar(&o.Coarse, "coarse", 8, "coarse interests")
	fs.IntVar(&o.Mid, "mid", 64, "mid interests")
	fs.IntVar(&o.Fine, "fine", 512, "fine interests")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "out"); err != nil {
		return err
	}
	sum, err := dataset.Synth(ctx, o, *out)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, sum.String())
	return nil
}
