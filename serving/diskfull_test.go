package serving

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
)

// TestDiskFullHTTP fills a real (tmpfs) file system under the event log of
// a server: ingestion answers 507 with Retry-After (never a sticky 500),
// /readyz says writes are failing, reads still answer, and once space is
// freed ingestion works again by itself.
func TestDiskFullHTTP(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 1800<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	log, store, _, err := OpenStore(context.Background(), eventlog.Options{Dir: filepath.Join(mnt, "log"),
		RetryInterval: 20 * time.Millisecond}, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	srv, err := New(Options{APIKeys: []string{testKey}, Logger: slog.New(slog.NewTextHandler(buf, nil))}, log, store)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); srv.Close() }()
	env := &testEnv{t: t, srv: srv, http: hs, log: log, dir: mnt, logBuf: buf}

	post := func(i int) (int, http.Header, []byte) {
		var evs []string
		for j := range 40 {
			evs = append(evs, fmt.Sprintf(`{"id":"full-%d-%d","src":{"type":"user","id":"u%d"},"dst":{"type":"ad","id":"a%d"},"type":"click","ts":1700000000000}`, i, j, j, i%50))
		}
		return env.raw(http.MethodPost, "/v1/events", "application/json", testKey, strings.NewReader(`{"events":[`+strings.Join(evs, ",")+`]}`))
	}
	var status int
	var h http.Header
	var b []byte
	i := 0
	for ; i < 5000; i++ {
		if status, h, b = post(i); status != http.StatusOK {
			break
		}
	}
	if status != http.StatusInsufficientStorage || h.Get("Retry-After") == "" {
		t.Fatalf("ingest on a full disk = %d (Retry-After %q) %s, want 507 with Retry-After", status, h.Get("Retry-After"), b)
	}
	if p := decodeProblem(t, h, b); p.Detail == nil || !strings.Contains(*p.Detail, "disk is full") {
		t.Errorf("507 detail = %v", ptrStr(p.Detail))
	}
	if status, _, b := post(i); status != http.StatusInsufficientStorage {
		t.Errorf("second ingest on a full disk = %d %s, want 507 again", status, b)
	}
	status, h, b = env.raw(http.MethodGet, "/readyz", "", "", nil)
	if p := decodeProblem(t, h, b); status != http.StatusServiceUnavailable || p.Detail == nil || !strings.Contains(*p.Detail, "writes are failing") {
		t.Errorf("readyz on a full disk = %d %s, want 503 saying writes are failing", status, b)
	}
	if status, _, b := env.raw(http.MethodGet, "/v1/model", "", "", nil); status != http.StatusOK {
		t.Errorf("read on a full disk = %d %s, want 200", status, b)
	}
	if strings.Contains(buf.String(), "level=ERROR msg=\"request failed\"") {
		t.Errorf("a full disk was logged as an internal error:\n%s", buf)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, _, b = post(i + 1)
		if status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status != http.StatusOK {
		t.Fatalf("ingest 5 s after space was freed = %d %s, want 200", status, b)
	}
	status, h, b = env.raw(http.MethodGet, "/readyz", "", "", nil)
	if p := decodeProblem(t, h, b); status != http.StatusServiceUnavailable || p.Detail == nil || strings.Contains(*p.Detail, "writes") {
		t.Errorf("readyz after recovery = %d %s, want the no-model 503 only", status, b)
	}
}
