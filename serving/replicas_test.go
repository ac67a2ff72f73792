package serving

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/retrieval"
	"github.com/hir-ads/hir/serving/cluster"
)

// testRedisAddr is the Redis of the cluster tests: HIR_REDIS_ADDR, default
// 127.0.0.1:6379.
func testRedisAddr() string {
	if a := os.Getenv("HIR_REDIS_ADDR"); a != "" {
		return a
	}
	return cluster.DefaultAddr
}

// redisPrefix skips the test when Redis does not answer PING within 1 s,
// and otherwise returns a random key prefix whose keys are deleted when the
// test ends.
func redisPrefix(t *testing.T) string {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testRedisAddr(), DialTimeout: time.Second, DisableIdentity: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		t.Skipf("no Redis at %s (set HIR_REDIS_ADDR): %v", testRedisAddr(), err)
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	prefix := "hirtest:serving:" + hex.EncodeToString(rnd[:]) + ":"
	t.Cleanup(func() {
		defer rdb.Close()
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Errorf("list test keys: %v", err)
			return
		}
		if len(keys) > 0 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("delete test keys: %v", err)
			}
		}
	})
	return prefix
}

// replica is one Server joined to the test cluster, running (Server.Run) on
// a real listener.
type replica struct {
	t      *testing.T
	id     string
	dir    string
	srv    *Server
	cl     *cluster.Client
	client *api.ClientWithResponses
	logBuf *syncBuffer
	url    string // base URL
	stop   func()
}

func startReplica(t *testing.T, prefix, id, dir string) *replica {
	t.Helper()
	return startReplicaAt(t, testRedisAddr(), 0, prefix, id, dir)
}

