package rank

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hir-ads/hir/graph"
)

// Defaults of the co-engagement term, chosen on the validation window of
// MovieLens-100K (docs/evaluation-log.md).
const (
	// DefaultCoEngageWindow: two ads are co-engaged when a user engaged
	// with both (click or deeper) with fewer than this many of the user's
	// other ads in between.
	DefaultCoEngageWindow = 20
	// DefaultCoEngageHistory is how many of a user's most recent ads a
	// retrieval reads.
	DefaultCoEngageHistory = 50
	// DefaultCoEngageHalfLife: the ad a user engaged with this many ads ago
	// weighs half as much as the latest one.
	DefaultCoEngageHalfLife = 5
	// DefaultCoEngageAge: the ad a user last engaged with this long before
	// the retrieval weighs half as much as one engaged with at it.
	DefaultCoEngageAge = 72 * time.Hour
)

// maxBoosted caps the ads that the co-engagement term lifts in one
// retrieval (the strongest are kept); they join the token stage's
// candidates.
const maxBoosted = 1000

// CoEngageOptions shapes the co-engagement term of the re-rank: an ad
// scores more when users engaged with it close in time to the ads this user
// engaged with last (what item-to-item collaborative filtering does,
// restricted to nearby engagements, and fresh: ingested events count at
// once). A zero field takes its default and a negative one turns its
// setting off (see [Options]).
type CoEngageOptions struct {
	// WindowAds is the span, in a user's distinct engaged ads (clicks or
	// deeper, in time order), within which two ads count as co-engaged
	// (default DefaultCoEngageWindow); negative: no co-engagement term.
	WindowAds int
	// HistoryAds is the number of the user's most recent distinct engaged
	// ads a retrieval reads (default DefaultCoEngageHistory; at least 1).
	HistoryAds int
	// HalfLifeAds weighs the user's recent ads: the i-th most recent (from
	// 0) weighs 2^(-i/HalfLifeAds) (default DefaultCoEngageHalfLife; > 0).
	HalfLifeAds float64
	// HalfLife also weighs them by time: an ad the user last engaged with
	// age before the retrieval weighs 2^(-age/HalfLife) besides, so that
	// the term speaks for the user's current session and fades once that
	// is over (default DefaultCoEngageAge); negative: no time decay.
	HalfLife time.Duration
}

// RecentAd is one of a user's recent distinct engaged ads and the time of
// the user's latest engagement with it (unix ms).
type RecentAd struct {
	Ad uint32
	TS int64
}

// validate checks the ranges of o, its defaults filled in.
func (o CoEngageOptions) validate() error {
	switch {
	case o.HistoryAds < 1:
		return fmt.Errorf("%w: co-engagement history %d < 1", ErrBadOptions, o.HistoryAds)
	case !(o.HalfLifeAds > 0) || math.IsInf(o.HalfLifeAds, 1):
		return fmt.Errorf("%w: co-engagement half-life %v is not > 0", ErrBadOptions, o.HalfLifeAds)
	}
	return nil
}

// CoEngagement counts, for every pair of ads, the users who engaged with
// both within CoEngageOptions.WindowAds of each other, and for every ad its
// engaging users. The similarity of two ads is their pair count over the
// geometric mean of their user counts (cosine). Safe for concurrent use.
type CoEngagement struct {
	opts  CoEngageOptions
	mu    sync.RWMutex
	rows  []coRow   // by ad: its co-engaged ads
	users []float32 // by ad: users who engaged with it
	inv   []float32 // by ad: 1/sqrt(users), 0 for none
	// scratch holds the dense accumulators of boost (*coScratch).
	scratch sync.Pool
}

// coRow is one ad's co-engaged ads, sorted, with their pair counts.
type coRow struct {
	ads []uint32
	n   []float32
}

func (r *coRow) inc(ad uint32) {
	i, ok := slices.BinarySearch(r.ads, ad)
	if ok {
		r.n[i]++
		return
	}
	r.ads = slices.Insert(r.ads, i, ad)
	r.n = slices.Insert(r.n, i, 1)
}

