package serving

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedis runs a real redis-server on a free loopback port with an
// append-only file in dir (so a restart keeps the stream), and returns its
// address and process. Skipped without the redis-server binary.
func startRedis(t *testing.T, dir string, port int) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server binary")
	}
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), DisableIdentity: true})
	defer rdb.Close()
	for i := 0; ; i++ {
		if rdb.Ping(context.Background()).Err() == nil {
			return cmd
		}
		if i == 100 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("redis-server did not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestRedisOutage runs two replicas on a real redis-server of their own
// and takes it away twice while replica A takes writes: frozen (SIGSTOP:
// connections hang) and killed (connection refused), then restarted.
// Writes during the outage get 503 with Retry-After and are never
// acknowledged and lost: every batch A acknowledged reaches B once Redis is
// back. Reads keep answering during the outage, and writes recover by
// themselves.
func TestRedisOutage(t *testing.T) {
	rdir := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	rs := startRedis(t, rdir, port)
	t.Cleanup(func() { rs.Process.Kill(); rs.Wait() }) // after the replicas stop
	prefix := "hirtest:outage:"
	a := startReplicaAt(t, addr, 300*time.Millisecond, prefix, "a", filepath.Join(t.TempDir(), "a"))
	b := startReplicaAt(t, addr, 300*time.Millisecond, prefix, "b", filepath.Join(t.TempDir(), "b"))

	base := func(r *replica) string { return r.url }
	post := func(i int) (int, string) {
		body := fmt.Sprintf(`{"events":[{"id":"out-%d","src":{"type":"user","id":"u%d"},"dst":{"type":"ad","id":"a%d"},"type":"click","ts":1700000000000}]}`, i, i%5, i%7)
		req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(base(a), "/")+"/v1/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testKey)
		c := &http.Client{Timeout: 10 * time.Second}
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		res.Body.Close()
		return res.StatusCode, res.Header.Get("Retry-After")
	}
	var mu sync.Mutex
	acked := map[int]bool{}
	refused := map[int]bool{}
	n := 0
	write := func(count int) (ok, failed int) {
		for range count {
			i := n
			n++
			status, retry := post(i)
			mu.Lock()
			switch {
			case status == http.StatusOK:
				acked[i] = true
				ok++
			case status == http.StatusServiceUnavailable && retry != "":
				refused[i] = true
				failed++
			default:
				t.Errorf("post %d during the test = %d (Retry-After %q), want 200 or 503 with Retry-After", i, status, retry)
			}
			mu.Unlock()
		}
		return ok, failed
	}
	read := func(what string) {
		start := time.Now()
		res, err := (&http.Client{Timeout: 5 * time.Second}).Get(strings.TrimSuffix(base(a), "/") + "/v1/model")
		if err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("read %s: %v %v", what, err, res)
			return
		}
		res.Body.Close()
		if d := time.Since(start); d > time.Second {
			t.Errorf("read %s took %v", what, d)
		}
	}
	if ok, _ := write(5); ok != 5 {
		t.Fatalf("%d of 5 writes before the outage succeeded", ok)
	}

	for _, outage := range []string{"frozen", "killed"} {
		switch outage {
		case "frozen":
			rs.Process.Signal(syscall.SIGSTOP)
		case "killed":
			rs.Process.Kill()
			rs.Wait()
		}
		_, failed := write(6)
		if failed == 0 {
			t.Errorf("%s Redis: no write was refused", outage)
		}
		read("during the outage (" + outage + ")")
		switch outage {
		case "frozen":
			rs.Process.Signal(syscall.SIGCONT)
		case "killed":
			rs = startRedis(t, rdir, port)
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			if ok, _ := write(1); ok == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("writes did not recover within 15 s after Redis came back (%s)", outage)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Retry every refused batch (same ids), as a client honouring
	// Retry-After does: each is acknowledged within a bounded time. (A
	// single retry right after the first write that succeeds can still meet
	// a Redis client pool that is redialling.)
	for i := range refused {
		deadline := time.Now().Add(20 * time.Second)
		for {
			status, _ := post(i)
			if status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("retry of refused batch %d = %d after 20 s of retries, want 200", i, status)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		acked[i] = true
	}
	t.Logf("%d batches acknowledged, %d refused during the outages and retried", len(acked), len(refused))
	deadline := time.Now().Add(45 * time.Second)
	for b.srv.Store().NumEvents() < int64(len(acked)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := b.srv.Store().NumEvents(); got < int64(len(acked)) {
		var lines []string
		for _, l := range strings.Split(b.logBuf.String(), "\n") {
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
				lines = append(lines, l)
			}
		}
		t.Fatalf("replica b holds %d events, %d acknowledged; b's warnings:\n%s", got, len(acked), strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	if got, want := a.srv.Store().NumEvents(), int64(len(acked)); got < want {
		t.Errorf("replica a holds %d events, want %d", got, want)
	}
	a.stop()
	b.stop()
	// go-redis redials a lost connection in a goroutine that sleeps 1 s
	// between attempts; let those of the outage end before goleak looks.
	time.Sleep(1500 * time.Millisecond)
}

// TestRedisOutageOutbox (issue 48, defect 9): batches that replica A stored
// but could not publish while Redis was down reach replica B once Redis is
// back, without any client retry and across a restart of A during the
// outage (its outbox); during the outage A's /readyz answers 503
// cluster-unavailable, and after it no longer does.
func TestRedisOutageOutbox(t *testing.T) {
	rdir := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	rs := startRedis(t, rdir, port)
	t.Cleanup(func() { rs.Process.Kill(); rs.Wait() })
	prefix := "hirtest:outbox:"
	adir := filepath.Join(t.TempDir(), "a")
	a := startReplicaAt(t, addr, 300*time.Millisecond, prefix, "a", adir)
	b := startReplicaAt(t, addr, 300*time.Millisecond, prefix, "b", filepath.Join(t.TempDir(), "b"))
	post := func(r *replica, i int) int {
		body := fmt.Sprintf(`{"events":[{"id":"ob-%d","src":{"type":"user","id":"u%d"},"dst":{"type":"ad","id":"a%d"},"type":"click","ts":1700000000000}]}`, i, i%5, i%7)
		req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testKey)
		res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	readyType := func(r *replica) string {
		res, err := (&http.Client{Timeout: 5 * time.Second}).Get(r.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var p struct{ Type string }
		_ = json.NewDecoder(res.Body).Decode(&p)
		return p.Type
	}
	for i := range 3 {
		if st := post(a, i); st != http.StatusOK {
			t.Fatalf("post %d before the outage = %d", i, st)
		}
	}
	if typ := readyType(a); strings.HasSuffix(typ, "cluster-unavailable") {
		t.Errorf("/readyz with Redis up: %s", typ)
	}
	rs.Process.Kill()
	rs.Wait()
	refused := 0
	for i := 3; i < 9; i++ {
		if st := post(a, i); st == http.StatusServiceUnavailable {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no write refused while Redis was down")
	}
	if typ := readyType(a); !strings.HasSuffix(typ, "cluster-unavailable") {
		t.Errorf("/readyz with Redis down answers type %q, want cluster-unavailable", typ)
	}
	stored := a.srv.Store().NumEvents()
	if stored <= 3 {
		t.Fatalf("replica a stored %d events, want at least one from the outage (stored, then refused for the stream)", stored)
	}
	// A restarts during the outage: its outbox survives.
	a.stop()
	rs = startRedis(t, rdir, port)
	a = startReplicaAt(t, addr, 300*time.Millisecond, prefix, "a", adir)
	deadline := time.Now().Add(30 * time.Second)
	for b.srv.Store().NumEvents() < stored && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := b.srv.Store().NumEvents(); got != stored {
		t.Errorf("replica b holds %d events, replica a stored %d: the batches a stored during the outage did not reach b", got, stored)
	}
	if typ := readyType(a); strings.HasSuffix(typ, "cluster-unavailable") {
		t.Errorf("/readyz after the outage: %s", typ)
	}
	if n := a.srv.repl.Load().outbox.len(); n != 0 {
		t.Errorf("%d batches left in a's outbox", n)
	}
	a.stop()
	b.stop()
	time.Sleep(1500 * time.Millisecond) // go-redis redial goroutines, as in TestRedisOutage
}