// startReplicaAt is startReplica on the Redis at addr, with the given
// publication timeout (0: the default).
func startReplicaAt(t *testing.T, addr string, publishTimeout time.Duration, prefix, id, dir string) *replica {
	t.Helper()
	ctx := context.Background()
	buf := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", id)
	log, store, _, err := OpenStore(ctx, eventlogOptions(dir), graphOptions())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Logger: logger, APIKeys: []string{testKey}}, log, store)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.New(ctx, cluster.Options{Addr: addr, Prefix: prefix, ReplicaID: id, Logger: logger})
	if err != nil {
		_ = srv.Close()
		t.Fatal(err)
	}
	build := retrieval.BuildOptions{Quantizer: tinyQuantizer(), Logger: logger}
	if err := srv.JoinCluster(cl, ClusterOptions{
		Stream:         cluster.StreamOptions{Block: 200 * time.Millisecond, RetryBackoff: 50 * time.Millisecond},
		Registry:       cluster.RegistryOptions{PollInterval: 500 * time.Millisecond},
		Lease:          cluster.LeaseOptions{TTL: 3 * time.Second},
		Build:          build,
		PublishTimeout: publishTimeout,
		OutboxDir:      filepath.Join(dir, "outbox"),
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.JoinCluster(cl, ClusterOptions{}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("second JoinCluster = %v, want ErrBadOptions", err)
	}
	if _, err := srv.AttachTrainer(TrainerOptions{Job: retrieval.NewTrainJob(store, retrieval.JobOptions{
		DataDir: dir, Train: tinyTrain(), Tolerance: 1, Build: build,
	})}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	r := &replica{t: t, id: id, dir: dir, srv: srv, cl: cl, logBuf: buf, url: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Run(runCtx, ln); err != nil {
			t.Errorf("replica %s: Run: %v", id, err)
		}
	})
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			if err := cl.Close(); err != nil {
				t.Errorf("close cluster client: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	r.client, err = api.NewClientWithResponses("http://"+ln.Addr().String(),
		api.WithHTTPClient(&http.Client{Transport: &validatingTransport{t: t, router: specRouter(t)}}),
		api.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+testKey)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// eventually polls cond every 20 ms until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// servedVersion returns the model version the replica's GET /v1/model
// reports, "" when none.
func (r *replica) servedVersion() string {
	r.t.Helper()
	res, err := r.client.GetModelWithResponse(context.Background())
	if err != nil || res.JSON200 == nil {
		r.t.Fatalf("GET /v1/model on %s: %v %s", r.id, err, res.Body)
	}
	if res.JSON200.Version == nil {
		return ""
	}
	return *res.JSON200.Version
}

// TestClusterReplicas runs two replicas (own data directories, one Redis
// prefix): batches posted to either reach the other's graph, live index and
// event log; only the lease holder trains, and the model it publishes is
// hot-swapped on the other.
func TestClusterReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	prefix := redisPrefix(t)
	ctx := context.Background()
	a := startReplica(t, prefix, "replica-a", t.TempDir())
	eventually(t, 5*time.Second, "replica A leads", a.srv.Leading)
	b := startReplica(t, prefix, "replica-b", t.TempDir())
	dumpLogs := func() {
		if t.Failed() {
			t.Logf("replica A log (tail):\n%s", tail(a.logBuf.String(), 6000))
			t.Logf("replica B log (tail):\n%s", tail(b.logBuf.String(), 6000))
		}
	}
	t.Cleanup(dumpLogs)

	// A → B: the world posted to A reaches B's graph.
	w := newWorld(24, 40, 12, 3)
	if res, err := a.client.PostEntitiesWithResponse(ctx, api.EntitiesRequest{Entities: w.entities}); err != nil || res.JSON200 == nil {
		t.Fatalf("post entities to A: %v %s", err, res.Body)
	}
	if res, err := a.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: w.events}); err != nil || res.JSON200 == nil {
		t.Fatalf("post events to A: %v %s", err, res.Body)
	}
	wantEvents := a.srv.Store().NumEvents()
	if wantEvents != int64(len(w.events)) {
		t.Fatalf("A holds %d events, want %d", wantEvents, len(w.events))
	}
	eventually(t, 10*time.Second, "A's batches in B's graph", func() bool {
		return b.srv.Store().NumEvents() == wantEvents && b.srv.Store().NumNodes(graph.NodeAd) == 40
	})
	if st := a.srv.StreamStats(); st.Published != 2 || st.Applied != 0 {
		t.Errorf("A stream stats = %+v, want 2 published, 0 applied", st)
	}
	if b.srv.Leading() {
		t.Fatal("B leads while A holds the lease")
	}

	// Training: refused on B (naming A), accepted on A; B hot-swaps A's model.
	res, err := b.client.TrainModelWithResponse(ctx)
	if err != nil || res.StatusCode() != http.StatusConflict || res.ApplicationproblemJSON409 == nil ||
		res.ApplicationproblemJSON409.Detail == nil || !strings.Contains(*res.ApplicationproblemJSON409.Detail, `"replica-a"`) {
		t.Fatalf("train on B: %v %d %s, want 409 naming replica-a", err, res.StatusCode(), res.Body)
	}
	if res, err := a.client.TrainModelWithResponse(ctx); err != nil || res.StatusCode() != http.StatusAccepted {
		t.Fatalf("train on A: %v %d %s", err, res.StatusCode(), res.Body)
	}
	eventually(t, 60*time.Second, "A serves v1", func() bool {
		if tr := a.srv.trainer.Load(); tr.Rounds() > 0 && tr.LastErr() != nil {
			t.Fatalf("training on A failed: %v", tr.LastErr())
		}
		return a.servedVersion() == "v1"
	})
	eventually(t, 30*time.Second, "B hot-swaps v1", func() bool { return b.servedVersion() == "v1" })
	wantDir, err := filepath.Abs(filepath.Join(a.dir, "models", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.srv.Served().Dir(); got != wantDir {
		t.Errorf("B serves the model of %q, want %q", got, wantDir)
	}
	if n := b.srv.Served().IndexSize(); n != 40 {
		t.Errorf("B's index holds %d ads, want 40", n)
	}
	if _, err := os.Stat(filepath.Join(b.dir, "models")); !os.IsNotExist(err) {
		t.Errorf("B trained although it does not lead (models dir: %v)", err)
	}
	if a.srv.Served().Dir() != wantDir {
		t.Errorf("A serves %q, want its own %q (its own announcement must not reload it)", a.srv.Served().Dir(), wantDir)
	}

	// B → A: a new ad with its campaign edge, posted to B, reaches A's graph
	// and A's live index (through the same path as local ingestion).
	text := "trail running shoes"
	if res, err := b.client.PostEntitiesWithResponse(ctx, api.EntitiesRequest{Entities: []api.Entity{{Type: api.Ad, Id: "ad-new", Text: &text}}}); err != nil || res.JSON200 == nil {
		t.Fatalf("post entity to B: %v %s", err, res.Body)
	}
	edge := apiEvent("s-ad-new", api.Ad, "ad-new", api.Campaign, "camp0", api.InCampaign, worldT0+1)
	if res, err := b.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: []api.Event{edge}}); err != nil || res.JSON200 == nil {
		t.Fatalf("post event to B: %v %s", err, res.Body)
	}
	eventually(t, 10*time.Second, "B's new ad in A's graph and live index", func() bool {
		_, ok := a.srv.Store().Lookup(graph.Ref{Type: graph.NodeAd, ID: "ad-new"})
		return ok && a.srv.Store().NumEvents() == wantEvents+1 && a.srv.Served().IndexSize() == 41
	})
	if n := b.srv.Served().IndexSize(); n != 41 {
		t.Errorf("B's index holds %d ads after its own new ad, want 41", n)
	}

	// B's log holds A's batches: reopen it after B stops.
	b.stop()
	log, store, rep, err := OpenStore(ctx, eventlogOptions(b.dir), graphOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if store.NumEvents() != wantEvents+1 || store.NumNodes(graph.NodeAd) != 41 {
		t.Errorf("B's log replays %d events and %d ads, want %d and 41", store.NumEvents(), store.NumNodes(graph.NodeAd), wantEvents+1)
	}
	stored := 0
	if err := log.Replay(ctx, func(b eventlog.Batch) error { stored += len(b.Events); return nil }); err != nil {
		t.Fatal(err)
	}
	if stored != int(wantEvents)+1 || rep.Checkpoint.Seq == 0 {
		t.Errorf("B's log stores %d events, want %d (each once); report %+v, want B's shutdown checkpoint", stored, wantEvents+1, rep)
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }
