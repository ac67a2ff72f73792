package dataset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hir-ads/hir/graph"
)

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range []string{EntitiesFile, EventsFile, TruthFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

func TestSynthDeterministic(t *testing.T) {
	ctx := context.Background()
	opts := SynthOptions{Users: 300, Ads: 600, Days: 8, EventsPerUser: 20, Seed: 7}
	run := func(o SynthOptions) map[string][]byte {
		dir := t.TempDir()
		if _, err := Synth(ctx, o, dir); err != nil {
			t.Fatalf("Synth(%+v): %v", o, err)
		}
		return readAll(t, dir)
	}
	a, b := run(opts), run(opts)
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two runs with the same options", name)
		}
	}
	other := opts
	other.Seed++
	c := run(other)
	for name := range a {
		if bytes.Equal(a[name], c[name]) {
			t.Errorf("%s is identical for seeds %d and %d", name, opts.Seed, other.Seed)
		}
	}
}

func TestSynthOptions(t *testing.T) {
	tests := []struct {
		name string
		opts SynthOptions
		ok   bool
	}{
		{name: "defaults", opts: SynthOptions{}, ok: true},
		{name: "tiny", opts: SynthOptions{Users: 1, Ads: 1, Coarse: 1, Mid: 1, Fine: 1, Days: 1}, ok: true},
		{name: "negative users", opts: SynthOptions{Users: -1}},
		{name: "mid above fine", opts: SynthOptions{Mid: 600, Fine: 512}},
		{name: "coarse above mid", opts: SynthOptions{Coarse: 80, Mid: 64}},
		{name: "campaigns below advertisers", opts: SynthOptions{Advertisers: 10, Campaigns: 5}},
		{name: "products below campaigns", opts: SynthOptions{Campaigns: 10, Products: 5}},
		{name: "negative events", opts: SynthOptions{EventsPerUser: -1}},
		{name: "window past 2200", opts: SynthOptions{StartMS: 7258118400000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.opts.WithDefaults()
			if tc.ok {
				if err != nil {
					t.Fatalf("WithDefaults(%+v) error: %v", tc.opts, err)
				}
				if o.Users == 0 || o.Ads == 0 || o.Advertisers == 0 || o.Campaigns < o.Advertisers || o.Products < o.Campaigns {
					t.Errorf("WithDefaults(%+v) = %+v, defaults missing", tc.opts, o)
				}
				return
			}
			if !errors.Is(err, ErrBadOptions) {
				t.Errorf("WithDefaults(%+v) error = %v, want ErrBadOptions", tc.opts, err)
			}
			if _, err := Synth(context.Background(), tc.opts, t.TempDir()); !errors.Is(err, ErrBadOptions) {
				t.Errorf("Synth(%+v) error = %v, want ErrBadOptions", tc.opts, err)
			}
		})
	}
}

