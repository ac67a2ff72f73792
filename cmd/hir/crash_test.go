package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/serving"
)

// crashHelperEnv makes the test binary run crashHelper instead of the
// tests: a server over the data directory in $HIR_CRASH_DIR that trains
// every 200 ms (so a kill lands during training, snapshot persistence or a
// model swap), printing "ADDR host:port" once it serves. With
// $HIR_CRASH_AT set to a crash point it kills itself with SIGKILL there
// (see armCrash), printing "CRASH point" first; with $HIR_CRASH_AT set to
// "none" it does not train at all, and set to "overload" it does not train
// and admits few requests at once (TestOverload).
const (
	crashHelperEnv = "HIR_CRASH_DIR"
	crashAtEnv     = "HIR_CRASH_AT"
	crashNoTrain   = "none"
	crashOverload  = "overload"
)

const crashKey = "crash-key-0123456789"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		crashHelper(dir, os.Getenv(crashAtEnv))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func crashHelper(dir, at string) {
	var armed atomic.Bool
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	cfg := serveConfig{dataDir: dir, addr: "127.0.0.1:0", apiKeys: []string{crashKey},
		trainEvery: 200 * time.Millisecond, train: tinyDemo("", dir).train, prior: defaultPriorFlags(), keepModels: defaultKeepModels,
		ready: func(_ context.Context, _ *serving.Server, addr net.Addr) {
			fmt.Printf("ADDR %s\n", addr)
			armed.Store(true)
		}}
	switch at {
	case "":
	case crashNoTrain:
		cfg.trainEvery = 0
	case crashOverload:
		cfg.trainEvery, cfg.ratePerSecond = 0, -1
		cfg.maxInFlight, cfg.maxQueueWait = overloadHelperSlots(), overloadQueueWait
		cfg.apiKeys = append(cfg.apiKeys, overloadKeys...)
		handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	default:
		handler = armCrash(dir, at, &armed, handler)
	}
	e := &env{stdout: os.Stdout, stderr: os.Stderr, logger: slog.New(handler)}
	err := serve(context.Background(), e, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		os.Exit(3)
	}
}

// Crash points of the helper, reached by a training round after start-up:
//   - crashCheckpoint: while a model version is being written (a
//     DIR/models/.tmp-* directory exists);
//   - crashSnapshot: while a snapshot file (index, embeddings) is being
//     written atomically (a *.tmp* file exists in a version directory);
//   - crashSwap: when the trained generation has just been swapped in
//     (the "generation published" log record), before the round ends.
const (
	crashCheckpoint = "checkpoint"
	crashSnapshot   = "snapshot"
	crashSwap       = "swap"
)

// armCrash makes the helper kill itself at crash point at once armed is
// set. The file points are watched by polling DIR/models; the swap point by
// the returned log handler.
func armCrash(dir, at string, armed *atomic.Bool, h slog.Handler) slog.Handler {
	die := func() {
		fmt.Printf("CRASH %s\n", at)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	models := filepath.Join(dir, "models")
	writing := map[string]func() bool{
		crashCheckpoint: func() bool {
			m, _ := filepath.Glob(filepath.Join(models, ".tmp-*"))
			return len(m) > 0
		},
		crashSnapshot: func() bool {
			m, _ := filepath.Glob(filepath.Join(models, "*", "*.tmp*"))
			return len(m) > 0
		},
	}[at]
	if writing != nil {
		go func() {
			for {
				if armed.Load() && writing() {
					die()
				}
				time.Sleep(20 * time.Microsecond)
			}
		}()
		return h
	}
	return &crashHandler{Handler: h, armed: armed, msg: "generation published", die: die}
}

// crashHandler calls die on the first record with message msg once armed.
type crashHandler struct {
	slog.Handler
	armed *atomic.Bool
	msg   string
	die   func()
}

func (h *crashHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.armed.Load() && r.Message == h.msg {
		h.die()
	}
	return h.Handler.Handle(ctx, r)
}

func (h *crashHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &crashHandler{Handler: h.Handler.WithAttrs(as), armed: h.armed, msg: h.msg, die: h.die}
}

func (h *crashHandler) WithGroup(name string) slog.Handler {
	return &crashHandler{Handler: h.Handler.WithGroup(name), armed: h.armed, msg: h.msg, die: h.die}
}

// crashHelperProc is a running crash helper.
type crashHelperProc struct {
	cmd     *exec.Cmd
	base    string
	crashed chan string // the crash point it announced, if any
}

// startCrashHelper starts the helper over dir, to crash at point at ("":
// never; crashNoTrain: never, and without training; crashOverload: see
// TestOverload), and returns it once it serves.
func startCrashHelper(t *testing.T, dir, at string) *crashHelperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+dir, crashAtEnv+"="+at)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &crashHelperProc{cmd: cmd, crashed: make(chan string, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
				addr <- a
			}
			if c, ok := strings.CutPrefix(sc.Text(), "CRASH "); ok {
				p.crashed <- c
			}
		}
	}()
	select {
	case a := <-addr:
		p.base = "http://" + a
		return p
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("crash helper did not start serving in 2 minutes")
	}
	return nil
}

