package rank

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/hir-ads/hir/graph"
)

func TestLaunchTime(t *testing.T) {
	day := time.Date(2024, 3, 5, 0, 0, 0, 0, time.UTC).UnixMilli()
	tests := []struct {
		attrs map[string]string
		want  int64
		ok    bool
	}{
		{map[string]string{"start_time": "2024-03-05T00:00:00Z"}, day, true},
		{map[string]string{"start_time": "2024-03-05"}, day, true},
		{map[string]string{"release_date": "05-Mar-2024"}, day, true},
		{map[string]string{"start_time": strconv.FormatInt(day, 10)}, day, true},
		{map[string]string{"start_time": "2024-03-05", "release_date": "01-Jan-1990"}, day, true}, // start_time first
		{map[string]string{"start_time": "soon", "release_date": "05-Mar-2024"}, day, true},       // unreadable: next one
		{map[string]string{"start_time": "soon"}, 0, false},
		{map[string]string{"launch": "2024-03-05"}, 0, false},
		{nil, 0, false},
	}
	for _, tc := range tests {
		got, ok := launchTime(tc.attrs)
		if got != tc.want || ok != tc.ok {
			t.Errorf("launchTime(%v) = %d, %v; want %d, %v", tc.attrs, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzLaunchTime(f *testing.F) {
	for _, s := range []string{"2024-03-05", "2024-03-05T10:00:00+02:00", "05-Mar-2024", "1700000000000", "", "-1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, ok := launchTime(map[string]string{"start_time": s})
		if !ok && ms != 0 {
			t.Errorf("launchTime(%q) = %d without ok", s, ms)
		}
	})
}

// TestTrend checks the engagement counts behind the priors: type weights,
// recency, the fresh floor and how it follows the trend's time.
func TestTrend(t *testing.T) {
	const day = int64(24 * time.Hour / time.Millisecond)
	t0 := worldT0
	store := graph.NewStore(graph.Options{})
	ad := func(name string, attrs map[string]string) uint32 {
		id, err := store.UpsertEntity(graph.Entity{Type: graph.NodeAd, ID: name, Attrs: attrs})
		if err != nil {
			t.Fatal(err)
		}
		return id.Idx
	}
	var n int
	engage := func(name string, typ graph.EdgeType, ts int64, times int) {
		for range times {
			n++
			ev := graph.Event{ID: "e" + strconv.Itoa(n), Src: graph.Ref{Type: graph.NodeUser, ID: "u" + strconv.Itoa(n)},
				Dst: graph.Ref{Type: graph.NodeAd, ID: name}, Type: typ, TS: ts, Weight: 1}
			if _, err := store.AddEvent(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	date := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.DateOnly) }
	clicked := ad("clicked", nil)   // 4 clicks today
	shown := ad("shown", nil)       // 4 impressions today
	disliked := ad("disliked", nil) // not_interested only
	stale := ad("stale", nil)       // 4 clicks two half-lives ago
	newAd := ad("new", map[string]string{"start_time": date(t0 - 2*day)})
	oldAd := ad("old", map[string]string{"release_date": time.UnixMilli(t0 - 400*day).UTC().Format("02-Jan-2006")})
	soon := ad("soon", map[string]string{"start_time": date(t0 + 3*day)})
	engage("clicked", graph.EdgeClick, t0, 4)
	engage("shown", graph.EdgeImpression, t0, 4)
	engage("disliked", graph.EdgeNotInterested, t0, 4)
	engage("stale", graph.EdgeClick, t0-14*day, 4)

	opts := DefaultOptions()
	opts.Prior = PriorOptions{HalfLife: 7 * 24 * time.Hour, ImpressionWeight: 0.5, FreshWindow: DefaultFreshWindow,
		FreshRank: 2, FreshEvents: 3, NewUserShrink: DefaultNewUserShrink}
	tr := NewPriors(store, t0, t0, opts)
	ln := func(c float64) float32 { return float32(math.Log1p(c)) }
	floor := 2.0 // the second largest count: shown's 4 x 0.5
	for _, tc := range []struct {
		name string
		ad   uint32
		want float32
	}{
		{"clicks count 1", clicked, ln(4)},
		{"impressions count their weight", shown, ln(2)},
		{"not_interested never counts", disliked, 0},
		{"two half-lives ago count a quarter", stale, ln(1)},
		{"a fresh ad gets the floor", newAd, ln(floor)},
		{"an ad launched long ago does not", oldAd, 0},
		{"an ad launching later does not yet", soon, 0},
	} {
		if got := tr.prior(tc.ad); math.Abs(float64(got-tc.want)) > 1e-6 {
			t.Errorf("%s: prior %v, want %v", tc.name, got, tc.want)
		}
	}

	// Time moves on with the events: "soon" launches, and the floor is
	// recomputed (clicked's count is now the second largest).
	tr.mu.Lock()
	tr.raw[allUsers][shown] += 10
	changed := tr.advanceLocked(t0 + 4*day)
	tr.mu.Unlock()
	if !containsAll(changed, newAd, soon) {
		t.Errorf("advance 4 days: changed %v, want %d and %d", changed, newAd, soon)
	}
	if got, want := tr.prior(soon), ln(4); got != want {
		t.Errorf("launched ad: prior %v, want the floor %v", got, want)
	}
	if tr.advanceLocked(t0+3*day) != nil || tr.now != t0+4*day {
		t.Errorf("time went back")
	}
	// Out of the window: no floor, and the ad is forgotten.
	tr.mu.Lock()
	changed = tr.advanceLocked(t0 + 100*day)
	tr.mu.Unlock()
	if !containsAll(changed, newAd, soon) || tr.prior(newAd) != 0 || len(tr.launch) != 0 {
		t.Errorf("after the window: changed %v, prior %v, %d launches kept", changed, tr.prior(newAd), len(tr.launch))
	}

	// An ad indexed later notes its launch from its entity.
	late := ad("late", map[string]string{"start_time": date(t0 + 99*day)})
	if all, newUser, fresh := tr.Doc(late, store.Entity(graph.NodeID{Type: graph.NodeAd, Idx: late})); all == 0 || newUser == 0 || !fresh {
		t.Errorf("ad launched yesterday, indexed now: priors %v, %v, fresh %v; want the floors, fresh", all, newUser, fresh)
	}

	// The exploration budget: a fresh ad keeps the floor until it has
	// FreshEvents engagement events of any type.
	tried := ad("tried", map[string]string{"start_time": date(t0 + 99*day)})
	engage("tried", graph.EdgeNotInterested, t0+100*day, 2)
	tr2 := NewPriors(store, t0, t0+100*day, opts)
	if got := tr2.prior(tried); got == 0 {
		t.Errorf("fresh ad with 2 of 3 events: prior 0, want the floor")
	}
	engage("tried", graph.EdgeImpression, t0+100*day, 1)
	tr2.mu.Lock()
	changed = tr2.observeLocked(store, []graph.Event{{Dst: graph.Ref{Type: graph.NodeAd, ID: "tried"}, Type: graph.EdgeImpression, TS: t0 + 100*day}})
	tr2.mu.Unlock()
	if !slices.Contains(changed, tried) {
		t.Errorf("observed event on %d: changed %v", tried, changed)
	}
	if got, want := tr2.prior(tried), float32(math.Log1p(0.5*tr2.weight(t0+100*day))); got != want {
		t.Errorf("fresh ad with 3 events: prior %v, want its own %v", got, want)
	}

	// An event from the far future counts as now: no overflow, and the
	// fresh ads do not all age out.
	tr2.mu.Lock()
	tr2.observeLocked(store, []graph.Event{{Dst: graph.Ref{Type: graph.NodeAd, ID: "clicked"}, Type: graph.EdgeClick, TS: 7258118400000}})
	now := tr2.now
	tr2.mu.Unlock()
	if p := tr2.prior(clicked); math.IsInf(float64(p), 0) || math.IsNaN(float64(p)) {
		t.Errorf("event in 2200: prior %v", p)
	}
	if limit := max(time.Now().UnixMilli(), t0+100*day) + clockSkew.Milliseconds(); now > limit {
		t.Errorf("event in 2200 moved the trend to %d, past %d", now, limit)
	}

	// The floor can be turned off.
	off := opts
	off.Prior.FreshWindow = -1
	if got := NewPriors(store, t0, t0, off).prior(newAd); got != 0 {
		t.Errorf("no fresh window: prior %v, want 0", got)
	}
}

// prior returns ad's prior (everyone's), taking the lock.
func (t *Priors) prior(ad uint32) float32 { return t.channelPrior(ad, allUsers) }

// channelPrior returns ad's prior in channel c, taking the lock.
func (t *Priors) channelPrior(ad uint32, c int) float32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.priorLocked(ad, c)
}

// TestTrendNewUsers checks the new-user channel: an engagement counts there
// only when its user had at most NewUserEvents events before it, when
// counted from the graph and when observed; NewUserShrink adds a share of
// everyone's count; without new-user priors the channel reads everyone's.
func TestTrendNewUsers(t *testing.T) {
	t0 := worldT0
	store := graph.NewStore(graph.Options{})
	click := func(user, ad string, ts int64) graph.Event {
		ev := graph.Event{ID: user + "-" + ad, Src: graph.Ref{Type: graph.NodeUser, ID: user},
			Dst: graph.Ref{Type: graph.NodeAd, ID: ad}, Type: graph.EdgeClick, TS: ts, Weight: 1}
		if _, err := store.AddEvent(ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for i := range 3 { // three users' first events
		click("newbie"+strconv.Itoa(i), "first", t0)
	}
	for i := range 10 { // a veteran's 10 events, then one more
		click("veteran", "filler"+strconv.Itoa(i), t0-10+int64(i))
	}
	click("veteran", "later", t0)
	id := func(name string) uint32 {
		n, ok := store.Lookup(graph.Ref{Type: graph.NodeAd, ID: name})
		if !ok {
			t.Fatalf("no ad %s", name)
		}
		return n.Idx
	}
	opts := DefaultOptions()
	opts.Prior.HalfLife = 1e6 * time.Hour
	opts.Prior.FreshWindow = -1
	opts.Prior.NewUserShrink = -1
	tr := NewPriors(store, t0, t0, opts)
	ln := func(c float64) float32 { return float32(math.Log1p(c)) }
	near := func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-4 }
	for _, tc := range []struct {
		ad         string
		all, fresh float32
	}{
		{"first", ln(3), ln(3)},
		{"later", ln(1), 0},       // the veteran's 11th event
		{"filler5", ln(1), ln(1)}, // its 6th: 5 events before it
		{"filler6", ln(1), 0},     // its 7th
		{"filler0", ln(1), ln(1)}, // its first
		{"nothing", 0, 0},         // unknown ad: no counts
	} {
		ad := uint32(1 << 30)
		if tc.ad != "nothing" {
			ad = id(tc.ad)
		}
		if got := tr.channelPrior(ad, allUsers); !near(got, tc.all) {
			t.Errorf("%s: everyone's prior %v, want %v", tc.ad, got, tc.all)
		}
		if got := tr.channelPrior(ad, newUsers); !near(got, tc.fresh) {
			t.Errorf("%s: new users' prior %v, want %v", tc.ad, got, tc.fresh)
		}
	}
	// Observed: a new user's click counts in both channels, the veteran's in one.
	evs := []graph.Event{click("newbie9", "later", t0+1), click("veteran", "first", t0+1)}
	tr.mu.Lock()
	tr.observeLocked(store, evs)
	tr.mu.Unlock()
	if got := tr.channelPrior(id("later"), newUsers); !near(got, ln(1)) {
		t.Errorf("after a new user's click: new users' prior %v, want %v", got, ln(1))
	}
	if got := tr.channelPrior(id("first"), newUsers); !near(got, ln(3)) {
		t.Errorf("after a veteran's click: new users' prior %v, want %v", got, ln(3))
	}
	if got := tr.channelPrior(id("first"), allUsers); !near(got, ln(4)) {
		t.Errorf("after a veteran's click: everyone's prior %v, want %v", got, ln(4))
	}
	// Shrunk toward everyone's: + half of the count over all users.
	half := opts
	half.Prior.NewUserShrink = 0.5
	shrunk := NewPriors(store, t0, t0+1, half)
	for _, tc := range []struct {
		ad   string
		want float32
	}{
		{"later", ln(1 + 0.5*2)}, // newbie9's click, half of newbie9's and the veteran's
		{"first", ln(3 + 0.5*4)}, // three newbies, half of them and the veteran
		{"filler6", ln(0.5)},     // the veteran's 7th event: half of it
	} {
		if got := shrunk.channelPrior(id(tc.ad), newUsers); !near(got, tc.want) {
			t.Errorf("shrink 0.5: %s: new users' prior %v, want %v", tc.ad, got, tc.want)
		}
	}
	// Off: the new-user channel reads everyone's.
	off := opts
	off.NewUser = -1
	if got := NewPriors(store, t0, t0+1, off).channelPrior(id("later"), newUsers); !near(got, ln(2)) {
		t.Errorf("no new-user priors: new users' prior %v, want everyone's %v", got, ln(2))
	}
}

func TestNewUser(t *testing.T) {
	for _, tc := range []struct {
		name   string
		def    NewUser
		events int
		want   bool
	}{
		{"no events", DefaultNewUserEvents, 0, true},
		{"at the limit", DefaultNewUserEvents, DefaultNewUserEvents, true},
		{"past it", DefaultNewUserEvents, DefaultNewUserEvents + 1, false},
		{"zero is the default", 0, DefaultNewUserEvents, true},
		{"zero is the default, past it", 0, DefaultNewUserEvents + 1, false},
		{"off", -1, 0, false},
	} {
		if got := tc.def.Is(tc.events); got != tc.want {
			t.Errorf("%s: NewUser(%d).Is(%d) = %v, want %v", tc.name, tc.def, tc.events, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options, *Weights)
		ok   bool
	}{
		{"defaults", func(*Options, *Weights) {}, true},
		{"zero options: the defaults", func(o *Options, w *Weights) { *o, *w = Options{}, Weights{} }, true},
		{"every setting off", func(o *Options, _ *Weights) {
			*o = Options{Prior: PriorOptions{HalfLife: -1, ImpressionWeight: -1, FreshWindow: -1, FreshEvents: -1, NewUserShrink: -1},
				CoEngage: CoEngageOptions{WindowAds: -1, HalfLife: -1}, NewUser: -1}
		}, true},
		{"NaN impressions", func(o *Options, _ *Weights) { o.Prior.ImpressionWeight = math.NaN() }, false},
		{"fresh rank 0 is the default", func(o *Options, _ *Weights) { o.Prior.FreshRank = 0 }, true},
		{"negative fresh rank", func(o *Options, _ *Weights) { o.Prior.FreshRank = -1 }, false},
		{"negative history", func(o *Options, _ *Weights) { o.CoEngage.HistoryAds = -1 }, false},
		{"negative half-life ads", func(o *Options, _ *Weights) { o.CoEngage.HalfLifeAds = -1 }, false},
		{"infinite half-life ads", func(o *Options, _ *Weights) { o.CoEngage.HalfLifeAds = math.Inf(1) }, false},
		{"NaN new-user shrink", func(o *Options, _ *Weights) { o.Prior.NewUserShrink = math.NaN() }, false},
		{"prior weight too big", func(_ *Options, w *Weights) { w.Prior = MaxPriorWeight + 1 }, false},
		{"negative co weight", func(_ *Options, w *Weights) { w.CoEngagement = -1 }, false},
		{"NaN prior weight", func(_ *Options, w *Weights) { w.Prior = float32(math.NaN()) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, w := DefaultOptions(), DefaultWeights()
			tc.edit(&o, &w)
			err := errors.Join(o.Validate(), w.Validate())
			if (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func containsAll(xs []uint32, want ...uint32) bool {
	for _, w := range want {
		if !slices.Contains(xs, w) {
			return false
		}
	}
	return true
}

// worldT0 is the time of the tests' first events.
const worldT0 = int64(1_700_000_000_000)

// TestNewAds checks which ads count as new: fewer engagement events of any
// type than the exploration budget, with no launch time or one inside the
// fresh window (an ad launched long before it is not new, however few
// engaged with it), counted from the graph and as events and time pass.
func TestNewAds(t *testing.T) {
	store := graph.NewStore(graph.Options{})
	ids := map[string]uint32{}
	for _, name := range []string{"none", "one", "three", "launched", "vintage"} {
		var attrs map[string]string
		switch name {
		case "launched":
			attrs = map[string]string{"start_time": time.UnixMilli(worldT0).UTC().Format(time.DateOnly)}
		case "vintage":
			attrs = map[string]string{"release_date": "01-Jan-1990"}
		}
		id, err := store.UpsertEntity(graph.Entity{Type: graph.NodeAd, ID: name, Attrs: attrs})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id.Idx
	}
	n := 0
	engage := func(name string, typ graph.EdgeType, times int) []graph.Event {
		var evs []graph.Event
		for range times {
			n++
			ev := graph.Event{ID: "e" + strconv.Itoa(n), Src: graph.Ref{Type: graph.NodeUser, ID: "u" + strconv.Itoa(n)},
				Dst: graph.Ref{Type: graph.NodeAd, ID: name}, Type: typ, TS: worldT0, Weight: 1}
			if _, err := store.AddEvent(ev); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		return evs
	}
	engage("one", graph.EdgeClick, 1)
	engage("three", graph.EdgeImpression, 2)
	engage("three", graph.EdgeNotInterested, 1)

	live := roaring.New()
	for _, id := range ids {
		live.Add(id)
	}
	names := func(b *roaring.Bitmap) []string {
		var out []string
		for name, id := range ids {
			if b.Contains(id) {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		budget int
		want   []string
	}{
		{3, []string{"launched", "none", "one"}},
		{1, []string{"launched", "none"}},
		{-1, []string{"launched", "none"}}, // no budget: never engaged
	} {
		opts := DefaultOptions()
		opts.Prior.FreshEvents = tc.budget
		tr := NewPriors(store, worldT0, worldT0, opts)
		if got := names(tr.NewAds(live)); !slices.Equal(got, tc.want) {
			t.Errorf("budget %d: new ads %v, want %v", tc.budget, got, tc.want)
		}
		if live.GetCardinality() != uint64(len(ids)) {
			t.Fatalf("NewAds changed its argument")
		}
	}

	// Observed events end an ad's newness at the budget; a dead ad is not new.
	tr := NewPriors(store, worldT0, worldT0, DefaultOptions())
	changes := tr.Changes()
	tr.mu.Lock()
	tr.observeLocked(store, engage("one", graph.EdgeClick, 2))
	tr.mu.Unlock()
	if tr.Changes() == changes {
		t.Errorf("an ad reached its budget and Changes stayed %d", changes)
	}
	changes = tr.Changes()
	live.Remove(ids["none"])
	if got, want := names(tr.NewAds(live)), []string{"launched"}; !slices.Equal(got, want) {
		t.Errorf("after 2 more clicks on one: new ads %v, want %v", got, want)
	}
	// Once its fresh window has passed, a launched ad is no longer new.
	tr.mu.Lock()
	tr.advanceLocked(worldT0 + (DefaultFreshWindow + time.Hour).Milliseconds())
	tr.mu.Unlock()
	if tr.Changes() == changes {
		t.Errorf("an ad aged and Changes stayed %d", changes)
	}
	if got := names(tr.NewAds(live)); len(got) != 0 {
		t.Errorf("a fresh window after the launch: new ads %v, want none", got)
	}
	// Without a fresh window no launch time is read: the vintage ad is new.
	noWindow := DefaultOptions()
	noWindow.Prior.FreshWindow = -1
	if got := names(NewPriors(store, worldT0, worldT0, noWindow).NewAds(live)); !slices.Contains(got, "vintage") {
		t.Errorf("no fresh window: new ads %v, want the vintage ad among them", got)
	}
	var nilPriors *Priors
	if nilPriors.NewAds(live) != nil {
		t.Errorf("nil priors: want no new ads")
	}
}
