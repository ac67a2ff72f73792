package rank

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
)

// Defaults of the engagement priors, chosen on the validation windows of
// MovieLens-100K and of a synthetic ads world (docs/evaluation-log.md).
const (
	// DefaultPriorHalfLife is the half-life of an engagement's weight in an
	// ad's count.
	DefaultPriorHalfLife = 14 * 24 * time.Hour
	// DefaultPriorImpressions is the weight of an impression in an ad's
	// count, relative to a click or deeper.
	DefaultPriorImpressions = 1
	// DefaultFreshWindow is how long after its launch an ad gets the fresh
	// floor.
	DefaultFreshWindow = 90 * 24 * time.Hour
	// DefaultFreshRank places a fresh ad's floor at the count of the ad
	// ranked this high.
	DefaultFreshRank = 20
	// DefaultFreshEvents is the exploration budget of a fresh ad: it keeps
	// the floor until it has this many engagement events.
	DefaultFreshEvents = 3
	// DefaultNewUserShrink is the share of everyone's count added to an
	// ad's new-user count.
	DefaultNewUserShrink = 0.3
)

// Launch attributes: an ad's launch time is read from the first of these
// attributes it has (RFC 3339, YYYY-MM-DD, DD-Mon-YYYY or unix
// milliseconds).
var launchAttrs = []string{"start_time", "release_date"}

// PriorOptions shapes the ads' engagement priors (the "prior" term of the
// re-rank). A zero field takes its default and a negative one turns its
// setting off (see [Options]).
type PriorOptions struct {
	// HalfLife is the half-life of an engagement's weight (default
	// DefaultPriorHalfLife); negative: no priors, every ad's is 0.
	HalfLife time.Duration
	// ImpressionWeight weighs an impression relative to a click or deeper
	// (default DefaultPriorImpressions); negative: impressions do not
	// count. not_interested never counts.
	ImpressionWeight float64
	// FreshWindow: an ad launched (attribute start_time or release_date) at
	// most this long ago gets at least the prior of the FreshRank-th most
	// engaged ad, so that a new ad is tried before it has engagement of its
	// own (default DefaultFreshWindow); negative: no fresh floor. An ad
	// launching later is not fresh until its launch.
	FreshWindow time.Duration
	// FreshRank is the rank whose prior is the fresh floor (default
	// DefaultFreshRank; it cannot be off: FreshWindow turns the floor off).
	FreshRank int
	// FreshEvents ends the floor early: a fresh ad keeps it only until it
	// has this many engagement events of any type, impressions and
	// not_interested included, so its own record is then enough to judge
	// it (default DefaultFreshEvents); negative: no limit.
	FreshEvents int
	// NewUserShrink shrinks the new-user counts toward everyone's: an ad's
	// new-user count adds this share of its count over all users, so that
	// an ad new users have not met yet does not fall to 0 (default
	// DefaultNewUserShrink); negative: none.
	NewUserShrink float64
}

// validate checks the ranges of o, its defaults filled in.
func (o PriorOptions) validate() error {
	switch {
	case math.IsNaN(o.ImpressionWeight) || math.IsInf(o.ImpressionWeight, 0):
		return fmt.Errorf("%w: impression weight %v is not a number", ErrBadOptions, o.ImpressionWeight)
	case o.FreshRank < 1:
		return fmt.Errorf("%w: fresh rank %d < 1", ErrBadOptions, o.FreshRank)
	case math.IsNaN(o.NewUserShrink) || math.IsInf(o.NewUserShrink, 0):
		return fmt.Errorf("%w: new-user shrink %v is not a number", ErrBadOptions, o.NewUserShrink)
	}
	return nil
}

// eventWeight is the weight of an engagement of type t in the counts.
func (o *PriorOptions) eventWeight(t graph.EdgeType) float64 {
	switch {
	case t.IsPositive():
		return 1
	case t == graph.EdgeImpression:
		return o.ImpressionWeight
	}
	return 0
}

// launchTime returns the launch time (unix ms) that attrs name.
func launchTime(attrs map[string]string) (int64, bool) {
	for _, k := range launchAttrs {
		v, ok := attrs[k]
		if !ok {
			continue
		}
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			return ms, true
		}
		for _, layout := range []string{time.RFC3339, time.DateOnly, "02-Jan-2006"} {
			if t, err := time.Parse(layout, v); err == nil {
				return t.UnixMilli(), true
			}
		}
	}
	return 0, false
}

// floorRefresh is how far the priors' time moves before the fresh floor is
// recomputed from every ad's count.
const floorRefresh = time.Hour