func TestSynthTiny(t *testing.T) {
	dir := t.TempDir()
	sum, err := Synth(context.Background(), SynthOptions{Users: 1, Ads: 1, Coarse: 1, Mid: 1, Fine: 1, Days: 1}, dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Import(context.Background(), "jsonl", dir, Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got.Entities != sum.Entities || got.Events != sum.Events {
		t.Errorf("Import found %d entities, %d events; Synth reported %d, %d", got.Entities, got.Events, sum.Entities, sum.Events)
	}
}

func TestSynthCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if _, err := Synth(ctx, SynthOptions{Users: 2000, Ads: 2000}, dir); !errors.Is(err, context.Canceled) {
		t.Fatalf("Synth(canceled) error = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, EventsFile)); err == nil {
		t.Errorf("canceled Synth left a complete %s behind", EventsFile)
	}
}

// synthStats checks a synthetic world while it streams through Import.
type synthStats struct {
	t       *testing.T
	truth   map[graph.Ref]*TruthEntity
	tr      *Truth
	known   map[graph.Ref]bool
	lastTS  int64
	unknown int
	// impressions and clicks by relation (0 unrelated .. 3 same fine).
	imps, clicks [4]int
	negOnRelated int
	early        int // engagement of a user or with an ad before its arrival
	coldAdImps   int
	coldUserEvts int
	badText      int
}

func (s *synthStats) relation(user *TruthEntity, fine int) int {
	best := 0
	for _, in := range user.Interests {
		switch {
		case in.Fine == fine:
			return 3
		case in.Mid == s.tr.FineParent[fine]:
			best = max(best, 2)
		case in.Coarse == s.tr.MidParent[s.tr.FineParent[fine]]:
			best = max(best, 1)
		}
	}
	return best
}

func (s *synthStats) Entity(e *graph.Entity) error {
	s.known[e.Ref()] = true
	te := s.truth[e.Ref()]
	if te == nil {
		s.t.Errorf("entity %s missing from truth.json", e.Ref())
		return nil
	}
	if e.Type == graph.NodeAd || e.Type == graph.NodeProduct {
		// Content carries signal: words of the entity's own fine interest,
		// and no word of any other fine interest.
		own := map[string]bool{}
		for _, w := range s.tr.Vocab.Fine[te.Fine] {
			own[w] = true
		}
		nOwn := 0
		for _, w := range strings.Fields(e.Text) {
			if own[w] {
				nOwn++
			}
		}
		if nOwn < 2 {
			s.badText++
		}
	}
	return nil
}

func (s *synthStats) Event(ev *graph.Event) error {
	if ev.TS < s.lastTS {
		s.t.Errorf("event %s at %d after one at %d: not time-sorted", ev.ID, ev.TS, s.lastTS)
	}
	s.lastTS = ev.TS
	if !s.known[ev.Src] || !s.known[ev.Dst] {
		s.unknown++
	}
	if ev.Type.IsStructure() && ev.Type != graph.EdgeFires {
		if te := s.truth[ev.Src]; te != nil && te.ArrivalMS != ev.TS && ev.Src.Type != graph.NodePixel {
			s.t.Errorf("structure event %s %s at %d, but %s arrives at %d", ev.Type, ev.Src, ev.TS, ev.Src, te.ArrivalMS)
		}
		return nil
	}
	user, ad := s.truth[ev.Src], s.truth[ev.Dst]
	if user == nil || ad == nil {
		return nil
	}
	if ev.TS < user.ArrivalMS || ev.TS < ad.ArrivalMS {
		s.early++
	}
	if user.Cold {
		s.coldUserEvts++
	}
	if ev.Dst.Type != graph.NodeAd {
		return nil
	}
	rel := s.relation(user, ad.Fine)
	switch ev.Type {
	case graph.EdgeImpression:
		s.imps[rel]++
		if ad.Cold {
			s.coldAdImps++
		}
	case graph.EdgeClick:
		s.clicks[rel]++
	case graph.EdgeNotInterested:
		if rel != 0 {
			s.negOnRelated++
		}
	}
	return nil
}

func TestSynthSanity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := SynthOptions{Users: 3000, Ads: 20000, Seed: 3, EventsPerUser: 40}
	if testing.Short() {
		opts = SynthOptions{Users: 1000, Ads: 5000, Seed: 3, EventsPerUser: 30}
	}
	sum, err := Synth(ctx, opts, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", sum)
	tr, err := ReadTruth(filepath.Join(dir, TruthFile))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sum.Options, tr.Options); diff != "" {
		t.Errorf("truth options mismatch (-summary +truth):\n%s", diff)
	}
	o := sum.Options
	if len(tr.MidParent) != o.Mid || len(tr.FineParent) != o.Fine || len(tr.Vocab.Fine) != o.Fine {
		t.Fatalf("truth hierarchy sizes %d/%d/%d, want %d/%d/%d", len(tr.MidParent), len(tr.FineParent), len(tr.Vocab.Fine), o.Mid, o.Fine, o.Fine)
	}
	s := &synthStats{t: t, tr: tr, truth: map[graph.Ref]*TruthEntity{}, known: map[graph.Ref]bool{}}
	advCoarse := map[string]int{}
	for i := range tr.Entities {
		e := &tr.Entities[i]
		s.truth[graph.Ref{Type: e.Type, ID: e.ID}] = e
		if e.Fine >= 0 && (tr.FineParent[e.Fine] != e.Mid || tr.MidParent[e.Mid] != e.Coarse) {
			t.Errorf("truth %s:%s has fine %d mid %d coarse %d, inconsistent with the hierarchy", e.Type, e.ID, e.Fine, e.Mid, e.Coarse)
		}
		if e.Type == graph.NodeAdvertiser {
			advCoarse[e.ID] = e.Coarse
		}
		if e.Type == graph.NodeUser && (len(e.Interests) < min(2, o.Fine) || len(e.Interests) > 4) {
			t.Errorf("user %s has %d interests, want 2-4", e.ID, len(e.Interests))
		}
	}
	got, err := Import(ctx, "jsonl", dir, s)
	if err != nil {
		t.Fatalf("Import(synth output): %v", err)
	}
	if got.Events != sum.Events || got.Entities != sum.Entities || !maps(got.EventsByType, sum.EventsByType) {
		t.Errorf("Import counted %s, Synth reported %s", got, sum.Summary)
	}
	if len(tr.Entities) != got.Entities {
		t.Errorf("truth has %d entities, entities.jsonl %d", len(tr.Entities), got.Entities)
	}
	if s.unknown > 0 {
		t.Errorf("%d events name entities missing from entities.jsonl", s.unknown)
	}
	if s.early > 0 {
		t.Errorf("%d engagement events happen before their user or ad arrived", s.early)
	}
	if s.badText > 0 {
		t.Errorf("%d ads/products have fewer than 2 words of their fine interest", s.badText)
	}
	if s.negOnRelated > 0 {
		t.Errorf("%d not_interested events on ads related to the user's interests", s.negOnRelated)
	}

	// Campaigns stay under their advertiser's coarse interest.
	var rec recorder
	if _, err := Import(ctx, "jsonl", filepath.Join(dir, EntitiesFile), &rec); err != nil {
		t.Fatal(err)
	}
	for _, e := range rec.entities {
		if e.Type != graph.NodeCampaign {
			continue
		}
		if c := s.truth[e.Ref()].Coarse; c != advCoarse[e.Attrs["advertiser"]] {
			t.Errorf("campaign %s has coarse %d, its advertiser %s %d", e.ID, c, e.Attrs["advertiser"], advCoarse[e.Attrs["advertiser"]])
		}
	}

	ev := got.EventsByType
	imp := float64(ev["impression"])
	ratio := func(name string, num, den float64, lo, hi float64) {
		r := num / den
		t.Logf("%s = %.4f", name, r)
		if r < lo || r > hi {
			t.Errorf("%s = %.4f, want in [%g, %g]", name, r, lo, hi)
		}
	}
	ratio("engagement per user", float64(got.Engagement), float64(o.Users), 0.85*o.EventsPerUser, 1.15*o.EventsPerUser)
	ratio("click/impression", float64(ev["click"]), imp, 0.02, 0.045)
	ratio("add_to_cart/click", float64(ev["add_to_cart"]), float64(ev["click"]), 0.12, 0.4)
	ratio("purchase/impression", float64(ev["purchase"]), imp, 0.0015, 0.006)
	ratio("not_interested/impression", float64(ev["not_interested"]), imp, 0.003, 0.05)
	ratio("fires/purchase", float64(ev["fires"]), float64(ev["purchase"]), 1, 1)
	ratio("on-interest impressions", float64(s.imps[3]+s.imps[2]), imp, 0.5, 0.85)
	onCTR := float64(s.clicks[3]) / float64(s.imps[3])
	offCTR := float64(s.clicks[0]) / float64(s.imps[0])
	ratio("CTR same fine / CTR unrelated", onCTR, offCTR, 5, 40)

	// Cold start: ~15% of users and ads arrive in the last 20% of the window,
	// and they do take part in events.
	ratio("cold users", float64(sum.ColdUsers), float64(o.Users), 0.1, 0.2)
	ratio("cold ads", float64(sum.ColdAds), float64(o.Ads), 0.1, 0.2)
	if s.coldAdImps == 0 || s.coldUserEvts == 0 {
		t.Errorf("cold ads got %d impressions and cold users %d events, want some", s.coldAdImps, s.coldUserEvts)
	}
	if sum.ColdStartMS != tr.ColdStartMS || tr.ColdStartMS <= tr.StartMS || tr.ColdStartMS >= tr.EndMS {
		t.Errorf("cold start %d outside window [%d, %d)", tr.ColdStartMS, tr.StartMS, tr.EndMS)
	}
	if got.MinTS < tr.StartMS || got.MaxTS >= tr.EndMS {
		t.Errorf("events span [%d, %d], outside window [%d, %d)", got.MinTS, got.MaxTS, tr.StartMS, tr.EndMS)
	}
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestSynthIDs(t *testing.T) {
	tests := []struct {
		t    graph.NodeType
		idx  int
		want string
	}{
		{graph.NodeUser, 0, "u0"}, {graph.NodeAd, 17, "a17"}, {graph.NodeCampaign, 3, "cp3"},
		{graph.NodeAdvertiser, 2, "adv2"}, {graph.NodeProduct, 9, "p9"}, {graph.NodeCategory, 1, "cat1"},
		{graph.NodeBrand, 4, "b4"}, {graph.NodePixel, 5, "px5"}, {graph.NodeInvalid, 1, ""},
	}
	for _, tc := range tests {
		if got := SynthID(tc.t, tc.idx); got != tc.want {
			t.Errorf("SynthID(%v, %d) = %q, want %q", tc.t, tc.idx, got, tc.want)
		}
	}
}

func BenchmarkSynth(b *testing.B) {
	opts := SynthOptions{Users: 10000, Ads: 10000, Seed: 1, EventsPerUser: 20}
	dir := b.TempDir()
	b.ReportAllocs()
	var events int
	for b.Loop() {
		sum, err := Synth(context.Background(), opts, dir)
		if err != nil {
			b.Fatal(err)
		}
		events += sum.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