// coScratch is boost's accumulator by ad, and the ads it touched.
type coScratch struct {
	sum     []float32
	touched []uint32
}

// NewCoEngagement counts the co-engagement of every user of store with
// ts <= until; nil when opts turn the term off.
func NewCoEngagement(store *graph.Store, until int64, opts Options) *CoEngagement {
	opts = opts.WithDefaults()
	if opts.CoEngage.WindowAds < 0 {
		return nil
	}
	nAds := store.NumNodes(graph.NodeAd)
	c := &CoEngagement{opts: opts.CoEngage, rows: make([]coRow, nAds), users: make([]float32, nAds), inv: make([]float32, nAds)}
	// Every user's sequence, and where each ad occurs in them.
	type occurrence struct{ user, pos int32 }
	seqs := make([][]uint32, store.NumNodes(graph.NodeUser))
	byAd := make([][]occurrence, nAds)
	for u := range seqs {
		seqs[u] = slices.Clip(engagedSequence(store, graph.NodeID{Type: graph.NodeUser, Idx: uint32(u)}, until, nil))
		for k, ad := range seqs[u] {
			byAd[ad] = append(byAd[ad], occurrence{int32(u), int32(k)})
		}
	}
	// Each ad's row: the ads within the window on either side of it, summed
	// over its occurrences in a dense accumulator.
	sum := make([]float32, nAds)
	var touched []uint32
	for a, occs := range byAd {
		if len(occs) == 0 {
			continue
		}
		c.users[a] = float32(len(occs))
		c.inv[a] = float32(1 / math.Sqrt(float64(len(occs))))
		for _, o := range occs {
			seq, k := seqs[o.user], int(o.pos)
			for _, b := range seq[max(0, k-opts.CoEngage.WindowAds):min(len(seq), k+opts.CoEngage.WindowAds+1)] {
				if b == uint32(a) {
					continue
				}
				if sum[b] == 0 {
					touched = append(touched, b)
				}
				sum[b]++
			}
		}
		slices.Sort(touched)
		row := coRow{ads: slices.Clone(touched), n: make([]float32, len(touched))}
		for i, b := range touched {
			row.n[i], sum[b] = sum[b], 0
		}
		c.rows[a], touched = row, touched[:0]
	}
	return c
}

// engagedSequence returns in dst[:0] the distinct ads user engaged with at
// or before asOf, in the order of the user's first engagement with each.
func engagedSequence(store *graph.Store, user graph.NodeID, asOf int64, dst []uint32) []uint32 {
	return firstEngagements(engagedAds(store, user, asOf, dst))
}

// engagedAds returns in dst[:0] the ads of user's engagements (click or
// deeper) at or before asOf, oldest first, repeats included.
func engagedAds(store *graph.Store, user graph.NodeID, asOf int64, dst []uint32) []uint32 {
	dst = dst[:0]
	store.Neighbors(user, asOf, func(e graph.Edge) bool {
		if Engaged(e) {
			dst = append(dst, e.Nbr.Idx)
		}
		return true
	})
	slices.Reverse(dst) // oldest first
	return dst
}

// firstEngagements keeps, in place, the first occurrence of each ad.
func firstEngagements(ads []uint32) []uint32 {
	seen := make(map[uint32]bool, len(ads))
	out := ads[:0]
	for _, ad := range ads {
		if !seen[ad] {
			seen[ad] = true
			out = append(out, ad)
		}
	}
	return out
}

// Engaged reports whether e, an edge of a user, is an engagement with an
// ad, click or deeper: what the co-engagement term counts.
func Engaged(e graph.Edge) bool { return e.Out && e.Nbr.Type == graph.NodeAd && e.Type.IsPositive() }

// addLocked counts one user's first engagement with ad, with before the
// user's previous distinct ads inside the window.
func (c *CoEngagement) addLocked(ad uint32, before []uint32) {
	if int(ad) >= len(c.users) {
		grow := int(ad) + 1 - len(c.users)
		c.users = append(c.users, make([]float32, grow)...)
		c.inv = append(c.inv, make([]float32, grow)...)
		c.rows = append(c.rows, make([]coRow, grow)...)
	}
	c.users[ad]++
	c.inv[ad] = float32(1 / math.Sqrt(float64(c.users[ad])))
	for _, j := range before {
		c.rows[ad].inc(j)
		c.rows[j].inc(ad)
	}
}