// clockSkew is how far ahead of the wall clock (or of the data the priors
// were counted on, when that lies ahead) an observed event may be; a later
// timestamp counts as that bound, so that one event from the far future
// can neither overflow a count nor age every fresh ad out.
const clockSkew = time.Hour

// Priors is every ad's recency-weighted engagement count: an event at ts
// weighs its type's weight times 2^((ts-ref)/halfLife), so that the counts
// of all ads, taken at any later time, keep their order while old events
// fade. An ad's prior is ln(1+count): the log-popularity term that in-batch
// contrastive training removes from the embeddings' dot products (their
// logits estimate a user-ad affinity relative to the ad's base rate). A
// fresh ad counts at least the floor. The priors' time is the latest event
// it has seen (at least the time it was counted at). Safe for concurrent
// use.
type Priors struct {
	opts       PriorOptions
	newUser    NewUser
	halfLifeMS float64
	ref        int64 // unix ms at which an event weighs 1

	counted int64 // the time the priors were counted at

	mu      sync.Mutex
	raw     [numChannels]map[uint32]float64 // by channel, by ad node index
	events  map[uint32]int                  // engagement events of any type, by ad node index
	proven  *roaring.Bitmap                 // ads with at least budget() events
	aged    *roaring.Bitmap                 // ads launched a whole fresh window or more before now: never new
	changes atomic.Uint64                   // changes to proven or aged (Changes)
	now     int64
	launch  map[uint32]int64     // ads launching after now-FreshWindow: fresh or not yet launched
	floor   [numChannels]float64 // by channel: count of the FreshRank-th ad
	floorAt int64                // now when floor was computed
}

// Channels of the Priors: the engagement of all users, and that of users
// while they were new (index.Doc.Prior and index.Doc.NewUserPrior). Without
// new-user priors the new-user channel is not counted and reads the other.
const (
	allUsers = iota
	newUsers
	numChannels
)

// channels returns the number of channels an engagement counts in, the
// first ones in channel order: both when src, the user (or other source)
// that made it at ts, was new ([NewUser] as of just before ts),
// else everyone's.
func (t *Priors) channels(store *graph.Store, src graph.NodeID, ts int64) int {
	if src.Type == graph.NodeUser && t.newUser.Is(store.Degree(src, ts-1)) {
		return newUsers + 1
	}
	return allUsers + 1
}

// NewPriors counts the engagement of every ad of store with ts <= until,
// weighted relative to ref, and notes the ads that are fresh at until or
// launch later. It returns nil when opts.Prior turns the priors off; the
// methods of a nil *Priors give every ad 0.
func NewPriors(store *graph.Store, ref, until int64, opts Options) *Priors {
	opts = opts.WithDefaults()
	if opts.Prior.HalfLife < 0 {
		return nil
	}
	t := &Priors{opts: opts.Prior, newUser: opts.NewUser, halfLifeMS: float64(opts.Prior.HalfLife.Milliseconds()), ref: ref,
		counted: until, events: map[uint32]int{}, proven: roaring.New(), aged: roaring.New(), now: until, launch: map[uint32]int64{}}
	for c := range t.raw {
		t.raw[c] = map[uint32]float64{}
	}
	for i := range store.NumNodes(graph.NodeAd) {
		id := graph.NodeID{Type: graph.NodeAd, Idx: uint32(i)}
		var sum [numChannels]float64
		var n int
		store.Neighbors(id, until, func(e graph.Edge) bool {
			if !e.Out && !e.Type.IsStructure() {
				if w := t.opts.eventWeight(e.Type); w > 0 {
					for c := range t.channels(store, e.Nbr, e.TS) {
						sum[c] += w * t.weight(e.TS)
					}
				}
				n++
			}
			return true
		})
		for c, s := range sum {
			if s > 0 {
				t.raw[c][uint32(i)] = s
			}
		}
		if n > 0 {
			t.events[uint32(i)] = n
		}
		if n >= t.budget() {
			t.proven.Add(uint32(i))
		}
		t.noteLocked(uint32(i), store.Entity(id))
	}
	t.refloorLocked()
	return t
}

func (t *Priors) weight(ts int64) float64 { return math.Exp2(float64(ts-t.ref) / t.halfLifeMS) }

// bound caps an observed event's timestamp at clockSkew past the wall
// clock or the time the Priors was counted at, whichever is later.
func (t *Priors) bound(ts int64) int64 {
	return min(ts, max(time.Now().UnixMilli(), t.counted)+clockSkew.Milliseconds())
}

