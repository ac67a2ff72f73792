package dataset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hir-ads/hir/graph"
)

func TestImportFixtures(t *testing.T) {
	const beijingMay6 = 1494000000000 // 2017-05-06T00:00:00+08:00
	tests := []struct {
		name     string
		format   string
		src      string
		want     Summary
		entities []graph.Entity // must be among the imported entities
		events   []graph.Event  // must be among the imported events
	}{
		{
			name: "movielens", format: "movielens", src: "testdata/movielens",
			want: Summary{
				Format: "movielens", Entities: 25, Events: 12, Engagement: 5, Structure: 7, Ratings: 5,
				EntitiesByType: map[string]int{"category": 19, "user": 3, "ad": 3},
				EventsByType:   map[string]int{"in_category": 7, "click": 2, "impression": 1, "not_interested": 2},
				MinTS:          881250000000, MaxTS: 891717742000,
			},
			entities: []graph.Entity{
				{Type: graph.NodeCategory, ID: "g4", Text: "Children's"},
				{Type: graph.NodeUser, ID: "u2", Text: "other", Attrs: map[string]string{"age": "53", "gender": "F", "occupation": "other", "zip": "94043"}},
				{Type: graph.NodeAd, ID: "m1", Text: "Toy Story (1995) | Animation, Children's, Comedy",
					Attrs: map[string]string{"year": "1995", "genres": "Animation|Children's|Comedy", "release_date": "01-Jan-1995"}},
				{Type: graph.NodeAd, ID: "m543", Text: "Misérables, Les (1995) | Drama, Musical",
					Attrs: map[string]string{"year": "1995", "genres": "Drama|Musical", "release_date": "01-Jan-1995"}},
			},
			events: []graph.Event{
				{ID: "r1-1", Src: ref(graph.NodeUser, "u1"), Dst: ref(graph.NodeAd, "m1"), Type: graph.EdgeClick, TS: 881250949000, Weight: 1},
				{ID: "r1-543", Src: ref(graph.NodeUser, "u1"), Dst: ref(graph.NodeAd, "m543"), Type: graph.EdgeImpression, TS: 881250950000, Weight: 1},
				{ID: "r2-1", Src: ref(graph.NodeUser, "u2"), Dst: ref(graph.NodeAd, "m1"), Type: graph.EdgeNotInterested, TS: 881250000000, Weight: 1},
				// Genre edges come at the movie's first rating, or the data set's first for an unrated movie.
				{ID: "mg1-3", Src: ref(graph.NodeAd, "m1"), Dst: ref(graph.NodeCategory, "g3"), Type: graph.EdgeInCategory, TS: 881250000000, Weight: 1},
				{ID: "mg543-12", Src: ref(graph.NodeAd, "m543"), Dst: ref(graph.NodeCategory, "g12"), Type: graph.EdgeInCategory, TS: 881250950000, Weight: 1},
				{ID: "mg9-1", Src: ref(graph.NodeAd, "m9"), Dst: ref(graph.NodeCategory, "g1"), Type: graph.EdgeInCategory, TS: 881250000000, Weight: 1},
			},
		},
		{
			name: "taobao-ad fuxictr", format: "taobao-ad", src: "testdata/taobao-ad/fuxictr_sample.csv",
			want: Summary{
				Format: "taobao-ad", Entities: 8, Events: 9, Engagement: 3, Structure: 6,
				EntitiesByType: map[string]int{"user": 2, "ad": 2, "campaign": 1, "advertiser": 1, "category": 1, "brand": 1},
				EventsByType: map[string]int{"impression": 2, "click": 1, "in_campaign": 2, "in_category": 2,
					"of_brand": 1, "of_advertiser": 1},
				MinTS: beijingMay6, MaxTS: beijingMay6 + 60000,
			},
			entities: []graph.Entity{
				{Type: graph.NodeUser, ID: "u11", Attrs: map[string]string{"cms_segid": "0", "cms_group_id": "3",
					"final_gender_code": "2", "age_level": "3", "shopping_level": "3", "occupation": "0"}},
				{Type: graph.NodeAd, ID: "a101", Attrs: map[string]string{"campaign": "cp201", "advertiser": "adv301",
					"category": "c7", "brand": "b401", "price": "3.9"}},
				{Type: graph.NodeAd, ID: "a102", Attrs: map[string]string{"campaign": "cp201", "advertiser": "adv301",
					"category": "c7", "price": "19.5"}},
			},
			events: []graph.Event{
				{Src: ref(graph.NodeAd, "a101"), Dst: ref(graph.NodeCampaign, "cp201"), Type: graph.EdgeInCampaign, TS: beijingMay6, Weight: 1},
				{Src: ref(graph.NodeCampaign, "cp201"), Dst: ref(graph.NodeAdvertiser, "adv301"), Type: graph.EdgeOfAdvertiser, TS: beijingMay6, Weight: 1},
				{Src: ref(graph.NodeAd, "a101"), Dst: ref(graph.NodeBrand, "b401"), Type: graph.EdgeOfBrand, TS: beijingMay6, Weight: 1},
				{ID: "t11-102-1494000005", Src: ref(graph.NodeUser, "u11"), Dst: ref(graph.NodeAd, "a102"), Type: graph.EdgeClick, TS: beijingMay6 + 5000, Weight: 1},
			},
		},
		{
			name: "taobao-ad dmr", format: "taobao-ad", src: "testdata/taobao-ad/dmr_sample.txt",
			want: Summary{
				Format: "taobao-ad", Entities: 9, Events: 8, Engagement: 2, Structure: 6,
				EntitiesByType: map[string]int{"user": 2, "ad": 2, "campaign": 1, "advertiser": 1, "category": 2, "brand": 1},
				EventsByType: map[string]int{"impression": 1, "click": 1, "in_campaign": 2, "in_category": 2,
					"of_brand": 1, "of_advertiser": 1},
				MinTS: beijingMay6, MaxTS: beijingMay6 + 1000,
			},
			entities: []graph.Entity{
				{Type: graph.NodeUser, ID: "u22", Attrs: map[string]string{"cms_segid": "7", "cms_group_id": "4",
					"final_gender_code": "1", "age_level": "2", "pvalue_level": "0", "shopping_level": "3",
					"occupation": "1", "new_user_class_level": "4"}},
				{Type: graph.NodeAd, ID: "a501", Attrs: map[string]string{"campaign": "cp601", "advertiser": "adv701",
					"category": "c8", "price_norm": "0.95"}},
			},
			events: []graph.Event{
				{ID: "d0", Src: ref(graph.NodeUser, "u21"), Dst: ref(graph.NodeAd, "a501"), Type: graph.EdgeClick, TS: beijingMay6, Weight: 1},
				{ID: "d1", Src: ref(graph.NodeUser, "u22"), Dst: ref(graph.NodeAd, "a502"), Type: graph.EdgeImpression, TS: beijingMay6 + 1000, Weight: 1},
			},
		},
		{
			name: "taobao-ad dir", format: "taobao-ad", src: "testdata/taobao-ad",
			want: Summary{
				Format: "taobao-ad", Entities: 16, Events: 17, Engagement: 5, Structure: 12,
				EntitiesByType: map[string]int{"user": 4, "ad": 4, "campaign": 2, "advertiser": 2, "category": 2, "brand": 2},
				EventsByType: map[string]int{"impression": 3, "click": 2, "in_campaign": 4, "in_category": 4,
					"of_brand": 2, "of_advertiser": 2},
				MinTS: beijingMay6, MaxTS: beijingMay6 + 60000,
			},
		},
		{
			name: "taobao-behavior", format: "taobao-behavior", src: "testdata/taobao-behavior",
			want: Summary{
				Format: "taobao-behavior", Entities: 7, Events: 8, Engagement: 5, Structure: 3,
				EntitiesByType: map[string]int{"user": 2, "ad": 3, "category": 2},
				EventsByType: map[string]int{"impression": 2, "add_to_cart": 1, "interested": 1, "purchase": 1,
					"in_category": 3},
				MinTS: 1505117799000, MaxTS: 1511600000000,
			},
			entities: []graph.Entity{
				{Type: graph.NodeAd, ID: "i1002", Attrs: map[string]string{"category": "c12"}},
			},
			events: []graph.Event{
				{Src: ref(graph.NodeAd, "i1001"), Dst: ref(graph.NodeCategory, "c11"), Type: graph.EdgeInCategory, TS: 1511544070000, Weight: 1},
				{ID: "b1-1001-1511544170-cart", Src: ref(graph.NodeUser, "u1"), Dst: ref(graph.NodeAd, "i1001"), Type: graph.EdgeAddToCart, TS: 1511544170000, Weight: 1},
				{ID: "b2-1001-1511600000-buy", Src: ref(graph.NodeUser, "u2"), Dst: ref(graph.NodeAd, "i1001"), Type: graph.EdgePurchase, TS: 1511600000000, Weight: 1},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			got, err := Import(context.Background(), tc.format, tc.src, &rec)
			if err != nil {
				t.Fatalf("Import(%q, %q) error: %v", tc.format, tc.src, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Import(%q, %q) summary mismatch (-want +got):\n%s", tc.format, tc.src, diff)
			}
			if len(rec.entities) != got.Entities || len(rec.events) != got.Events {
				t.Errorf("sink got %d entities, %d events; summary says %d, %d", len(rec.entities), len(rec.events), got.Entities, got.Events)
			}
			for _, want := range tc.entities {
				e, ok := rec.entity(want.Type, want.ID)
				if !ok {
					t.Errorf("entity %s not imported", want.Ref())
					continue
				}
				if diff := cmp.Diff(want, e); diff != "" {
					t.Errorf("entity %s mismatch (-want +got):\n%s", want.Ref(), diff)
				}
			}
			for _, want := range tc.events {
				if !slices.Contains(rec.events, want) {
					t.Errorf("event %+v not imported", want)
				}
			}
			assertEntitiesFirst(t, &rec)
		})
	}
}

func ref(t graph.NodeType, id string) graph.Ref { return graph.Ref{Type: t, ID: id} }

// assertEntitiesFirst checks that every event's endpoints were emitted as
// entities (before the import ended) and that every event validates.
func assertEntitiesFirst(t *testing.T, rec *recorder) {
	t.Helper()
	known := map[graph.Ref]bool{}
	for _, e := range rec.entities {
		if known[e.Ref()] {
			t.Errorf("entity %s emitted twice", e.Ref())
		}
		known[e.Ref()] = true
	}
	for _, ev := range rec.events {
		if err := ev.Validate(); err != nil {
			t.Errorf("event %+v does not validate: %v", ev, err)
		}
		if !known[ev.Src] || !known[ev.Dst] {
			t.Errorf("event %s %s -> %s names an entity that was not imported", ev.Type, ev.Src, ev.Dst)
		}
	}
}

func TestImportErrors(t *testing.T) {
	ml := func(name, content string) map[string]string {
		files := map[string]string{}
		for _, f := range []string{"u.user", "u.item", "u.data", "u.genre"} {
			b, err := os.ReadFile(filepath.Join("testdata", "movielens", f))
			if err != nil {
				t.Fatal(err)
			}
			files[f] = string(b)
		}
		files[name] = content
		return files
	}
	tests := []struct {
		name     string
		format   string
		files    map[string]string
		file     string // source inside the directory ("" for the directory)
		wantErr  error
		wantFile string
		wantLine int
		wantText string
	}{
		{name: "jsonl bad node type", format: "jsonl",
			files: map[string]string{"events.jsonl": `{"src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1}` +
				"\n\n" + `{"src":{"type":"usr","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1}` + "\n"},
			wantErr: graph.ErrUnknownNodeType, wantFile: "events.jsonl", wantLine: 3, wantText: `events.jsonl:3: src: unknown node type: "usr"`},
		{name: "jsonl syntax", format: "jsonl",
			files:    map[string]string{"entities.jsonl": `{"type":"ad","id":"a1"}` + "\n" + `{"type":"ad",` + "\n"},
			wantFile: "entities.jsonl", wantLine: 2},
		{name: "jsonl missing ts", format: "jsonl",
			files:   map[string]string{"events.jsonl": `{"src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click"}`},
			wantErr: graph.ErrBadTimestamp, wantFile: "events.jsonl", wantLine: 1},
		{name: "jsonl single mixed file", format: "jsonl", file: "mixed.jsonl",
			files: map[string]string{"mixed.jsonl": `{"type":"ad","id":"a1"}` + "\n" +
				`{"src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"clack","ts":1}` + "\n"},
			wantErr: graph.ErrUnknownEdgeType, wantFile: "mixed.jsonl", wantLine: 2},
		{name: "jsonl edge the rules do not allow", format: "jsonl",
			files: map[string]string{"events.jsonl": `{"src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1}` + "\n" +
				`{"src":{"type":"ad","id":"a1"},"dst":{"type":"user","id":"u1"},"type":"click","ts":1}` + "\n"},
			wantErr: graph.ErrEdgeNotAllowed, wantFile: "events.jsonl", wantLine: 2, wantText: "click from ad to user"},
		{name: "jsonl control character in an id", format: "jsonl",
			files:   map[string]string{"entities.jsonl": `{"type":"ad","id":"a1"}` + "\n" + `{"type":"ad","id":"a\u202e2"}` + "\n"},
			wantErr: graph.ErrBadID, wantFile: "entities.jsonl", wantLine: 2, wantText: "U+202E"},
		{name: "jsonl empty dir", format: "jsonl", files: map[string]string{"README": "x"}, wantErr: ErrNoData},
		{name: "movielens short rating", format: "movielens", files: ml("u.data", "1\t1\t5\t881250949\n\n\n1\t2\t3\n"),
			wantErr: ErrBadRecord, wantFile: "u.data", wantLine: 4},
		{name: "movielens bad rating", format: "movielens", files: ml("u.data", "1\t1\t7\t881250949\n"),
			wantErr: ErrBadRecord, wantFile: "u.data", wantLine: 1},
		{name: "movielens bad genre flag", format: "movielens",
			files:   ml("u.item", "1|Toy Story (1995)|01-Jan-1995||url|0|0|0|1|1|1|0|0|0|0|0|0|0|0|0|0|0|0|x\n"),
			wantErr: ErrBadRecord, wantFile: "u.item", wantLine: 1},
		{name: "movielens missing file", format: "movielens", files: map[string]string{"u.data": ""}, wantErr: ErrNoData},
		{name: "taobao-ad bad clk", format: "taobao-ad",
			files:   map[string]string{"s.csv": "clk,time_stamp,userid,adgroup_id\n1,2017-05-06 00:00:00,1,2\n2,2017-05-06 00:00:00,1,2\n"},
			wantErr: ErrBadRecord, wantFile: "s.csv", wantLine: 3},
		{name: "taobao-ad no header", format: "taobao-ad", files: map[string]string{"s.csv": "1,2,3\n"},
			wantErr: ErrBadRecord, wantFile: "s.csv", wantLine: 1},
		{name: "taobao-behavior bad behavior", format: "taobao-behavior",
			files:   map[string]string{"UserBehavior.csv": "1,2,3,pv,1511544070\n1,2,3,look,1511544070\n"},
			wantErr: ErrBadRecord, wantFile: "UserBehavior.csv", wantLine: 2},
		{name: "unknown format", format: "csv", files: map[string]string{}, wantErr: ErrUnknownFormat,
			wantText: "jsonl, movielens, taobao-ad, taobao-behavior"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := writeFiles(t, tc.files)
			if tc.file != "" {
				src = filepath.Join(src, tc.file)
			}
			_, err := Import(context.Background(), tc.format, src, Discard)
			if err == nil {
				t.Fatalf("Import(%q) = nil error, want one", tc.format)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Import(%q) error %v, want %v", tc.format, err, tc.wantErr)
			}
			if tc.wantText != "" && !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("Import(%q) error %q, want it to contain %q", tc.format, err, tc.wantText)
			}
			if tc.wantFile == "" {
				return
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("Import(%q) error %v (%T), want a *LineError", tc.format, err, err)
			}
			if le.File != tc.wantFile || le.Line != tc.wantLine {
				t.Errorf("LineError at %s:%d, want %s:%d (%v)", le.File, le.Line, tc.wantFile, tc.wantLine, err)
			}
		})
	}
}

