package serving

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/hir-ads/hir/graph"
)

// Defaults of the co-engagement term, chosen on the validation window of
// MovieLens-100K (docs/evaluation.md).
const (
	// DefaultCoEngageWeight scales the co-engagement term in the re-rank.
	DefaultCoEngageWeight = 3
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
)

// maxBoosted caps the ads that the co-engagement term lifts in one
// retrieval (the strongest are kept); they join the token stage's
// candidates.
const maxBoosted = 1000

// CoEngageOptions shapes the co-engagement term of the re-rank: an ad
// scores more when users engaged with it close in time to the ads this user
// engaged with last (what item-to-item collaborative filtering does,
// restricted to nearby engagements, and fresh: ingested events count at
// once). Zero fields take the defaults.
type CoEngageOptions struct {
	// Window is the span, in a user's distinct engaged ads (clicks or
	// deeper, in time order), within which two ads count as co-engaged
	// (default DefaultCoEngageWindow; negative: no co-engagement term).
	Window int
	// History is the number of the user's most recent distinct engaged ads
	// a retrieval reads (default DefaultCoEngageHistory).
	History int
	// HalfLife weighs the user's recent ads: the i-th most recent (from 0)
	// weighs 2^(-i/HalfLife) (default DefaultCoEngageHalfLife).
	HalfLife float64
}

func (o *CoEngageOptions) applyDefaults() {
	if o.Window == 0 {
		o.Window = DefaultCoEngageWindow
	}
	if o.History <= 0 {
		o.History = DefaultCoEngageHistory
	}
	if o.HalfLife <= 0 {
		o.HalfLife = DefaultCoEngageHalfLife
	}
}

// coEngagement counts, for every pair of ads, the users who engaged with
// both within CoEngageOptions.Window of each other, and for every ad its
// engaging users. The similarity of two ads is their pair count over the
// geometric mean of their user counts (cosine). Safe for concurrent use.
type coEngagement struct {
	opts  CoEngageOptions
	mu    sync.RWMutex
	pairs map[uint32]map[uint32]float32 // ad -> co-engaged ad -> users
	users map[uint32]float32            // ad -> users who engaged with it
}

// newCoEngagement counts the co-engagement of every user of store with
// ts <= until; nil when opts turn the term off.
func newCoEngagement(store *graph.Store, until int64, opts CoEngageOptions) *coEngagement {
	if opts.Window < 0 {
		return nil
	}
	c := &coEngagement{opts: opts, pairs: map[uint32]map[uint32]float32{}, users: map[uint32]float32{}}
	var seq []uint32
	for i := range store.NumNodes(graph.NodeUser) {
		seq = engagedSequence(store, graph.NodeID{Type: graph.NodeUser, Idx: uint32(i)}, until, seq)
		for k, ad := range seq {
			c.addLocked(ad, seq[max(0, k-opts.Window):k])
		}
	}
	return c
}

// engagedSequence returns in dst[:0] the distinct ads user engaged with at
// or before asOf, in the order of the user's first engagement with each.
func engagedSequence(store *graph.Store, user graph.NodeID, asOf int64, dst []uint32) []uint32 {
	dst = dst[:0]
	store.Neighbors(user, asOf, func(e graph.Edge) bool {
		if engaged(e) {
			dst = append(dst, e.Nbr.Idx)
		}
		return true
	})
	slices.Reverse(dst) // oldest first
	seen := make(map[uint32]bool, len(dst))
	out := dst[:0]
	for _, ad := range dst {
		if !seen[ad] {
			seen[ad] = true
			out = append(out, ad)
		}
	}
	return out
}

// engaged reports whether e is a user's engagement with an ad, click or
// deeper.
func engaged(e graph.Edge) bool { return e.Out && e.Nbr.Type == graph.NodeAd && e.Type.IsPositive() }

// addLocked counts one user's first engagement with ad, with before the
// user's previous distinct ads inside the window.
func (c *coEngagement) addLocked(ad uint32, before []uint32) {
	c.users[ad]++
	for _, j := range before {
		c.inc(ad, j)
		c.inc(j, ad)
	}
}

func (c *coEngagement) inc(a, b uint32) {
	row := c.pairs[a]
	if row == nil {
		row = map[uint32]float32{}
		c.pairs[a] = row
	}
	row[b]++
}

// observe counts the engagement events among evs, already in store: a
// user's first engagement with an ad pairs it with the user's previous
// distinct ads inside the window, as of the event (as newCoEngagement
// counts it); a repeat engagement counts nothing.
func (c *coEngagement) observe(store *graph.Store, evs []graph.Event) {
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
		n := 0
		store.Neighbors(uid, ev.TS, func(e graph.Edge) bool {
			if engaged(e) && e.Nbr.Idx == ad.Idx {
				n++
			}
			return n < 2
		})
		if n != 1 {
			continue
		}
		seq = engagedSequence(store, uid, ev.TS, seq)
		if k := slices.Index(seq, ad.Idx); k >= 0 {
			c.addLocked(ad.Idx, seq[max(0, k-c.opts.Window):k])
		}
	}
}

// boost returns the co-engagement term of each ad for a user whose recent
// distinct engaged ads are recent (most recent first): weight times the sum
// over them of 2^(-i/HalfLife) times the ad's similarity to the i-th. At
// most maxBoosted ads, the strongest, are returned; nil when there are
// none.
func (c *coEngagement) boost(recent []uint32, weight float32) map[uint32]float32 {
	if c == nil || weight == 0 || len(recent) == 0 {
		return nil
	}
	out := map[uint32]float32{}
	c.mu.RLock()
	for i, j := range recent[:min(len(recent), c.opts.History)] {
		nj := c.users[j]
		if nj == 0 {
			continue
		}
		w := weight * float32(math.Exp2(-float64(i)/c.opts.HalfLife))
		for a, n := range c.pairs[j] {
			out[a] += w * n / float32(math.Sqrt(float64(nj*c.users[a])))
		}
	}
	c.mu.RUnlock()
	if len(out) <= maxBoosted {
		return out
	}
	type kv struct {
		ad uint32
		v  float32
	}
	all := make([]kv, 0, len(out))
	for a, v := range out {
		all = append(all, kv{a, v})
	}
	slices.SortFunc(all, func(x, y kv) int { return cmp.Or(cmp.Compare(y.v, x.v), cmp.Compare(x.ad, y.ad)) })
	clear(out)
	for _, e := range all[:maxBoosted] {
		out[e.ad] = e.v
	}
	return out
}

// recentAds returns the distinct ads (graph node indices) that user engaged
// with (click or deeper) at or before asOf, most recent first, at most n.
func recentAds(store *graph.Store, user graph.NodeID, asOf int64, n int) []uint32 {
	var out []uint32
	seen := map[uint32]bool{}
	store.Neighbors(user, asOf, func(e graph.Edge) bool {
		if engaged(e) && !seen[e.Nbr.Idx] {
			seen[e.Nbr.Idx] = true
			out = append(out, e.Nbr.Idx)
		}
		return len(out) < n
	})
	return out
}
