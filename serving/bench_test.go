package serving

import (
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// BenchmarkRetrieve measures POST /v1/retrieve in process (router and
// middleware included) on a tiny trained model: a known user served from
// the snapshot (with and without the co-engagement term), and an anonymous
// user embedded on the fly.
func BenchmarkRetrieve(b *testing.B) {
	env := newBenchEnv(b)
	for _, bc := range []struct{ name, body string }{
		{"known", `{"user":{"type":"user","id":"u3"},"k":20}`},
		{"known-no-coengagement", `{"user":{"type":"user","id":"u3"},"k":20,"coengagement_weight":0}`},
		{"anonymous", `{"context_events":[{"dst":{"type":"ad","id":"ad2"},"type":"click","ts":1700000000000}],"k":20}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/v1/retrieve", strings.NewReader(bc.body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				env.Handler().ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

func newBenchEnv(b *testing.B) *Server {
	b.Helper()
	dir := b.TempDir()
	log, store, _, err := OpenStore(context.Background(), eventlogOptions(dir), graphOptions())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Options{RatePerSecond: -1}, log, store)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	w := newWorld(200, 400, 20, 5)
	ents, err := decodeEntities(mustJSON(b, map[string]any{"entities": w.entities}), 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	evs, err := decodeEvents(mustJSON(b, map[string]any{"events": w.events}), 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := srv.Ingest(ctx, eventlogBatch(ents, evs)); err != nil {
		b.Fatal(err)
	}
	tr, err := srv.AttachTrainer(TrainerOptions{Job: NewTrainJob(store, JobOptions{DataDir: dir, Train: tinyTrain(),
		Build: BuildOptions{Quantizer: tinyQuantizer()}})})
	if err != nil {
		b.Fatal(err)
	}
	if err := tr.RunOnce(ctx); err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkTrend measures counting every ad's engagement from the graph
// (what each snapshot build and load does), with and without the new-user
// channel, on 20,000 users x 20 events over 5,000 ads: the ratio of the two
// is the cost of the new-user priors.
// clickStore is the store of the prior benchmarks: 400k clicks of 20k
// users (20 each) on 5k ads over 30 days.
func clickStore(b *testing.B) *graph.Store {
	store := graph.NewStore(graph.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	const users, perUser, ads = 20_000, 20, 5_000
	t0 := worldT0
	for u := range users {
		src := graph.Ref{Type: graph.NodeUser, ID: "u" + strconv.Itoa(u)}
		for e := range perUser {
			ev := graph.Event{Src: src, Dst: graph.Ref{Type: graph.NodeAd, ID: "a" + strconv.Itoa(rng.IntN(ads))},
				Type: graph.EdgeClick, TS: t0 + int64(rng.IntN(30*24*3600*1000)), Weight: 1, ID: src.ID + "-" + strconv.Itoa(e)}
			if _, err := store.AddEvent(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	store.Compact()
	return store
}

func BenchmarkTrend(b *testing.B) {
	store := clickStore(b)
	until := store.MaxTS()
	for _, bc := range []struct {
		name          string
		newUserEvents int
	}{{"everyone", -1}, {"new-users", DefaultNewUserEvents}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := PriorOptions{NewUserEvents: bc.newUserEvents}
			opts.applyDefaults()
			b.ReportAllocs()
			for b.Loop() {
				newTrend(store, until, until, opts)
			}
		})
	}
}

// BenchmarkCoEngagement measures the co-engagement term on the store of
// BenchmarkTrend: counting it from the graph (each snapshot build and
// load), and one retrieval's term for a user with 50 recent ads.
func BenchmarkCoEngagement(b *testing.B) {
	store := clickStore(b)
	until := store.MaxTS()
	opts := CoEngageOptions{}
	opts.applyDefaults()
	b.Run("count", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			newCoEngagement(store, until, opts)
		}
	})
	c := newCoEngagement(store, until, opts)
	recent := make([]uint32, 50)
	for i := range recent {
		recent[i] = uint32(i * 97)
	}
	b.Run("boost", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.boost(recent, 1)
		}
	})
}