// noteLocked records ad's launch time when e names one that is fresh now or
// later, and notes the ad as aged when it names one a whole fresh window
// or more before now.
func (t *Priors) noteLocked(ad uint32, e *graph.Entity) {
	if t.opts.FreshWindow <= 0 || e == nil {
		return
	}
	at, ok := launchTime(e.Attrs)
	switch {
	case ok && t.now-at < t.opts.FreshWindow.Milliseconds():
		t.launch[ad] = at
		t.setAgedLocked(ad, false)
	case ok:
		delete(t.launch, ad)
		t.setAgedLocked(ad, true)
	default:
		delete(t.launch, ad)
		t.setAgedLocked(ad, false)
	}
}

// setAgedLocked notes whether ad is aged, counting a change.
func (t *Priors) setAgedLocked(ad uint32, aged bool) {
	changed := false
	if aged {
		changed = t.aged.CheckedAdd(ad)
	} else {
		changed = t.aged.CheckedRemove(ad)
	}
	if changed {
		t.changes.Add(1)
	}
}

// freshLocked reports whether ad is launched, inside its fresh window now
// and within its exploration budget.
func (t *Priors) freshLocked(ad uint32) bool {
	at, ok := t.launch[ad]
	return ok && at <= t.now && t.now-at < t.opts.FreshWindow.Milliseconds() &&
		(t.opts.FreshEvents < 0 || t.events[ad] < t.opts.FreshEvents)
}

// refloorLocked recomputes the fresh floor of each channel: the
// FreshRank-th largest count (the smallest when fewer ads have engagement).
// Every ad with a new-user count has a count over all users, so the ads of
// the latter are those of both channels.
func (t *Priors) refloorLocked() {
	t.floorAt = t.now
	for c := range t.floor {
		t.floor[c] = 0
		if t.opts.FreshWindow <= 0 || len(t.raw[allUsers]) == 0 {
			continue
		}
		counts := make([]float64, 0, len(t.raw[allUsers]))
		for ad := range t.raw[allUsers] {
			counts = append(counts, t.countLocked(ad, c))
		}
		slices.Sort(counts)
		t.floor[c] = counts[max(0, len(counts)-t.opts.FreshRank)]
	}
}

// countLocked returns ad's count in channel c: the new-user count plus
// NewUserShrink times everyone's; t.mu must be held.
func (t *Priors) countLocked(ad uint32, c int) float64 {
	n := t.raw[c][ad]
	if c == newUsers && t.opts.NewUserShrink > 0 {
		n += t.opts.NewUserShrink * t.raw[allUsers][ad]
	}
	return n
}

