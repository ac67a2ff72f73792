// Package rank holds what HIR's exact re-rank adds to the dot product of a
// user's and an ad's embeddings, and the settings that shape it: the ads'
// engagement priors ([Priors]: recency-weighted counts with a floor for
// freshly launched ads and a separate channel for new users) and the
// co-engagement term ([CoEngagement]: ads engaged close in time to the
// user's recent ads).
//
// # Example
//
//	var opts rank.Options // the zero Options: the service's defaults
//	priors := rank.NewPriors(store, asOf, asOf, opts)
//	co := rank.NewCoEngagement(store, asOf, opts)
//	boost := co.Boost(recentAds, asOf, rank.DefaultWeights().CoEngagement)
//
// # Sections
//
// Settings: [Options] (with [PriorOptions] and [CoEngageOptions]) shape
// the counters and are fixed for a served generation; [Weights] scale the
// terms and may change per request. The settings follow HIR's one options
// convention: a zero field takes its default, a negative one turns its
// setting off, and Validate rejects values out of range. Weights are
// values, not settings: each is used as it is, so 0 is a term weighed 0,
// as a request's prior_weight: 0 is; [DefaultWeights] gives the service's.
// [NewUser] is the one definition of a new user.
//
// Counters: both are counted from a graph.Store as of a time, then follow
// the ingested events through their Observe methods. Both are safe for
// concurrent use; their owner (package retrieval's Engine) serialises the
// writes with the store's.
package rank
