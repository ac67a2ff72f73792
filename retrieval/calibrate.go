package retrieval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/rank"
)

// Defaults of [CalibrateOptions].
const (
	DefaultCalibrateUsers  = 500
	DefaultCalibrateK      = 20
	DefaultCalibrateMaxAds = 200_000
)

// DefaultCalibratePriorWeights are the prior weights [Calibrate] tries.
// Above 2 the MovieLens-100K validation window's next-event hit rate fell
// (replay hit@20 0.291 at 2, 0.257 at 4), which the calibration, scoring
// the horizon, does not see (docs/evaluation-log.md).
// Each call returns a new slice.
func DefaultCalibratePriorWeights() []float32 { return []float32{0, 0.125, 0.25, 0.5, 1, 1.5, 2} }

// DefaultCalibrateNewAdScales are the new-ad scales [Calibrate] tries
// (model.Model.WithNewAdScale). None is below 1: at 1 a new ad scores as
// the engaged ads of its campaign and advertiser do on average, whose
// rows' lengths also hold the engagement they had the time to earn, so
// that a smaller scale ranks an ad down for being new. Above 1 the
// launches outdraw their siblings: on the synthetic world, whose
// impressions go to live ads of a user's interests whatever their age, a
// test window of 4.8 days read best at 4; MovieLens' validation window
// at 1 (4 halved its recall; docs/evaluation-log.md).
// Each call returns a new slice.
func DefaultCalibrateNewAdScales() []float32 { return []float32{1, 2, 4} }

// DefaultCalibratePopularityWeights are the weights of the users'
// popularity coordinate [Calibrate] tries (Engine.PopularityWeight): off,
// half, as trained.
// Each call returns a new slice.
func DefaultCalibratePopularityWeights() []float32 { return []float32{0, 0.5, 1} }

// CalibrateOptions configures [Calibrate].
type CalibrateOptions struct {
	// Cut splits the store's events: those before it are the past the
	// ranking is as of, the positive engagements at or after it the ones
	// it must find (the trainer's split, model.TrainMetrics.SplitTS, so
	// that the encoder never trained on them).
	Cut int64
	// Recent ranks only the latest share (below 1) of the store's events:
	// the cut moves to the time of the first event of that share when it
	// lies after Cut (the events between the two join the past the ranking
	// is as of; the encoder did not train on them either). 0 (the
	// default) or negative: every engagement at or after Cut. A choice
	// changes only on a gain outside the bootstrap interval over the
	// users, so the calibration's power is the number of users it ranks:
	// on the synthetic world the latest 5% of the events held 7 users who
	// engaged with a new ad, too few to choose a new-ad scale, and the
	// trainer's whole held-out 10% holds 15, enough to choose 2; on
	// MovieLens-100K both keep the defaults (docs/evaluation-log.md).
	Recent float64
	// Rank shapes the counters as served (rank.DefaultOptions).
	Rank rank.Options
	// CoEngagement is the co-engagement weight the prior weight is chosen
	// with (the served one).
	CoEngagement float32
	// PriorWeights are the candidates (default
	// DefaultCalibratePriorWeights).
	PriorWeights []float32
	// NewAdScales are the candidate scales of new ads' spectral factors
	// (default DefaultCalibrateNewAdScales), each scored with the
	// counting terms off (the embeddings alone) before the prior weight is
	// chosen with the best. A model without spectral factors skips them.
	NewAdScales []float32
	// PopularityWeights are the candidate weights of the users' popularity
	// coordinate (default DefaultCalibratePopularityWeights), scored with
	// the counting terms off on the chosen scale's generation, before the
	// prior weight. A model without the coordinate skips them.
	PopularityWeights []float32
	// Users bounds the users ranked (a seeded sample; default
	// DefaultCalibrateUsers), K the metrics' cut-off (default
	// DefaultCalibrateK).
	Users, K int
	// MaxAds: a store with more ads is not calibrated (ErrNotCalibrated);
	// the calibration embeds every entity once more. Default
	// DefaultCalibrateMaxAds.
	MaxAds int
	Seed   uint64
	Logger *slog.Logger
}

