package eventlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of sizeBytes at a fresh directory and returns
// it; the test is skipped where mounting is not allowed (not root).
func mountTmpfs(t *testing.T, sizeBytes int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", sizeBytes), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestDiskFull fills a small real file system under the log: appends fail
// with ErrFailed wrapping ENOSPC and store nothing, Err reports it, and once
// space is freed the log recovers by itself; after reopen every
// acknowledged batch is there and no refused one.
func TestDiskFull(t *testing.T) {
	mnt := mountTmpfs(t, 2<<20)
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "log")
	l, _, _ := openTest(t, Options{Dir: dir, RetryInterval: 20 * time.Millisecond})
	ctx := context.Background()
	acked := map[string]bool{}
	refused := map[string]bool{}
	var failErr error
	for i := 0; failErr == nil && i < 10_000; i++ {
		b := testBatch(fmt.Sprint("full", i), 1, 50)
		if _, err := l.Append(ctx, b); err != nil {
			failErr = err
			refused[b.Events[0].ID] = true
			break
		}
		acked[b.Events[0].ID] = true
	}
	if !errors.Is(failErr, ErrFailed) || !errors.Is(failErr, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk = %v, want ErrFailed wrapping ENOSPC", failErr)
	}
	if err := l.Err(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Err() = %v, want ENOSPC", err)
	}
	time.Sleep(60 * time.Millisecond) // a few probes, all failing
	b := testBatch("still-full", 0, 50)
	if _, err := l.Append(ctx, b); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Append while still full = %v, want ENOSPC", err)
	}
	refused[b.Events[0].ID] = true

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.Err() != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err() = %v 5 s after space was freed, want nil", err)
	}
	after := testBatch("after", 0, 5)
	if _, err := l.Append(ctx, after); err != nil {
		t.Fatalf("Append after space was freed = %v", err)
	}
	acked[after.Events[0].ID] = true
	mustClose(t, l)

	rep, err := Check(ctx, dir)
	if err != nil || len(rep.Damage) != 0 {
		t.Errorf("Check after the episode = %+v, %v; want clean", rep.Damage, err)
	}
	_, _, got := openTest(t, Options{Dir: dir})
	seen := map[string]bool{}
	for _, b := range got {
		seen[b.Events[0].ID] = true
	}
	for id := range acked {
		if !seen[id] {
			t.Errorf("acknowledged batch %s missing after reopen", id)
		}
	}
	for id := range refused {
		if seen[id] {
			t.Errorf("refused batch %s stored", id)
		}
	}
}