// ingestor posts batches of 5 clicks to a server until stopped and
// records the ids of the events it acknowledged.
type ingestor struct {
	mu    sync.Mutex
	acked map[string]bool
}

// run posts batches to base until stop is closed; batch ids start with tag.
func (g *ingestor) run(base, tag string, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		var evs, ids []string
		for j := range 5 {
			id := fmt.Sprintf("crash-%s-%d-%d", tag, i, j)
			ids = append(ids, id)
			evs = append(evs, fmt.Sprintf(`{"id":"%s","src":{"type":"user","id":"crash-u%d"},"dst":{"type":"ad","id":"crash-a%d"},"type":"click","ts":1700000000000}`, id, j, i%7))
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(`{"events":[`+strings.Join(evs, ",")+`]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+crashKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(time.Millisecond) // the server is gone
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			g.mu.Lock()
			for _, id := range ids {
				g.acked[id] = true
			}
			g.mu.Unlock()
		}
	}
}

// check fails t for every acknowledged event missing from dir's log, and
// returns how many were acknowledged.
func (g *ingestor) check(t *testing.T, dir, when string) int {
	t.Helper()
	stored := map[string]bool{}
	l, _, err := eventlog.Open(context.Background(), eventlog.Options{Dir: filepath.Join(dir, "log")}, func(b eventlog.Batch) error {
		for _, ev := range b.Events {
			stored[ev.ID] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: reopen the log after kill -9: %v", when, err)
	}
	l.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	for id := range g.acked {
		if !stored[id] {
			t.Errorf("%s: acknowledged event %s lost", when, id)
		}
	}
	return len(g.acked)
}

// importedWorld synthesises and imports the tiny demo world into a fresh
// data directory, and returns it with the demo's options for it.
func importedWorld(t *testing.T) (string, demoConfig) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := tinyDemo("", dir)
	e0, _, _ := serveTestEnv(t)
	if _, err := dataset.Synth(ctx, cfg.synth, filepath.Join(dir, "world")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := importInto(ctx, e0, "jsonl", filepath.Join(dir, "world"), dir); err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}

// crashWorld synthesises, imports and trains the tiny demo world in a
// fresh data directory.
func crashWorld(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir, cfg := importedWorld(t)
	store, err := loadGraph(ctx, dir, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.Train(ctx, store, cfg.train, dir, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkRestart starts a helper that does not train over dir and checks
// that it gets ready, has removed what a crash left in DIR/models, serves
// version want (default: the latest complete version on disk) and answers
// retrieval.
func checkRestart(t *testing.T, dir string, want ...string) {
	t.Helper()
	latest, err := model.LatestVersionDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantVersion := filepath.Base(latest)
	if len(want) > 0 {
		wantVersion = want[0]
	} else if _, err := model.Load(latest); err != nil {
		t.Errorf("latest model %s does not load after kill -9: %v", latest, err)
	}
	p := startCrashHelper(t, dir, crashNoTrain)
	defer func() { p.cmd.Process.Kill(); p.cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := http.Get(p.base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted server not ready in a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, pat := range []string{".tmp-*", ".candidate-*", "*/*.tmp*"} {
		if m, _ := filepath.Glob(filepath.Join(dir, "models", pat)); len(m) > 0 {
			t.Errorf("after the restart, unfinished files remain: %v", m)
		}
	}
	res, err := http.Get(p.base + "/v1/model")
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Version string }
	err = json.NewDecoder(res.Body).Decode(&info)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != wantVersion {
		t.Errorf("restarted server serves %s, want %s", info.Version, wantVersion)
	}
	res, err = http.Post(p.base+"/v1/retrieve", "application/json", strings.NewReader(`{"user":{"type":"user","id":"crash-u1"},"k":5}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"candidates":[{`) {
		t.Errorf("retrieve after the crash = %d %s, want 200 with candidates", res.StatusCode, b)
	}
}

// TestKill9DuringTraining kills a serving process with SIGKILL at random
// moments while it ingests and trains every 200 ms (training, snapshot
// persistence and model swaps all in flight), three times. After each kill
// every acknowledged event is in the log and the latest model version
// loads; finally a restarted server gets ready and answers retrieval from
// the previous good model and index.
func TestKill9DuringTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("trains models in a child process")
	}
	dir := crashWorld(t)
	g := &ingestor{acked: map[string]bool{}}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 3 {
		p := startCrashHelper(t, dir, "")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { g.run(p.base, fmt.Sprint(round), stop) })
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		p.cmd.Process.Kill()
		p.cmd.Wait()
		close(stop)
		wg.Wait()
		n := g.check(t, dir, fmt.Sprintf("round %d", round))
		vdir, err := model.LatestVersionDir(dir)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, err := model.Load(vdir); err != nil {
			t.Errorf("round %d: latest model %s does not load after kill -9: %v", round, vdir, err)
		}
		t.Logf("round %d: %d events acknowledged so far, latest model %s", round, n, filepath.Base(vdir))
	}
	// Old versions are pruned (a kill between a round's acceptance and its
	// pruning may leave one more).
	if vs, _ := filepath.Glob(filepath.Join(dir, "models", "v*")); len(vs) > defaultKeepModels+1 {
		t.Errorf("%d model versions kept, want at most %d: %v", len(vs), defaultKeepModels+1, vs)
	}
	checkRestart(t, dir)
}

// TestKill9AtCrashPoints kills a serving process with SIGKILL exactly
// while a model version is written, while a snapshot file is written, and
// right after a model swap, while it ingests. Each time the test checks
// that the kill left what proves where it landed (the unfinished
// temporary files), that every acknowledged event is in the log, and that
// a restart removes the unfinished files, serves the latest complete model
// version and answers retrieval.
func TestKill9AtCrashPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("trains models in a child process")
	}
	for _, tc := range []struct {
		at string
		// left is the glob under DIR/models of what the kill leaves.
		left string
	}{
		{crashCheckpoint, ".tmp-*"},
		{crashSnapshot, "*/*.tmp*"},
		{crashSwap, ""},
	} {
		t.Run(tc.at, func(t *testing.T) {
			dir := crashWorld(t)
			g := &ingestor{acked: map[string]bool{}}
			p := startCrashHelper(t, dir, tc.at)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() { g.run(p.base, tc.at, stop) })
			var point string
			select {
			case point = <-p.crashed:
			case <-time.After(3 * time.Minute):
				p.cmd.Process.Kill()
			}
			err := p.cmd.Wait()
			close(stop)
			wg.Wait()
			if point != tc.at {
				t.Fatalf("the helper did not reach crash point %s in 3 minutes (exit: %v)", tc.at, err)
			}
			if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the helper ended with %v, want SIGKILL", p.cmd.ProcessState)
			}
			models := filepath.Join(dir, "models")
			if tc.left != "" {
				if m, _ := filepath.Glob(filepath.Join(models, tc.left)); len(m) == 0 {
					t.Logf("the kill at %s landed just after the write finished (no %s left); the checks still apply", tc.at, tc.left)
				}
			}
			n := g.check(t, dir, "after kill -9 at "+tc.at)
			checkRestart(t, dir)
			t.Logf("killed at %s with %d events acknowledged", tc.at, n)
		})
	}
}

// TestServeDamagedModel damages the latest model version on disk (a
// flipped bit in its weights or config, a missing weights file) and starts
// a server: it moves the damaged version aside, says so, and serves the
// previous version, from which the next round would resume.
func TestServeDamagedModel(t *testing.T) {
	if testing.Short() {
		t.Skip("trains models")
	}
	world := crashWorld(t) // v1
	store, err := loadGraph(context.Background(), world, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.Train(context.Background(), store, tinyDemo("", world).train, world, nil); err != nil { // v2
		t.Fatal(err)
	}
	flipMiddle := func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b[len(b)/2] ^= 0x10
		return os.WriteFile(path, b, 0o644)
	}
	for _, tc := range []struct {
		name   string
		damage func(v2 string) error
	}{
		{"flipped bit in the weights", func(v2 string) error { return flipMiddle(filepath.Join(v2, model.FileWeights)) }},
		{"flipped bit in the config", func(v2 string) error { return flipMiddle(filepath.Join(v2, model.FileConfig)) }},
		{"missing weights", func(v2 string) error { return os.Remove(filepath.Join(v2, model.FileWeights)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(world)); err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(filepath.Join(dir, "models", "v2")); err != nil {
				t.Fatal(err)
			}
			checkRestart(t, dir, "v1")
			if m, _ := filepath.Glob(filepath.Join(dir, "models", ".damaged-v2-*")); len(m) != 1 {
				t.Errorf("damaged v2 not moved aside: %v", m)
			}
		})
	}
}