func (o *CalibrateOptions) applyDefaults() {
	if o.PriorWeights == nil {
		o.PriorWeights = DefaultCalibratePriorWeights()
	}
	if o.NewAdScales == nil {
		o.NewAdScales = DefaultCalibrateNewAdScales()
	}
	if o.PopularityWeights == nil {
		o.PopularityWeights = DefaultCalibratePopularityWeights()
	}
	if o.Users <= 0 {
		o.Users = DefaultCalibrateUsers
	}
	if o.K <= 0 {
		o.K = DefaultCalibrateK
	}
	if o.MaxAds <= 0 {
		o.MaxAds = DefaultCalibrateMaxAds
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ErrNotCalibrated reports a store [Calibrate] does not calibrate on: too
// many ads, or no engagement after the cut to rank.
var ErrNotCalibrated = errors.New("not calibrated")

// Calibrate chooses the new-ad scale and the engagement prior's weight for
// model m on store, as the served path would rank with them: the graph as
// of just before the cut (o.Cut, or the start of the latest o.Recent share
// of the events when that is later; graph.Store.Until), m's spectral
// factors fitted again on it (model.Model.Refit; the ads first engaged
// after the cut are new ads there), a generation built and published on it
// with o.Rank for every candidate scale, then retrievals for up to o.Users
// users with positive engagements at or after the cut (as of the cut, seen
// ads excluded, the ads they had engaged with before not counted). Each
// candidate's criterion is the mean recall@K plus NDCG@K of those
// engagements plus the mean recall@K of the new ads among them (ads
// without engagement before the cut) over the users who engaged with one:
// each scale's with the counting terms off, then on the chosen scale's
// generation each weight of the users' popularity coordinate
// (Engine.PopularityWeight) with the counting terms off, then every prior
// weight's at the chosen one. Each choice keeps the default (scale 1,
// popularity weight 1, rank.DefaultPriorWeight) unless the best
// candidate's gain over it lies outside the 95% bootstrap interval over
// the users (choose): a weight changes only on a difference the sample of
// users does not explain. Both depend on the data: on MovieLens
// popularity predicts much of what a user watches next, in a catalogue of
// planted interests almost nothing, and there new ads draw much of the
// engagement (docs/evaluation-log.md).
func Calibrate(ctx context.Context, m *model.Model, store *graph.Store, o CalibrateOptions) (*model.Calibration, error) {
	start := time.Now()
	o.applyDefaults()
	if n := store.NumNodes(graph.NodeAd); n > o.MaxAds {
		return nil, fmt.Errorf("calibrate: %w: %d ads (at most %d)", ErrNotCalibrated, n, o.MaxAds)
	}
	if o.Recent > 0 && o.Recent < 1 {
		o.Cut = max(o.Cut, recentCut(store, o.Recent))
	}
	asOf := o.Cut - 1
	past := store.Until(asOf)
	held := heldOut(store, past, o.Cut)
	users := make([]uint32, 0, len(held))
	for u := range held {
		users = append(users, u)
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("calibrate: %w: no engagement at or after the cut", ErrNotCalibrated)
	}
	slices.Sort(users)
	rand.New(rand.NewPCG(o.Seed, 0xca1)).Shuffle(len(users), func(i, j int) { users[i], users[j] = users[j], users[i] })
	users = users[:min(len(users), o.Users)]
	refit, err := m.Refit(ctx, past, asOf)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	c := &model.Calibration{CoEngagementWeight: o.CoEngagement, Cut: o.Cut, Users: len(users), K: o.K}
	cold := newAds(past, held)
	boots := bootstrap(len(users), calibrateResamples, o.Seed)
	var eng *Engine
	defer func() {
		if eng != nil {
			eng.Close()
		}
	}()
	if refit.NewAdScale() > 0 && len(o.NewAdScales) > 0 {
		var engines []*Engine
		var scores []userScores
		for _, scale := range o.NewAdScales {
			ms, err := refit.WithNewAdScale(scale)
			if err == nil {
				var e *Engine
				if e, err = calibrationEngine(ctx, ms, past, asOf, o); err == nil {
					engines = append(engines, e)
					var us userScores
					us, err = calibrationScore(ctx, e, past, asOf, users, held, cold, rank.Weights{}, nil, o)
					scores = append(scores, us)
				}
			}
			if err != nil {
				for _, e := range engines {
					e.Close()
				}
				return nil, fmt.Errorf("calibrate: %w", err)
			}
		}
		best, points := choose(scores, slices.Index(o.NewAdScales, 1), boots)
		for i, p := range points {
			p.NewAdScale = o.NewAdScales[i]
			c.NewAdPoints = append(c.NewAdPoints, p)
		}
		c.NewAdScale, eng = o.NewAdScales[best], engines[best]
		for i, e := range engines {
			if i != best {
				e.Close()
			}
		}
	} else if eng, err = calibrationEngine(ctx, refit, past, asOf, o); err != nil {
		return nil, err
	}
	if refit.PopularityAxis() >= 0 && len(o.PopularityWeights) > 0 {
		var scores []userScores
		for _, w := range o.PopularityWeights {
			us, err := calibrationScore(ctx, eng, past, asOf, users, held, cold, rank.Weights{}, &w, o)
			if err != nil {
				return nil, err
			}
			scores = append(scores, us)
		}
		best, points := choose(scores, slices.Index(o.PopularityWeights, 1), boots)
		for i, p := range points {
			p.Popularity = &o.PopularityWeights[i]
			c.PopularityPoints = append(c.PopularityPoints, p)
		}
		c.PopularityWeight = &o.PopularityWeights[best]
	}
	var scores []userScores
	for _, pw := range o.PriorWeights {
		us, err := calibrationScore(ctx, eng, past, asOf, users, held, cold, rank.Weights{Prior: pw, CoEngagement: o.CoEngagement}, c.PopularityWeight, o)
		if err != nil {
			return nil, err
		}
		scores = append(scores, us)
	}
	best, points := choose(scores, slices.Index(o.PriorWeights, rank.DefaultPriorWeight), boots)
	for i, p := range points {
		p.PriorWeight = o.PriorWeights[i] // the popularity weight is the chosen one, Calibration.PopularityWeight
		c.Points = append(c.Points, p)
	}
	c.PriorWeight = o.PriorWeights[best]
	popularity := float32(1)
	if c.PopularityWeight != nil {
		popularity = *c.PopularityWeight
	}
	o.Logger.Info("calibrated the new-ad scale, the popularity weight and the prior weight", "new_ad_scale", c.NewAdScale,
		"popularity_weight", popularity, "prior_weight", c.PriorWeight, "users", len(users), "new_ad_points", c.NewAdPoints,
		"popularity_points", c.PopularityPoints, "points", c.Points, "elapsed", time.Since(start))
	return c, nil
}

// calibrationEngine returns an engine serving a generation of m built on
// past as of asOf.
func calibrationEngine(ctx context.Context, m *model.Model, past *graph.Store, asOf int64, o CalibrateOptions) (*Engine, error) {
	eng, err := NewEngine(past, Options{Rank: o.Rank, NoKeywords: true, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	served, err := Build(ctx, m, past, asOf, BuildOptions{Logger: o.Logger})
	if err == nil {
		err = eng.Publish(ctx, served)
	}
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	return eng, nil
}

// userScores are one candidate's scores, by user: recall@K, NDCG@K, and
// the recall@K of the user's new ads (NaN where it engaged with none).
type userScores struct {
	recall, ndcg, cold []float64
}

// calibrationScore returns the scores of eng's retrievals at weights w
// and popularity weight pop (nil: the generation's) for users, their
// held-out ads the relevant ones and those in cold the new ones.
func calibrationScore(ctx context.Context, eng *Engine, past *graph.Store, asOf int64, users []uint32,
	held map[uint32]map[uint32]bool, cold map[uint32]bool, w rank.Weights, pop *float32, o CalibrateOptions) (userScores, error) {
	s := userScores{recall: make([]float64, len(users)), ndcg: make([]float64, len(users)), cold: make([]float64, len(users))}
	for i, u := range users {
		ref := past.Ref(graph.NodeID{Type: graph.NodeUser, Idx: u})
		res, err := eng.Retrieve(ctx, Request{User: &ref, K: o.K, ExcludeSeen: true, AsOf: asOf, Popularity: pop,
			Weights: WeightOverrides{Prior: &w.Prior, CoEngagement: &w.CoEngagement, NewAdShare: &w.NewAdShare}})
		if err != nil {
			return s, fmt.Errorf("calibrate: %w", err)
		}
		s.recall[i], s.ndcg[i] = rankingScores(res.Candidates, held[u], o.K)
		s.cold[i] = math.NaN()
		newHeld := map[uint32]bool{}
		for ad := range held[u] {
			if cold[ad] {
				newHeld[ad] = true
			}
		}
		if len(newHeld) > 0 {
			s.cold[i], _ = rankingScores(res.Candidates, newHeld, o.K)
		}
	}
	return s, nil
}

// newAds returns the held-out ads without a user's engagement or
// impression in past: the new ads of the calibration window.
func newAds(past *graph.Store, held map[uint32]map[uint32]bool) map[uint32]bool {
	out := map[uint32]bool{}
	for _, ads := range held {
		for ad := range ads {
			if _, ok := out[ad]; ok {
				continue
			}
			engaged := false
			past.Neighbors(graph.NodeID{Type: graph.NodeAd, Idx: ad}, math.MaxInt64, func(e graph.Edge) bool {
				engaged = e.Nbr.Type == graph.NodeUser
				return !engaged
			})
			out[ad] = !engaged
		}
	}
	return out
}

// calibrateResamples is the number of bootstrap resamples of the users.
const calibrateResamples = 1000

// bootstrap returns resamples of n users' indices, drawn with
// replacement (seeded).
func bootstrap(n, resamples int, seed uint64) [][]int {
	rng := rand.New(rand.NewPCG(seed, 0xb007))
	out := make([][]int, resamples)
	for r := range out {
		out[r] = make([]int, n)
		for i := range out[r] {
			out[r][i] = rng.IntN(n)
		}
	}
	return out
}

// criterion returns s's criterion over the users of idx: mean recall plus
// mean NDCG plus the mean new-ad recall of those of them with new ads
// (none: 0).
func (s userScores) criterion(idx []int) float64 {
	var sum, cold float64
	var n int
	for _, i := range idx {
		sum += s.recall[i] + s.ndcg[i]
		if !math.IsNaN(s.cold[i]) {
			cold += s.cold[i]
			n++
		}
	}
	out := sum / float64(len(idx))
	if n > 0 {
		out += cold / float64(n)
	}
	return out
}

// choose returns the candidate to keep and every candidate's point: the
// best by the criterion, unless def (the default candidate; -1: none) is
// within its bootstrap interval, the 95% interval over boots of the
// difference between the two not above zero: a weight changes from its
// default only on a difference the users' sample does not explain.
func choose(scores []userScores, def int, boots [][]int) (int, []model.CalibrationPoint) {
	all := make([]int, len(scores[0].recall))
	for i := range all {
		all[i] = i
	}
	points := make([]model.CalibrationPoint, len(scores))
	crit := make([][]float64, len(scores)) // by candidate, by resample
	for c, s := range scores {
		p := &points[c]
		p.Score = s.criterion(all)
		for i := range all {
			p.Recall += s.recall[i]
			p.NDCG += s.ndcg[i]
			if !math.IsNaN(s.cold[i]) {
				p.ColdRecall += s.cold[i]
				p.ColdUsers++
			}
		}
		p.Recall /= float64(len(all))
		p.NDCG /= float64(len(all))
		if p.ColdUsers > 0 {
			p.ColdRecall /= float64(p.ColdUsers)
		}
		crit[c] = make([]float64, len(boots))
		for r, idx := range boots {
			crit[c][r] = s.criterion(idx)
		}
		p.Low, p.High = interval(slices.Clone(crit[c]))
	}
	best := 0
	for c := range points {
		if points[c].Score > points[best].Score {
			best = c
		}
	}
	if def < 0 {
		return best, points
	}
	diff := make([]float64, len(boots))
	for c := range points {
		if c == def {
			continue
		}
		for r := range boots {
			diff[r] = crit[c][r] - crit[def][r]
		}
		points[c].DiffLow, points[c].DiffHigh = interval(diff)
	}
	if points[best].DiffLow <= 0 {
		best = def
	}
	return best, points
}

// interval returns the 2.5th and 97.5th percentiles of v (sorted in
// place).
func interval(v []float64) (lo, hi float64) {
	slices.Sort(v)
	at := func(q float64) float64 { return v[min(len(v)-1, int(q*float64(len(v))))] }
	return at(0.025), at(0.975)
}

// recentCut returns the time of the first of the latest share of store's
// events.
func recentCut(store *graph.Store, share float64) int64 {
	var ts []int64
	store.ForEachEdge(store.MinTS(), math.MaxInt64, func(_ graph.NodeID, e graph.Edge) bool {
		ts = append(ts, e.TS)
		return true
	})
	if len(ts) == 0 {
		return 0
	}
	slices.Sort(ts)
	return ts[min(len(ts)-1, int(float64(len(ts))*(1-share)))]
}

// heldOut returns, by user, the ads of the users' positive engagements in
// store at or after cut that they had not interacted with in past.
func heldOut(store, past *graph.Store, cut int64) map[uint32]map[uint32]bool {
	out := map[uint32]map[uint32]bool{}
	store.ForEachEdge(cut, math.MaxInt64, func(src graph.NodeID, e graph.Edge) bool {
		if src.Type == graph.NodeUser && e.Nbr.Type == graph.NodeAd && e.Type.IsPositive() {
			if out[src.Idx] == nil {
				out[src.Idx] = map[uint32]bool{}
			}
			out[src.Idx][e.Nbr.Idx] = true
		}
		return true
	})
	for u, ads := range out {
		past.Neighbors(graph.NodeID{Type: graph.NodeUser, Idx: u}, math.MaxInt64, func(e graph.Edge) bool {
			if e.Nbr.Type == graph.NodeAd {
				delete(ads, e.Nbr.Idx) // seen before the cut: excluded from the ranking
			}
			return true
		})
		if len(ads) == 0 {
			delete(out, u)
		}
	}
	return out
}

// rankingScores returns recall@k and NDCG@k (binary relevance) of cands
// against relevant.
func rankingScores(cands []Candidate, relevant map[uint32]bool, k int) (recall, ndcg float64) {
	var hits int
	var dcg, idcg float64
	for i, c := range cands[:min(k, len(cands))] {
		if relevant[c.Ad] {
			hits++
			dcg += 1 / math.Log2(float64(i)+2)
		}
	}
	for i := range min(k, len(relevant)) {
		idcg += 1 / math.Log2(float64(i)+2)
	}
	return float64(hits) / float64(len(relevant)), dcg / idcg
}

// CalibrateVersion calibrates the model version in dir, trained on store
// with its split at split (model.TrainMetrics.SplitTS), and adds the
// calibration to the version (model.WriteCalibration), where the engines
// that serve it read it. A store Calibrate does not calibrate on
// (ErrNotCalibrated) leaves the version as it is and returns nil.
func CalibrateVersion(ctx context.Context, dir string, split int64, store *graph.Store, o CalibrateOptions) (*model.Calibration, error) {
	m, err := model.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	o.Cut = split
	c, err := Calibrate(ctx, m, store, o)
	if errors.Is(err, ErrNotCalibrated) {
		if o.Logger != nil {
			o.Logger.Info("prior weight not calibrated", "version", m.Version(), "reason", err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := model.WriteCalibration(dir, *c); err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	return c, nil
}
