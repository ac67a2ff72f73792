package serving

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/eventlog"
)

func TestRecovererAnswersProblemWithoutInternals(t *testing.T) {
	env := newEnv(t, Options{})
	h := requestID(env.srv.recoverer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("secret internal state")
	})))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/model", nil))
	if rec.Code != 500 {
		t.Fatalf("status = %d, want 500", rec.Code)
	}
	p := problem(t, rec.Header(), rec.Body.Bytes())
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
	// The fsynced batch is there on reopen.
	log2, st2, rep, err := OpenStore(context.Background(), eventlog.Options{Dir: dir}, graphOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer log2.Close()
	if rep.Events != 1 || st2.NumEvents() != 1 {
		t.Errorf("after restart: %+v, %d graph events; want 1", rep, st2.NumEvents())
	}
}
