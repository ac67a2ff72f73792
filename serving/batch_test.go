package serving

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/retrieval"
)

// TestRetrieveFreshBatched checks that never-seen users retrieved by
// concurrent requests get exactly the answers they get one at a time: with
// the model that Load gives here (the native forward pass, one subgraph at a
// time in the caller's goroutine) and with GoMLX running the encoder, whose
// request-time embeddings the engine runs in shared forward calls.
func TestRetrieveFreshBatched(t *testing.T) {
	srv, dir := newBenchEnvDir(t)
	ctx := context.Background()
	vdir, err := model.LatestVersionDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.LoadGoMLX(vdir)
	if err != nil {
		t.Fatal(err)
	}
	served, err := retrieval.Open(ctx, m, srv.store, vdir, srv.store.MaxTS(), retrieval.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gomlx, err := retrieval.NewEngine(srv.store, srv.engine.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer gomlx.Close()
	if err := gomlx.Publish(ctx, served); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		engine  *retrieval.Engine
		batched bool
	}{{"native", srv.engine, false}, {"gomlx", gomlx, true}} {
		t.Run(tc.name, func(t *testing.T) { testRetrieveFreshBatched(t, srv, tc.engine, tc.batched) })
	}
}

func testRetrieveFreshBatched(t *testing.T, srv *Server, engine *retrieval.Engine, batched bool) {
	ctx := context.Background()
	const n = 24
	reqs := make([]retrieval.Request, n)
	for i := range reqs {
		body := fmt.Sprintf(`{"user":{"type":"user","id":"fresh-%d"},"k":20,"user_content":{"text":"%s"},"context_events":[`+
			`{"dst":{"type":"ad","id":"ad%d"},"type":"click","ts":1700000000000},{"dst":{"type":"ad","id":"ad%d"},"type":"click","ts":1700000060000}]}`,
			i, []string{"running shoes", "espresso grinder", "", "tent lantern"}[i%4], (7*i)%400, (13*i+5)%400)
		p, err := decodeRetrieve([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		reqs[i] = p.req
		reqs[i].AsOf = 1700000300000 // one graph time: an answer depends on it
	}
	alone := make([]*retrieval.Response, n)
	for i := range reqs {
		res, err := engine.Retrieve(ctx, reqs[i])
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = res
	}
	before := engine.EmbedBatchStats()
	together := make([]*retrieval.Response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range reqs {
		wg.Go(func() {
			<-start
			together[i], errs[i] = engine.Retrieve(ctx, reqs[i])
		})
	}
	close(start)
	wg.Wait()
	for i := range reqs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		a, b := alone[i].Candidates, together[i].Candidates
		if len(a) != len(b) || !alone[i].FreshUser || !together[i].FreshUser {
			t.Fatalf("request %d: %d candidates concurrently, %d alone (fresh %v %v)", i, len(b), len(a),
				together[i].FreshUser, alone[i].FreshUser)
		}
		for j := range a {
			if a[j].Ref != b[j].Ref || math.Float32bits(a[j].Score) != math.Float32bits(b[j].Score) {
				t.Fatalf("request %d candidate %d: concurrently %v %v, alone %v %v", i, j, b[j].Ref, b[j].Score, a[j].Ref, a[j].Score)
			}
		}
	}
	after := engine.EmbedBatchStats()
	calls, embedded := after.Calls-before.Calls, after.Embedded-before.Embedded
	switch {
	case batched && (embedded != n || calls >= n):
		t.Errorf("concurrent requests: %d forward calls for %d embeddings, want fewer calls than the %d requests", calls, embedded, n)
	case !batched && (calls != 0 || embedded != 0):
		t.Errorf("native forward pass: %d batched calls for %d embeddings, want none", calls, embedded)
	}
}
