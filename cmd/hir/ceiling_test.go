package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCeilingServesBench starts `hir ceiling` on a free port, runs `hir
// bench` against it and stops it.
func TestCeilingServesBench(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"ceiling", "--addr", "127.0.0.1:0"}, &out, io.Discard) }()
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, u, ok := strings.Cut(out.String(), "serving on "); ok {
			url = strings.TrimSpace(u)
		}
	}
	if url == "" {
		t.Fatalf("hir ceiling printed no address: %q", out.String())
	}
	users := filepath.Join(t.TempDir(), "users.txt")
	if err := os.WriteFile(users, []byte("u1 a1 a2\nu2 a3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"known", "fresh"} {
		var rep bytes.Buffer
		if code := run(ctx, []string{"bench", "--addr", url, "--users-file", users, "--mode", mode, "--requests", "20",
			"--warmup", "0", "--concurrency", "2"}, &rep, io.Discard); code != 0 {
			t.Fatalf("hir bench --mode %s exited %d", mode, code)
		}
		if !strings.Contains(rep.String(), `"requests":20,"errors":0`) {
			t.Errorf("hir bench --mode %s against the ceiling: %s", mode, rep.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("hir ceiling exited %d, want 0", code)
	}
}
