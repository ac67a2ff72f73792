package eventlog

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// helperEnv names the log directory of a helper child process.
const helperEnv = "HIR_EVENTLOG_HELPER_DIR"

// TestHelperProcess is not a real test: run as a child by TestKill9, it
// appends events from several goroutines and prints "ack <id>" on stdout, one
// write per line, as soon as each Append has returned. It runs until killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestKill9")
	}
	l, _, err := Open(context.Background(), Options{Dir: dir}, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper: %v\n", err)
		os.Exit(2)
	}
	const writers = 8
	var out sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(60 * time.Second) // the parent kills us long before
	for w := range writers {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				n := 1 + (i+w)%5
				b := testBatch(fmt.Sprintf("w%d-b%d", w, i), i%2, n)
				if _, err := l.Append(context.Background(), b); err != nil {
					fmt.Fprintf(os.Stderr, "helper: append: %v\n", err)
					os.Exit(3)
				}
				out.Lock()
				_, err := os.Stdout.WriteString(ackLines(b))
				out.Unlock()
				if err != nil {
					os.Exit(4)
				}
			}
		})
	}
	wg.Wait()
	os.Exit(0)
}

// ackLines are the lines a helper child prints once b's Append has
// returned: "ack <id>" for each of its events.
func ackLines(b Batch) string {
	var line strings.Builder
	for _, ev := range b.Events {
		fmt.Fprintf(&line, "ack %s\n", ev.ID)
	}
	return line.String()
}

// startHelper starts this test binary as a child running only the helper
// test named test, with env added to its environment, and returns it
// with a scanner of its standard output.
func startHelper(t *testing.T, test string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(stdout)
}

// wantSIGKILLed fails t unless the child cmd, waited for, died of SIGKILL.
func wantSIGKILLed(t *testing.T, cmd *exec.Cmd, what string) {
	t.Helper()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s: child state = %v, want killed by SIGKILL", what, cmd.ProcessState)
	}
}

// TestKill9 kills a child process with SIGKILL in the middle of concurrent
// ingestion and checks that every event it acknowledged survives reopening.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	tests := []struct {
		name   string
		killAt int // acknowledged events before SIGKILL
	}{
		{"early", 150},
		{"mid", 600},
		{"late", 1500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd, sc := startHelper(t, "TestHelperProcess", helperEnv+"="+dir)
			acked := map[string]bool{}
			var killed atomic.Bool
			for sc.Scan() {
				id, ok := strings.CutPrefix(sc.Text(), "ack ")
				if !ok {
					continue // test framework chatter
				}
				acked[id] = true
				if len(acked) >= tc.killAt && !killed.Load() {
					if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatalf("kill child: %v", err)
					}
					killed.Store(true)
				}
				// Keep reading: lines written before the kill are acknowledged too.
			}
			werr := cmd.Wait()
			if !killed.Load() {
				t.Fatalf("child exited after %d acks before being killed: %v", len(acked), werr)
			}
			wantSIGKILLed(t, cmd, tc.name)

			stored := map[string]bool{}
			l, rep, batches := openTest(t, Options{Dir: dir})
			for _, b := range batches {
				for _, ev := range b.Events {
					if stored[ev.ID] {
						t.Errorf("event %s replayed twice", ev.ID)
					}
					stored[ev.ID] = true
				}
			}
			missing := 0
			for id := range acked {
				if !stored[id] {
					missing++
					if missing <= 5 {
						t.Errorf("acknowledged event %s missing after SIGKILL and reopen", id)
					}
				}
			}
			if missing > 0 {
				t.Fatalf("%d of %d acknowledged events lost", missing, len(acked))
			}
			t.Logf("kill after %d acks: %d acknowledged, %d stored (%d unacknowledged made it), %d batches, truncated %d bytes %q",
				tc.killAt, len(acked), len(stored), len(stored)-len(acked), rep.Batches, rep.TruncatedBytes, rep.Reason)

			// The recovered log takes new writes and keeps them across a reopen.
			res := mustAppend(t, l, testBatch("after-kill", 1, 3))
			if res.Events != 3 || res.Seq != uint64(rep.Batches)+1 {
				t.Errorf("Append after recovery = %+v, want 3 events at seq %d", res, rep.Batches+1)
			}
			mustClose(t, l)
			_, rep2, batches2 := openTest(t, Options{Dir: dir})
			if rep2.TruncatedBytes != 0 || len(batches2) != len(batches)+1 {
				t.Errorf("second reopen: %d batches, report %+v; want %d batches, clean", len(batches2), rep2, len(batches)+1)
			}
		})
	}
}
