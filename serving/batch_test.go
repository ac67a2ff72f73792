package serving

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/hir-ads/hir/retrieval"
)

// TestRetrieveFreshBatched checks that never-seen users retrieved by
// concurrent requests, whose embeddings the engine runs in shared forward
// calls, get exactly the answers they get one at a time.
func TestRetrieveFreshBatched(t *testing.T) {
	srv := newBenchEnv(t)
	ctx := context.Background()
	const n = 24
	reqs := make([]retrieval.Request, n)
	for i := range reqs {
		body := fmt.Sprintf(`{"user":{"type":"user","id":"fresh-%d"},"k":20,"user_content":{"text":"%s"},"context_events":[`+
			`{"dst":{"type":"ad","id":"ad%d"},"type":"click","ts":1700000000000},{"dst":{"type":"ad","id":"ad%d"},"type":"click","ts":1700000060000}]}`,
			i, []string{"running shoes", "espresso grinder", "", "tent lantern"}[i%4], (7*i)%400, (13*i+5)%400)
		p, err := decodeRetrieve([]byte(body), srv.engine.Options().Weights)
		if err != nil {
			t.Fatal(err)
		}
		reqs[i] = p.req
		reqs[i].AsOf = 1700000300000 // one graph time: an answer depends on it
	}
	alone := make([]*retrieval.Response, n)
	for i := range reqs {
		res, err := srv.engine.Retrieve(ctx, reqs[i])
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = res
	}
	before := srv.engine.EmbedBatchStats()
	together := make([]*retrieval.Response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range reqs {
		wg.Go(func() {
			<-start
			together[i], errs[i] = srv.engine.Retrieve(ctx, reqs[i])
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
	after := srv.engine.EmbedBatchStats()
	calls, embedded := after.Calls-before.Calls, after.Embedded-before.Embedded
	if embedded != n || calls >= n {
		t.Errorf("concurrent requests: %d forward calls for %d embeddings, want fewer calls than the %d requests", calls, embedded, n)
	}
}
