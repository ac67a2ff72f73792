package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/rank"
	"github.com/hir-ads/hir/retrieval"
)

// priorFlags are the flags of the re-rank's terms besides the embeddings
// (the ads' engagement priors and the co-engagement term), shared by serve,
// eval and the demo. As in package rank, a setting's 0 is its default and a
// negative value turns it off; a weight of 0 turns its term off.
type priorFlags struct {
	weight      float64
	weightSet   bool // --prior-weight was given: the calibrated weight is not served
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
	coAge       time.Duration
	newAdShare  float64
}

// defaultPriorFlags returns the flags' defaults: rank's.
func defaultPriorFlags() priorFlags {
	o, w := rank.DefaultOptions(), rank.DefaultWeights()
	return priorFlags{weight: float64(w.Prior), halfLife: o.Prior.HalfLife,
		impressions: o.Prior.ImpressionWeight, freshWindow: o.Prior.FreshWindow,
		freshRank: o.Prior.FreshRank, freshEvents: o.Prior.FreshEvents,
		newUser: int(o.NewUser), newShrink: o.Prior.NewUserShrink,
		coWeight: float64(w.CoEngagement), coWindow: o.CoEngage.WindowAds,
		coHistory: o.CoEngage.HistoryAds, coHalfLife: o.CoEngage.HalfLifeAds, coAge: o.CoEngage.HalfLife,
		newAdShare: float64(w.NewAdShare)}
}

// register adds the flags to fs, with p's values as their defaults.
func (p *priorFlags) register(fs *flag.FlagSet, weightUsage string) {
	fs.Func("prior-weight", fmt.Sprintf("%s (0: embeddings alone; default: the model version's calibrated weight, else %v)", weightUsage, p.weight),
		func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			p.weight, p.weightSet = f, true
			return err
		})
	fs.DurationVar(&p.halfLife, "prior-half-life", p.halfLife, "half-life of engagement in the ads' priors (0: the default; negative, e.g. -1h: no priors)")
	fs.Float64Var(&p.impressions, "prior-impressions", p.impressions, "weight of an impression in an ad's prior, relative to a click or deeper (0: the default; negative: impressions do not count)")
	fs.DurationVar(&p.freshWindow, "fresh-window", p.freshWindow, "an ad launched this recently (attribute start_time or release_date) gets the fresh floor (0: the default; negative, e.g. -1h: no floor)")
	fs.IntVar(&p.freshRank, "fresh-rank", p.freshRank, "a fresh ad's prior is at least that of the ad ranked this high by engagement (0: the default)")
	fs.IntVar(&p.freshEvents, "fresh-events", p.freshEvents, "a fresh ad keeps the floor until it has this many engagement events of any type (0: the default; negative: no limit)")
	fs.IntVar(&p.newUser, "new-user-events", p.newUser, "a user with at most this many events is new and ranked with the new-user priors, which count the events users made while new (0: the default; negative: no new-user priors)")
	fs.Float64Var(&p.newShrink, "new-user-shrink", p.newShrink, "share of an ad's count over all users added to its new-user count (0: the default; negative: none)")
	fs.Float64Var(&p.coWeight, "coengage-weight", p.coWeight, "weight of the co-engagement term in the re-rank (0: off)")
	fs.IntVar(&p.coWindow, "coengage-window", p.coWindow, "two ads a user engaged with are co-engaged when fewer than this many of the user's other ads lie between them (0: the default; negative: no co-engagement counts)")
	fs.IntVar(&p.coHistory, "coengage-history", p.coHistory, "the co-engagement term reads this many of the user's most recent engaged ads (0: the default)")
	fs.Float64Var(&p.coHalfLife, "coengage-half-life", p.coHalfLife, "the user's ad engaged with this many ads ago weighs half as much as the latest in the co-engagement term (0: the default)")
	fs.Float64Var(&p.newAdShare, "new-ad-share", p.newAdShare, fmt.Sprintf("up to this share of every prefix of the candidates goes to new ads (fewer engagement events than --fresh-events), the nearest first (0: none; at most %v)", rank.MaxNewAdShare))
	fs.DurationVar(&p.coAge, "coengage-age-half-life", p.coAge, "the user's ad last engaged with this long before the retrieval weighs half as much in the co-engagement term, so the term fades once a session is over (0: the default; negative, e.g. -1h: no time decay)")
}

// check reports flag values that are out of range (rank's Validate, named
// by flag).
func (p *priorFlags) check() error {
	if err := p.options().Validate(); err != nil {
		return fmt.Errorf("--prior-*, --fresh-*, --new-user-* and --coengage-* flags: %w", err)
	}
	if err := p.weights().Validate(); err != nil {
		return fmt.Errorf("--prior-weight, --coengage-weight: %w", err)
	}
	return nil
}

// calibrate returns the options that calibrate a trained version's prior
// weight for the flags' counters, with co-engagement weight co.
func (p *priorFlags) calibrate(co float64, logger *slog.Logger) *retrieval.CalibrateOptions {
	return &retrieval.CalibrateOptions{Rank: p.options(), CoEngagement: float32(co), Logger: logger}
}

// calibrateDefault calibrates version ck, trained on store, for the
// service's default counters and co-engagement weight (hir train, hir
// demo); nil when the store is not calibrated on.
func calibrateDefault(ctx context.Context, ck *model.Checkpoint, store *graph.Store, logger *slog.Logger) (*model.Calibration, error) {
	p := defaultPriorFlags()
	return retrieval.CalibrateVersion(ctx, ck.Dir, ck.Metrics.SplitTS, store, *p.calibrate(p.coWeight, logger))
}

// weights are the re-rank weights of the flags.
func (p *priorFlags) weights() rank.Weights {
	return rank.Weights{Prior: float32(p.weight), CoEngagement: float32(p.coWeight), NewAdShare: float32(p.newAdShare)}
}

// options are the ranking options of the flags.
func (p *priorFlags) options() rank.Options {
	return rank.Options{
		Prior: rank.PriorOptions{HalfLife: p.halfLife, ImpressionWeight: p.impressions, FreshWindow: p.freshWindow,
			FreshRank: p.freshRank, FreshEvents: p.freshEvents, NewUserShrink: p.newShrink},
		CoEngage: rank.CoEngageOptions{WindowAds: p.coWindow, HistoryAds: p.coHistory, HalfLifeAds: p.coHalfLife, HalfLife: p.coAge},
		NewUser:  rank.NewUser(p.newUser),
	}
}
