package rank

import (
	"errors"
	"fmt"
	"time"
)

// ErrBadOptions is returned (wrapped) by Validate for settings out of range.
var ErrBadOptions = errors.New("bad ranking settings")

// Limits and defaults of the re-rank weights. The defaults were chosen on
// the validation windows of MovieLens-100K (docs/evaluation-log.md).
const (
	DefaultPriorWeight    = 1.5
	DefaultCoEngageWeight = 5
	MaxPriorWeight        = 100
	MaxCoEngageWeight     = 1000
	// DefaultNewAdShare is the share of a retrieval's candidates kept for
	// new ads (Weights.NewAdShare).
	DefaultNewAdShare = 0.05
	// MaxNewAdShare bounds Weights.NewAdShare.
	MaxNewAdShare = 0.5
)

// DefaultNewUserEvents is the most events a user has while new.
const DefaultNewUserEvents = 5

// Weights scale the terms that the exact re-rank adds to the dot product of
// the user's and the ad's embeddings: an ad scores
// dot + Prior*prior(ad) + CoEngagement*coengagement(user, ad). Weights are
// values, not settings: each is used as it is, so a weight of 0 is a term
// of weight 0 (off), as a request's prior_weight: 0 is, and the zero
// Weights rank by the embeddings alone. Start from [DefaultWeights]. A
// request may override the service's weights.
//
// NewAdShare is the exploration share: up to this share of every prefix of
// the candidates goes to new ads (Priors.NewAds: ads still within their
// exploration budget of engagement events), the best of them by similarity
// to the user, so that an ad is shown to the users it is nearest before
// any engagement tells the priors and the co-engagement term about it. 0:
// none.
type Weights struct {
	Prior        float32
	CoEngagement float32
	NewAdShare   float32
}

// DefaultWeights returns the service's default weights.
func DefaultWeights() Weights {
	return Weights{Prior: DefaultPriorWeight, CoEngagement: DefaultCoEngageWeight, NewAdShare: DefaultNewAdShare}
}

// Validate checks that each weight lies in 0..its maximum.
func (w Weights) Validate() error {
	if !(w.Prior >= 0 && w.Prior <= MaxPriorWeight) {
		return fmt.Errorf("%w: prior weight %v is out of range 0..%v", ErrBadOptions, w.Prior, MaxPriorWeight)
	}
	if !(w.CoEngagement >= 0 && w.CoEngagement <= MaxCoEngageWeight) {
		return fmt.Errorf("%w: co-engagement weight %v is out of range 0..%v", ErrBadOptions, w.CoEngagement, MaxCoEngageWeight)
	}
	if !(w.NewAdShare >= 0 && w.NewAdShare <= MaxNewAdShare) {
		return fmt.Errorf("%w: new-ad share %v is out of range 0..%v", ErrBadOptions, w.NewAdShare, MaxNewAdShare)
	}
	return nil
}

// NewUser is the one definition of a new user: a user with at most this
// many events (stored, plus those a request carries) is new. A new user is
// embedded from their current neighbourhood at request time rather than
// served the generation's embedding, and is re-ranked with the new-user
// priors, which count only the events users made while new. 0 means
// [DefaultNewUserEvents]; a negative value turns the notion off: no user
// is new.
type NewUser int

// Is reports whether a user with n events is new.
func (u NewUser) Is(n int) bool { return !u.Off() && n <= u.events() }

// Off reports whether no user is ever new.
func (u NewUser) Off() bool { return u < 0 }

// events is the most events a new user has.
func (u NewUser) events() int {
	if u == 0 {
		return DefaultNewUserEvents
	}
	return int(u)
}

// Options shape the counters behind the re-rank (the engagement priors
// and the co-engagement) and the definition of a new user. They are fixed
// for a served generation.
//
// Every field of Options, [PriorOptions] and [CoEngageOptions] follows the
// convention of HIR's other option structs: 0 takes the default, and a
// setting that can be off is turned off by a negative value (no priors, no
// fresh floor, no limit, no co-engagement, ...), so the zero Options are
// the service's defaults. [Options.WithDefaults] fills the defaults in and
// keeps "off" negative, so applying it twice changes nothing; Validate
// rejects values out of range.
type Options struct {
	Prior    PriorOptions
	CoEngage CoEngageOptions
	// NewUser defines new users (0: DefaultNewUserEvents; negative: no
	// user is new).
	NewUser NewUser
}

// DefaultOptions returns the service's default settings, written out: the
// zero Options with its defaults filled in.
func DefaultOptions() Options { return Options{}.WithDefaults() }

// WithDefaults returns o with each zero field set to its default.
func (o Options) WithDefaults() Options {
	p, c := &o.Prior, &o.CoEngage
	orDefault(&p.HalfLife, DefaultPriorHalfLife)
	orDefault(&p.ImpressionWeight, DefaultPriorImpressions)
	orDefault(&p.FreshWindow, DefaultFreshWindow)
	orDefault(&p.FreshRank, DefaultFreshRank)
	orDefault(&p.FreshEvents, DefaultFreshEvents)
	orDefault(&p.NewUserShrink, DefaultNewUserShrink)
	orDefault(&c.WindowAds, DefaultCoEngageWindow)
	orDefault(&c.HistoryAds, DefaultCoEngageHistory)
	orDefault(&c.HalfLifeAds, DefaultCoEngageHalfLife)
	orDefault(&c.HalfLife, DefaultCoEngageAge)
	orDefault(&o.NewUser, DefaultNewUserEvents)
	return o
}

// orDefault sets *v to def when it is 0.
func orDefault[T int | float64 | time.Duration | NewUser](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Validate checks every setting's range, its defaults filled in.
func (o Options) Validate() error {
	o = o.WithDefaults()
	if err := o.Prior.validate(); err != nil {
		return err
	}
	return o.CoEngage.validate()
}