// Doc notes ad's launch time from its entity e and returns its priors
// (everyone's, new users') and whether it is fresh (index.Doc.Fresh): for
// the doc of an ad being indexed. 0 and false for a nil t.
func (t *Priors) Doc(ad uint32, e *graph.Entity) (all, newUser float32, fresh bool) {
	if t == nil {
		return 0, 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noteLocked(ad, e)
	return t.priorLocked(ad, allUsers), t.priorLocked(ad, newUsers), t.freshLocked(ad)
}

// priorLocked returns ad's prior in channel c, ln(1+count), the count raised
// to the channel's floor while the ad is fresh; t.mu must be held. Without
// new-user priors the new-user channel reads everyone's.
func (t *Priors) priorLocked(ad uint32, c int) float32 {
	if c == newUsers && t.newUser.Off() {
		c = allUsers
	}
	n := t.countLocked(ad, c)
	if t.freshLocked(ad) {
		n = max(n, t.floor[c])
	}
	return float32(math.Log1p(n))
}

// setPriorsLocked writes the priors of ads (both channels) and their
// freshness into the live index; t.mu must be held.
func (t *Priors) setPriorsLocked(ctx context.Context, ix *index.Index, ads []uint32) error {
	all := make([]float32, len(ads))
	newUser := make([]float32, len(ads))
	fresh := make([]bool, len(ads))
	for i, ad := range ads {
		all[i], newUser[i], fresh[i] = t.priorLocked(ad, allUsers), t.priorLocked(ad, newUsers), t.freshLocked(ad)
	}
	return ix.SetPriors(ctx, ads, all, newUser, fresh)
}

// advanceLocked moves the priors' time to now (never back) and returns the
// ads whose prior may have changed for it: ads that launched or left their
// fresh window, and every fresh ad when the floor was recomputed.
func (t *Priors) advanceLocked(now int64) []uint32 {
	if now <= t.now {
		return nil
	}
	var changed []uint32
	was := make(map[uint32]bool, len(t.launch))
	for ad := range t.launch {
		was[ad] = t.freshLocked(ad)
	}
	t.now = now
	refloor := time.Duration(now-t.floorAt)*time.Millisecond >= floorRefresh
	if refloor {
		t.refloorLocked()
	}
	window := t.opts.FreshWindow.Milliseconds()
	for ad, at := range t.launch {
		if is := t.freshLocked(ad); is != was[ad] || (is && refloor) {
			changed = append(changed, ad)
		}
		if now-at >= window {
			delete(t.launch, ad)
			t.setAgedLocked(ad, true)
		}
	}
	return changed
}

// budget is the number of engagement events after which an ad is no longer
// new (NewAds): the exploration budget (PriorOptions.FreshEvents), 1 without
// one.
func (t *Priors) budget() int { return max(1, t.opts.FreshEvents) }

// NewAds returns the ads of live that are still new: they have had fewer
// engagement events of any type than the exploration budget
// (PriorOptions.FreshEvents), and they name no launch time (attribute
// start_time or release_date) a whole fresh window or more before the
// priors' time: an ad launched long ago that few engaged with is not new,
// it is unwanted. They are the ads a request's new-ad share
// (retrieval.Request.NewAdShare) may place. A nil t gives nil: without
// priors no ad's record is counted.
func (t *Priors) NewAds(live *roaring.Bitmap) *roaring.Bitmap {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := roaring.AndNot(live, t.proven)
	out.AndNot(t.aged)
	return out
}

// Changes counts the changes to which ads are new: NewAds of the same live
// set answers the same while Changes does not grow, so a caller may keep
// its answer until then. 0 for a nil t.
func (t *Priors) Changes() uint64 {
	if t == nil {
		return 0
	}
	return t.changes.Load()
}

// Sync sets the prior of every live ad of ix from t (0 for all when t is
// nil), in one index snapshot: for an index read from a file, or built
// before t was counted.
func (t *Priors) Sync(ctx context.Context, ix *index.Index) error {
	idx := ix.Snapshot()
	ids := make([]uint32, 0, idx.Len())
	it := idx.Live().Iterator()
	for it.HasNext() {
		ids = append(ids, it.Next())
	}
	var err error
	if t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		err = t.setPriorsLocked(ctx, ix, ids)
	} else {
		zero := make([]float32, len(ids))
		err = ix.SetPriors(ctx, ids, zero, zero, nil)
	}
	if err != nil {
		return fmt.Errorf("set ad priors: %w", err)
	}
	return nil
}

// Observe adds the engagement events among evs (stored in store already)
// to the ads' counts, moves the priors' time to their latest, and updates
// the priors that changed in ix, so that retrieval follows what is
// engaging now, and which ads are fresh, without waiting for the next
// generation. A nil t does nothing.
func (t *Priors) Observe(ctx context.Context, store *graph.Store, evs []graph.Event, ix *index.Index) error {
	if t == nil || ix == nil {
		return nil
	}
	// The lock is held until the index has the new priors, so that
	// concurrent observers publish them in the order they counted.
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := t.observeLocked(store, evs)
	if len(ids) == 0 {
		return nil
	}
	if err := t.setPriorsLocked(ctx, ix, ids); err != nil {
		return fmt.Errorf("update ad priors: %w", err)
	}
	return nil
}

// observeLocked counts the engagement events among evs, moves the priors'
// time to their latest and returns the ads whose prior may have changed,
// sorted.
func (t *Priors) observeLocked(store *graph.Store, evs []graph.Event) []uint32 {
	var latest int64
	var ids []uint32
	for i := range evs {
		ev := &evs[i]
		ts := t.bound(ev.TS)
		latest = max(latest, ts)
		if ev.Dst.Type != graph.NodeAd || ev.Type.IsStructure() {
			continue
		}
		id, ok := store.Lookup(ev.Dst)
		if !ok {
			continue
		}
		t.events[id.Idx]++
		if t.events[id.Idx] == t.budget() && t.proven.CheckedAdd(id.Idx) {
			t.changes.Add(1)
		}
		if w := t.opts.eventWeight(ev.Type); w > 0 {
			src, _ := store.Lookup(ev.Src)
			for c := range t.channels(store, src, ev.TS) {
				t.raw[c][id.Idx] += w * t.weight(ts)
			}
		}
		ids = append(ids, id.Idx)
	}
	ids = append(ids, t.advanceLocked(latest)...)
	slices.Sort(ids)
	return slices.Compact(ids)
}
