package main

import (
	"bufio"
	"context"
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
// model swap), printing "ADDR host:port" once it serves.
const crashHelperEnv = "HIR_CRASH_DIR"

const crashKey = "crash-key-0123456789"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		crashHelper(dir)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func crashHelper(dir string) {
	e := &env{stdout: os.Stdout, stderr: os.Stderr, logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	cfg := tinyDemo("", dir)
	err := serve(context.Background(), e, serveConfig{dataDir: dir, addr: "127.0.0.1:0", apiKeys: []string{crashKey},
		trainEvery: 200 * time.Millisecond, train: cfg.train, prior: defaultPriorFlags(),
		ready: func(_ context.Context, _ *serving.Server, addr net.Addr) { fmt.Printf("ADDR %s\n", addr) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		os.Exit(3)
	}
}

// startCrashHelper starts the helper over dir and returns it with its
// base URL.
func startCrashHelper(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd, "http://" + a
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("crash helper did not start serving in 2 minutes")
	}
	return nil, ""
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
	store, err := loadGraph(ctx, dir, 0, e0.logger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.Train(ctx, store, cfg.train, dir, io.Discard); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	acked := map[string]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 3 {
		cmd, base := startCrashHelper(t, dir)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var evs []string
				var ids []string
				for j := range 5 {
					id := fmt.Sprintf("crash-%d-%d-%d", round, i, j)
					ids = append(ids, id)
					evs = append(evs, fmt.Sprintf(`{"id":"%s","src":{"type":"user","id":"crash-u%d"},"dst":{"type":"ad","id":"crash-a%d"},"type":"click","ts":1700000000000}`, id, j, i%7))
				}
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(`{"events":[`+strings.Join(evs, ",")+`]}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+crashKey)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // the server is gone
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					mu.Lock()
					for _, id := range ids {
						acked[id] = true
					}
					mu.Unlock()
				}
			}
		})
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		close(stop)
		wg.Wait()

		stored := map[string]bool{}
		l, _, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(dir, "log")}, func(b eventlog.Batch) error {
			for _, ev := range b.Events {
				stored[ev.ID] = true
			}
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: reopen the log after kill -9: %v", round, err)
		}
		l.Close()
		mu.Lock()
		for id := range acked {
			if !stored[id] {
				t.Errorf("round %d: acknowledged event %s lost", round, id)
			}
		}
		n := len(acked)
		mu.Unlock()
		vdir, err := model.LatestVersionDir(dir)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, err := model.Load(vdir); err != nil {
			t.Errorf("round %d: latest model %s does not load after kill -9: %v", round, vdir, err)
		}
		t.Logf("round %d: %d events acknowledged so far, latest model %s", round, n, filepath.Base(vdir))
	}

	cmd, base := startCrashHelper(t, dir)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := http.Get(base + "/readyz")
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
	res, err := http.Post(base+"/v1/retrieve", "application/json", strings.NewReader(`{"user":{"type":"user","id":"crash-u1"},"k":5}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("retrieve after the crashes = %d %s, want 200", res.StatusCode, b)
	}
}