func TestImportCanceled(t *testing.T) {
	dir := sharedData(t, "movielens-100k")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Import(ctx, "movielens", dir, Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("Import(canceled) error %v, want context.Canceled", err)
	}
}

func TestImportRealData(t *testing.T) {
	tests := []struct {
		name     string
		format   string
		sub      string
		entities map[string]int
		events   map[string]int
		ratings  int
	}{
		{name: "movielens-100k", format: "movielens", sub: "movielens-100k",
			entities: map[string]int{"user": 943, "ad": 1682, "category": 19},
			events:   map[string]int{"in_category": 2893}, ratings: 100000},
		{name: "taobao-behavior", format: "taobao-behavior", sub: "taobao-userbehavior-sample",
			entities: map[string]int{"user": 43, "ad": 3276, "category": 567},
			events:   map[string]int{"impression": 3926, "add_to_cart": 190, "interested": 128, "purchase": 77, "in_category": 3276}},
		{name: "taobao-ad dmr", format: "taobao-ad", sub: "taobao-ad-tiny/paddlerec_dmr_alimama_sampled_train.txt",
			entities: map[string]int{"user": 230, "ad": 297, "campaign": 293, "advertiser": 289},
			events:   map[string]int{"click": 210, "impression": 290, "in_campaign": 297}},
		{name: "taobao-ad fuxictr", format: "taobao-ad", sub: "taobao-ad-tiny/fuxictr_train_sample.csv",
			entities: map[string]int{"user": -1, "ad": -1}, events: map[string]int{"in_campaign": -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := sharedData(t, tc.sub)
			var rec recorder
			got, err := Import(context.Background(), tc.format, src, &rec)
			if err != nil {
				t.Fatalf("Import(%q) error: %v", tc.format, err)
			}
			t.Logf("%s", got)
			for typ, n := range tc.entities {
				if n >= 0 && got.EntitiesByType[typ] != n || n < 0 && got.EntitiesByType[typ] == 0 {
					t.Errorf("%s entities = %d, want %d", typ, got.EntitiesByType[typ], n)
				}
			}
			for typ, n := range tc.events {
				if n >= 0 && got.EventsByType[typ] != n || n < 0 && got.EventsByType[typ] == 0 {
					t.Errorf("%s events = %d, want %d", typ, got.EventsByType[typ], n)
				}
			}
			if got.Ratings != tc.ratings {
				t.Errorf("ratings = %d, want %d", got.Ratings, tc.ratings)
			}
			if tc.ratings > 0 {
				if n := got.EventsByType["click"] + got.EventsByType["impression"] + got.EventsByType["not_interested"]; n != tc.ratings {
					t.Errorf("rating events = %d, want %d", n, tc.ratings)
				}
				if !slices.IsSortedFunc(rec.events, func(a, b graph.Event) int { return int(a.TS - b.TS) }) {
					t.Errorf("movielens events are not in time order")
				}
			}
			assertEntitiesFirst(t, &rec)
		})
	}
}

func TestFormats(t *testing.T) {
	want := []string{"jsonl", "movielens", "taobao-ad", "taobao-behavior"}
	if got := Formats(); !slices.Equal(got, want) {
		t.Errorf("Formats() = %v, want %v", got, want)
	}
}
