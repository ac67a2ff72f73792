package serving

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph/graphtest"
	"github.com/hir-ads/hir/serving/middleware"
)

func TestRecovererAnswersProblemWithoutInternals(t *testing.T) {
	env := newEnv(t, Options{})
	h := middleware.RequestID(middleware.Recoverer(env.srv.writeProblem)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("secret internal state")
	})))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/model", nil))
	if rec.Code != 500 {
		t.Fatalf("status = %d, want 500", rec.Code)
	}
	p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
	if strings.Contains(rec.Body.String(), "secret") || p.Detail == nil || !strings.Contains(*p.Detail, rec.Header().Get(RequestIDHeader)) {
		t.Errorf("500 problem = %s, want a generic detail naming the request id", rec.Body)
	}
	if !strings.Contains(env.logBuf.String(), "secret internal state") {
		t.Error("the panic was not logged")
	}
}

func TestRequestIDIsEchoed(t *testing.T) {
	env := newEnv(t, Options{})
	res, err := env.client.HealthzWithResponse(context.Background(), func(_ context.Context, r *http.Request) error {
		r.Header.Set(RequestIDHeader, "abc-123")
		return nil
	})
	if err != nil || res.HTTPResponse.Header.Get(RequestIDHeader) != "abc-123" {
		t.Errorf("request id = %q (%v), want abc-123", res.HTTPResponse.Header.Get(RequestIDHeader), err)
	}
	bad, _ := env.client.HealthzWithResponse(context.Background(), func(_ context.Context, r *http.Request) error {
		r.Header.Set(RequestIDHeader, "has space")
		return nil
	})
	if id := bad.HTTPResponse.Header.Get(RequestIDHeader); id == "" || id == "has space" {
		t.Errorf("unsafe request id kept or none generated: %q", id)
	}
}

func TestRunShutsDownGracefully(t *testing.T) {
	dir := t.TempDir()
	rs := runServer(t, eventlog.Options{Dir: dir}, Options{ShutdownTimeout: 5 * time.Second})
	srv, log := rs.srv, rs.log
	c, err := api.NewClientWithResponses("http://" + rs.addr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.PostEventsWithBodyWithResponse(context.Background(), "application/json", strings.NewReader(`{"events":[`+goodEvent+`]}`))
	if err != nil || res.JSON200 == nil || res.JSON200.Events != 1 {
		t.Fatalf("post: %v %v", err, res)
	}
	rs.cancel()
	select {
	case err := <-rs.done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after a clean shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if _, err := log.Append(context.Background(), eventlog.Batch{Events: nil}); err != nil {
		t.Logf("empty append after close: %v", err)
	}
	if _, err := srv.Ingest(context.Background(), eventlog.Batch{}); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("Ingest after shutdown = %v, want ErrShuttingDown", err)
	}
	// The fsynced batch is there on reopen, in the checkpoint the
	// shutdown wrote: nothing is left to replay.
	log2, st2, rep, err := OpenStore(context.Background(), eventlog.Options{Dir: dir}, graphOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer log2.Close()
	if rep.Checkpoint.Seq != 1 || rep.Events != 0 || st2.NumEvents() != 1 {
		t.Errorf("after restart: %+v, %d graph events; want 1 event, from the checkpoint", rep, st2.NumEvents())
	}
}

// TestRestartFromCheckpoint: a server that wrote checkpoints (one while it
// runs, one at shutdown) restarts from the last one with the same graph,
// and the ids stored before it still deduplicate and still conflict.
func TestRestartFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	logOpts := eventlog.Options{Dir: dir, NoSync: true}
	rs := runServer(t, logOpts, Options{CheckpointEvery: 50 * time.Millisecond})
	c, err := api.NewClientWithResponses("http://" + rs.addr)
	if err != nil {
		t.Fatal(err)
	}
	post := func(c *api.ClientWithResponses, body string) *api.PostEventsResponse {
		t.Helper()
		res, err := c.PostEventsWithBodyWithResponse(context.Background(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := post(c, `{"events":[`+goodEvent+`]}`); res.JSON200 == nil {
		t.Fatalf("post: %s", res.Body)
	}
	eventually(t, 5*time.Second, "a checkpoint while serving", func() bool { return rs.log.Stats().CheckpointSeq == 1 })
	second := strings.ReplaceAll(strings.ReplaceAll(goodEvent, `"g1"`, `"g2"`), `"a1"`, `"a2"`)
	if res := post(c, `{"events":[`+second+`]}`); res.JSON200 == nil {
		t.Fatalf("post: %s", res.Body)
	}
	want := graphtest.Edges(rs.srv.Store())
	rs.cancel()
	if err := <-rs.done; err != nil {
		t.Fatal(err)
	}

	rs2 := runServer(t, logOpts, Options{CheckpointEvery: -1})
	defer func() { rs2.cancel(); <-rs2.done }()
	if got := graphtest.Edges(rs2.srv.Store()); !slices.Equal(got, want) {
		t.Fatalf("graph after restart = %v, want %v", got, want)
	}
	if st := rs2.log.Stats(); st.CheckpointSeq != 2 {
		t.Fatalf("restarted from checkpoint %d, want the shutdown's (2)", st.CheckpointSeq)
	}
	c2, err := api.NewClientWithResponses("http://" + rs2.addr)
	if err != nil {
		t.Fatal(err)
	}
	if res := post(c2, `{"events":[`+goodEvent+`]}`); res.JSON200 == nil || res.JSON200.Duplicates != 1 || res.JSON200.Events != 0 {
		t.Fatalf("replay of a checkpointed event: %s, want 1 duplicate", res.Body)
	}
	conflict := strings.Replace(goodEvent, `"ts":1700000000000`, `"ts":1700000000001`, 1)
	if res := post(c2, `{"events":[`+conflict+`]}`); res.StatusCode() != http.StatusConflict {
		t.Fatalf("conflicting replay: %d %s, want 409", res.StatusCode(), res.Body)
	}
	if got := graphtest.Edges(rs2.srv.Store()); !slices.Equal(got, want) {
		t.Fatalf("graph after the replays = %v, want %v", got, want)
	}
}
