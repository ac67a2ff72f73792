package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/hir-ads/hir/serving"
)

// priorFlags are the flags of the re-rank's terms besides the embeddings
// (the ads' engagement priors and the co-engagement term), shared by serve,
// eval and the demo. On the command line 0 turns a part off; serving's
// options take a negative value for that (0 is their default).
type priorFlags struct {
	weight      float64
	halfLife    time.Duration
	impressions float64
	freshWindow time.Duration
	freshRank   int
	freshEvents int
	newUser     int
	newShrink   float64
	coWeight    float64
	coWindow    int
	coHistory   int
	coHalfLife  float64
}

// defaultPriorFlags returns the flags' defaults: serving's.
func defaultPriorFlags() priorFlags {
	return priorFlags{weight: serving.DefaultPriorWeight, halfLife: serving.DefaultPriorHalfLife,
		impressions: serving.DefaultPriorImpressions, freshWindow: serving.DefaultFreshWindow,
		freshRank: serving.DefaultFreshRank, freshEvents: serving.DefaultFreshEvents,
		newUser: serving.DefaultNewUserEvents, newShrink: serving.DefaultNewUserShrink,
		coWeight: serving.DefaultCoEngageWeight, coWindow: serving.DefaultCoEngageWindow,
		coHistory: serving.DefaultCoEngageHistory, coHalfLife: serving.DefaultCoEngageHalfLife}
}

// register adds the flags to fs, with p's values as their defaults.
func (p *priorFlags) register(fs *flag.FlagSet, weightUsage string) {
	fs.Float64Var(&p.weight, "prior-weight", p.weight, weightUsage+" (0: embeddings alone)")
	fs.DurationVar(&p.halfLife, "prior-half-life", p.halfLife, "half-life of engagement in the ads' priors (0: no priors)")
	fs.Float64Var(&p.impressions, "prior-impressions", p.impressions, "weight of an impression in an ad's prior, relative to a click or deeper (0: impressions do not count)")
	fs.DurationVar(&p.freshWindow, "fresh-window", p.freshWindow, "an ad launched this recently (attribute start_time or release_date) gets the fresh floor (0: no floor)")
	fs.IntVar(&p.freshRank, "fresh-rank", p.freshRank, "a fresh ad's prior is at least that of the ad ranked this high by engagement")
	fs.IntVar(&p.freshEvents, "fresh-events", p.freshEvents, "a fresh ad keeps the floor until it has this many engagement events of any type (0: no limit)")
	fs.IntVar(&p.newUser, "new-user-events", p.newUser, "a user with at most this many events is new and ranked with the new-user priors, which count the events users made while new (0: no new-user priors)")
	fs.Float64Var(&p.newShrink, "new-user-shrink", p.newShrink, "share of an ad's count over all users added to its new-user count (0: none)")
	fs.Float64Var(&p.coWeight, "coengage-weight", p.coWeight, "weight of the co-engagement term in the re-rank (0: off)")
	fs.IntVar(&p.coWindow, "coengage-window", p.coWindow, "two ads a user engaged with are co-engaged when fewer than this many of the user's other ads lie between them (0: no co-engagement counts)")
	fs.IntVar(&p.coHistory, "coengage-history", p.coHistory, "the co-engagement term reads this many of the user's most recent engaged ads")
	fs.Float64Var(&p.coHalfLife, "coengage-half-life", p.coHalfLife, "the user's ad engaged with this many ads ago weighs half as much as the latest in the co-engagement term")
}

// check reports flag values that are out of range.
func (p *priorFlags) check() error {
	if p.weight < 0 || p.halfLife < 0 || p.impressions < 0 || p.freshWindow < 0 || p.freshEvents < 0 || p.newUser < 0 || p.newShrink < 0 || p.freshRank < 1 {
		return errors.New("--prior-weight, --prior-half-life, --prior-impressions, --fresh-window, --fresh-events, --new-user-events and --new-user-shrink must be >= 0, --fresh-rank >= 1")
	}
	if p.coWeight < 0 || p.coWeight > serving.MaxCoEngageWeight || p.coWindow < 0 || p.coHistory < 1 || !(p.coHalfLife > 0) {
		return fmt.Errorf("--coengage-weight must be in 0..%v, --coengage-window >= 0, --coengage-history >= 1, --coengage-half-life > 0", serving.MaxCoEngageWeight)
	}
	return nil
}

// servingWeight is the re-rank weight in serving's convention.
func (p *priorFlags) servingWeight() float32 { return offIfZero(float32(p.weight)) }

// options are the prior options in serving's convention.
func (p *priorFlags) options() serving.PriorOptions {
	return serving.PriorOptions{HalfLife: offIfZero(p.halfLife), Impressions: offIfZero(p.impressions),
		FreshWindow: offIfZero(p.freshWindow), FreshRank: p.freshRank, FreshEvents: offIfZero(p.freshEvents),
		NewUserEvents: offIfZero(p.newUser), NewUserShrink: offIfZero(p.newShrink)}
}

// coWeightServing is the co-engagement weight in serving's convention.
func (p *priorFlags) coWeightServing() float32 { return offIfZero(float32(p.coWeight)) }

// coOptions are the co-engagement options in serving's convention.
func (p *priorFlags) coOptions() serving.CoEngageOptions {
	return serving.CoEngageOptions{Window: offIfZero(p.coWindow), History: p.coHistory, HalfLife: p.coHalfLife}
}

// offIfZero maps a flag's 0 ("off") to serving's -1 ("off"; 0 is its default).
func offIfZero[T int | float32 | float64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
