package serving

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hir-ads/hir/retrieval"
)

// BenchmarkRetrieve measures POST /v1/retrieve in process (router and
// middleware included) on a tiny trained model: a known user served from
// the snapshot (with and without the co-engagement term, and without the
// new-ad share), and an anonymous
// user embedded on the fly.
func BenchmarkRetrieve(b *testing.B) {
	env := newBenchEnv(b)
	for _, bc := range []struct{ name, body string }{
		{"known", `{"user":{"type":"user","id":"u3"},"k":20}`},
		{"known-no-coengagement", `{"user":{"type":"user","id":"u3"},"k":20,"coengagement_weight":0}`},
		{"known-no-new-ad-share", `{"user":{"type":"user","id":"u3"},"k":20,"new_ad_share":0}`},
		{"anonymous", `{"context_events":[{"dst":{"type":"ad","id":"ad2"},"type":"click","ts":1700000000000}],"k":20}`},
		{"fresh", freshBenchBody},
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

// freshBenchBody is a never-seen user with five click context events.
const freshBenchBody = `{"user":{"type":"user","id":"bench-fresh"},"k":20,"context_events":[` +
	`{"dst":{"type":"ad","id":"ad2"},"type":"click","ts":1700000000000},{"dst":{"type":"ad","id":"ad7"},"type":"click","ts":1700000060000},` +
	`{"dst":{"type":"ad","id":"ad12"},"type":"click","ts":1700000120000},{"dst":{"type":"ad","id":"ad17"},"type":"click","ts":1700000180000},` +
	`{"dst":{"type":"ad","id":"ad22"},"type":"click","ts":1700000240000}]}`

// BenchmarkEngineRetrieve measures retrieval.Engine.Retrieve alone (no
// HTTP, no JSON) on the same tiny model: a known user served from the
// generation and a never-seen user with five click context events,
// embedded on every request. allocs/op is the allocation count per
// retrieve.
func BenchmarkEngineRetrieve(b *testing.B) {
	env := newBenchEnv(b)
	ctx := context.Background()
	for _, bc := range []struct{ name, body string }{
		{"known", `{"user":{"type":"user","id":"u3"},"k":100}`},
		{"fresh", freshBenchBody},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := decodeRetrieve([]byte(bc.body))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := env.engine.Retrieve(ctx, p.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func newBenchEnv(b testing.TB) *Server {
	b.Helper()
	srv, _ := newBenchEnvDir(b)
	return srv
}

// newBenchEnvDir is newBenchEnv, with the server's data directory.
func newBenchEnvDir(b testing.TB) (*Server, string) {
	b.Helper()
	dir := b.TempDir()
	log, store, _, err := OpenStore(context.Background(), eventlogOptions(dir), graphOptions())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Options{RatePerSecond: -1, Retrieval: defaultRetrieval()}, log, store)
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
	tr, err := srv.AttachTrainer(TrainerOptions{Job: retrieval.NewTrainJob(store, retrieval.JobOptions{DataDir: dir, Train: tinyTrain(),
		Build: retrieval.BuildOptions{Quantizer: tinyQuantizer()}})})
	if err != nil {
		b.Fatal(err)
	}
	if err := tr.RunOnce(ctx); err != nil {
		b.Fatal(err)
	}
	return srv, dir
}
