package rank

import (
	"errors"
	"fmt"
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
// dot + Prior*prior(ad) + CoEngagement*coengagement(user, ad). A weight of 0
// turns its term off. A request may override the service's weights.
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
// priors, which count only the events users made while new. 0 turns the
// notion off: no user is new.
type NewUser int

// Is reports whether a user with n events is new.
func (u NewUser) Is(n int) bool { return u > 0 && n <= int(u) }

// Off reports whether no user is ever new.
func (u NewUser) Off() bool { return u <= 0 }

// Options shape the counters behind the re-rank (the engagement priors
// and the co-engagement) and the definition of a new user. They are fixed
// for a served generation.
//
// One convention holds for every field of Options, [PriorOptions],
// [CoEngageOptions] and [Weights]: a field holds its value as is, and 0
// turns its setting off (no priors, no fresh floor, no limit, no
// co-engagement, ...). There are no hidden defaults: start from
// [DefaultOptions] and [DefaultWeights] and change what you need; Validate
// rejects values out of range.
type Options struct {
	Prior    PriorOptions
	CoEngage CoEngageOptions
	// NewUser defines new users (default DefaultNewUserEvents).
	NewUser NewUser
}

// DefaultOptions returns the service's default settings.
func DefaultOptions() Options {
	return Options{
		Prior: PriorOptions{HalfLife: DefaultPriorHalfLife, ImpressionWeight: DefaultPriorImpressions,
			FreshWindow: DefaultFreshWindow, FreshRank: DefaultFreshRank, FreshEvents: DefaultFreshEvents,
			NewUserShrink: DefaultNewUserShrink},
		CoEngage: CoEngageOptions{WindowAds: DefaultCoEngageWindow, HistoryAds: DefaultCoEngageHistory,
			HalfLifeAds: DefaultCoEngageHalfLife, HalfLife: DefaultCoEngageAge},
		NewUser: DefaultNewUserEvents,
	}
}

// Validate checks every setting's range.
func (o Options) Validate() error {
	if err := o.Prior.validate(); err != nil {
		return err
	}
	if err := o.CoEngage.validate(); err != nil {
		return err
	}
	if o.NewUser < 0 {
		return fmt.Errorf("%w: new-user events %d < 0", ErrBadOptions, o.NewUser)
	}
	return nil
}