// Observe counts the engagement events among evs, already in store: a
// user's first engagement with an ad pairs it with the user's previous
// distinct ads inside the window, as of the event (as NewCoEngagement
// counts it); a repeat engagement counts nothing.
func (c *CoEngagement) Observe(store *graph.Store, evs []graph.Event) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var seq []uint32
	for i := range evs {
		ev := &evs[i]
		if ev.Src.Type != graph.NodeUser || ev.Dst.Type != graph.NodeAd || !ev.Type.IsPositive() {
			continue
		}
		uid, ok1 := store.Lookup(ev.Src)
		ad, ok2 := store.Lookup(ev.Dst)
		if !ok1 || !ok2 {
			continue
		}
		seq = engagedAds(store, uid, ev.TS, seq)
		n := 0
		for _, a := range seq {
			if a == ad.Idx {
				n++
			}
		}
		if n != 1 {
			continue
		}
		seq = firstEngagements(seq)
		if k := slices.Index(seq, ad.Idx); k >= 0 {
			c.addLocked(ad.Idx, seq[max(0, k-c.opts.WindowAds):k])
		}
	}
}

// Boost returns the co-engagement term of each ad for a user whose recent
// distinct engaged ads are recent (most recent first), retrieved at asOf
// (unix ms): weight times the sum over them of 2^(-i/HalfLifeAds) times,
// with a HalfLife, 2^(-age/HalfLife) (age: asOf minus the ad's TS, at
// least 0) times the ad's similarity to the i-th. At most maxBoosted ads,
// the strongest, are returned; nil when the weight is 0 or there are no
// recent ads, empty when they have no co-engagement.
func (c *CoEngagement) Boost(recent []RecentAd, asOf int64, weight float32) map[uint32]float32 {
	if c == nil || weight == 0 || len(recent) == 0 {
		return nil
	}
	sc, _ := c.scratch.Get().(*coScratch)
	if sc == nil {
		sc = &coScratch{}
	}
	c.mu.RLock()
	if len(sc.sum) < len(c.users) {
		sc.sum = make([]float32, len(c.users))
	}
	halfMS := float64(c.opts.HalfLife.Milliseconds())
	for i, r := range recent[:min(len(recent), c.opts.HistoryAds)] {
		j := r.Ad
		if int(j) >= len(c.rows) {
			continue
		}
		row := &c.rows[j]
		decay := -float64(i) / c.opts.HalfLifeAds
		if halfMS > 0 {
			decay -= float64(max(asOf-r.TS, 0)) / halfMS
		}
		w := weight * float32(math.Exp2(decay)) * c.inv[j]
		sum, inv := sc.sum, c.inv
		for k, a := range row.ads {
			if sum[a] == 0 {
				sc.touched = append(sc.touched, a)
			}
			sum[a] += w * row.n[k] * inv[a]
		}
	}
	c.mu.RUnlock()
	defer func() {
		for _, a := range sc.touched {
			sc.sum[a] = 0
		}
		sc.touched = sc.touched[:0]
		c.scratch.Put(sc)
	}()
	if len(sc.touched) == 0 {
		return map[uint32]float32{}
	}
	top := sc.touched
	if len(top) > maxBoosted {
		top = slices.Clone(top)
		slices.SortFunc(top, func(x, y uint32) int { return cmp.Or(cmp.Compare(sc.sum[y], sc.sum[x]), cmp.Compare(x, y)) })
		top = top[:maxBoosted]
	}
	out := make(map[uint32]float32, len(top))
	for _, a := range top {
		out[a] = sc.sum[a]
	}
	return out
}

// HistoryAds returns how many of a user's most recent distinct engaged ads
// Boost reads; 0 for a nil c (the term is off).
func (c *CoEngagement) HistoryAds() int {
	if c == nil {
		return 0
	}
	return c.opts.HistoryAds
}
