package eventlog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// idState is a caller's state for checkpoint tests: the ids of the events
// applied, in order. Safe for concurrent use.
type idState struct {
	mu  sync.Mutex
	ids []string
}

func (s *idState) apply(b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range b.Events {
		s.ids = append(s.ids, ev.ID)
	}
	return nil
}

func (s *idState) write(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.ids {
		if _, err := fmt.Fprintln(w, id); err != nil {
			return err
		}
	}
	return nil
}

// restore reads what write wrote into a new state, installed by commit.
func (s *idState) restore(r io.Reader) (func(), error) {
	var ids []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if id := sc.Text(); id != "" {
			ids = append(ids, id)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return func() {
		s.mu.Lock()
		s.ids = ids
		s.mu.Unlock()
	}, nil
}

func (s *idState) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// openState opens the log in dir with a checkpoint restore into a fresh
// idState, which the replay then extends.
func openState(t testing.TB, opts Options) (*Log, OpenReport, *idState) {
	t.Helper()
	st := &idState{}
	opts.Restore = st.restore
	l, rep, err := Open(context.Background(), opts, st.apply)
	if err != nil {
		t.Fatalf("Open(%s) = %v", opts.Dir, err)
	}
	t.Cleanup(func() { l.Close() })
	return l, rep, st
}

// ingest appends b and applies it to st, as a caller of Append does.
func ingest(t testing.TB, l *Log, st *idState, b Batch) {
	t.Helper()
	res := mustAppend(t, l, b)
	if res.Duplicates > 0 {
		t.Fatalf("unexpected duplicates: %+v", res)
	}
	if err := st.apply(b); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointRestore(t *testing.T) {
	dir := t.TempDir()
	l, rep, st := openState(t, Options{Dir: dir, SegmentSizeBytes: 4 << 10})
	if rep.Checkpoint.Seq != 0 || rep.CheckpointSkipped != "" {
		t.Fatalf("empty log: report %+v", rep)
	}
	for i := range 40 {
		ingest(t, l, st, testBatch(fmt.Sprintf("a%d", i), 1, 5))
	}
	info, err := l.Checkpoint(context.Background(), st.write)
	if err != nil {
		t.Fatal(err)
	}
	if info.Seq != 40 || info.IDs != 200 || info.Bytes == 0 {
		t.Fatalf("checkpoint info %+v, want seq 40, 200 ids", info)
	}
	for i := range 7 {
		ingest(t, l, st, testBatch(fmt.Sprintf("b%d", i), 0, 3))
	}
	want := st.list()
	mustClose(t, l)
	if n, _ := listSegments(dir); len(n) < 3 {
		t.Fatalf("%d segments; the test needs several", len(n))
	}

	l, rep, st = openState(t, Options{Dir: dir, SegmentSizeBytes: 4 << 10})
	if rep.Checkpoint.Seq != 40 || rep.Checkpoint.IDs != 200 || rep.Batches != 7 || rep.Events != 21 || rep.CheckpointSkipped != "" {
		t.Fatalf("reopen report %+v, want checkpoint at 40 and 7 batches replayed", rep)
	}
	if got := st.list(); !slices.Equal(got, want) {
		t.Fatalf("restored and replayed ids differ:\n got %v\nwant %v", got, want)
	}
	// The ids before the checkpoint still deduplicate, and still tell a
	// conflicting payload apart.
	again := testBatch("a3", 0, 5)
	if res := mustAppend(t, l, again); res.Duplicates != 5 || res.Seq != 0 {
		t.Fatalf("replay of a checkpointed batch: %+v, want 5 duplicates", res)
	}
	again.Events[2].Weight += 1
	var ce *ConflictError
	if _, err := l.Append(context.Background(), again); !errors.As(err, &ce) || ce.Index != 2 || !slices.Equal(ce.Fields, []string{"weight"}) {
		t.Fatalf("conflicting replay: err %v, want a conflict on event 2's weight", err)
	}
	if res := mustAppend(t, l, testBatch("c", 0, 2)); res.Seq != 48 {
		t.Fatalf("next batch %+v, want seq 48", res)
	}
	if s := l.Stats(); s.LastSeq != 48 || s.IDs != 223 {
		t.Fatalf("stats %+v, want last seq 48 and 223 ids", s)
	}

	// Replay (the whole log, for other readers) is unaffected.
	var all []string
	if err := l.Replay(context.Background(), func(b Batch) error {
		for _, ev := range b.Events {
			all = append(all, ev.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(all) != 223 {
		t.Fatalf("Replay saw %d events, want 223", len(all))
	}
}

func TestCheckpointUnusable(t *testing.T) {
	build := func(t *testing.T) (string, []string) {
		dir := t.TempDir()
		l, _, st := openState(t, Options{Dir: dir, SegmentSizeBytes: 4 << 10})
		for i := range 30 {
			ingest(t, l, st, testBatch(fmt.Sprintf("a%d", i), 1, 4))
		}
		if _, err := l.Checkpoint(context.Background(), st.write); err != nil {
			t.Fatal(err)
		}
		ingest(t, l, st, testBatch("after", 0, 2))
		mustClose(t, l)
		return dir, st.list()
	}
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		restore func(r io.Reader) (func(), error)
	}{
		{"flipped byte", func(t *testing.T, dir string) { flipAt(t, filepath.Join(dir, CheckpointFile), 0.6) }, nil},
		{"flipped id", func(t *testing.T, dir string) { flipAt(t, filepath.Join(dir, CheckpointFile), 0.1) }, nil},
		{"truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, CheckpointFile)
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"segment gone", func(t *testing.T, dir string) {
			nums, _ := listSegments(dir)
			// Renumber the log's segments so the checkpoint's is missing.
			for i := len(nums) - 1; i >= 0; i-- {
				if err := os.Rename(filepath.Join(dir, segmentName(nums[i])), filepath.Join(dir, segmentName(nums[i]+100))); err != nil {
					t.Fatal(err)
				}
			}
		}, nil},
		{"restore fails", func(*testing.T, string) {}, func(io.Reader) (func(), error) { return nil, errors.New("no thanks") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, want := build(t)
			tc.damage(t, dir)
			st := &idState{}
			restore := st.restore
			if tc.restore != nil {
				restore = func(r io.Reader) (func(), error) {
					if _, err := st.restore(r); err != nil {
						t.Fatal(err)
					}
					return tc.restore(r)
				}
			}
			logger, logs := logBuffer()
			l, rep, err := Open(context.Background(), Options{Dir: dir, Restore: restore, Logger: logger}, st.apply)
			if err != nil {
				t.Fatalf("Open = %v", err)
			}
			defer l.Close()
			if rep.Checkpoint.Seq != 0 || rep.CheckpointSkipped == "" || rep.Batches != 31 {
				t.Fatalf("report %+v, want the checkpoint skipped and 31 batches replayed", rep)
			}
			if !strings.Contains(logs.String(), "checkpoint not used") {
				t.Errorf("no warning logged: %s", logs)
			}
			if got := st.list(); !slices.Equal(got, want) {
				t.Fatalf("ids after a full replay differ:\n got %v\nwant %v", got, want)
			}
			if res := mustAppend(t, l, testBatch("a0", 0, 4)); res.Duplicates != 4 {
				t.Fatalf("replayed ids do not deduplicate: %+v", res)
			}
		})
	}
}

// flipAt flips one bit of the file at path at the fraction at of its size.
func flipAt(t *testing.T, path string, at float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[int(float64(len(b))*at)] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRepairRemovesCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l, _, st := openState(t, Options{Dir: dir, SegmentSizeBytes: 4 << 10})
	for i := range 30 {
		ingest(t, l, st, testBatch(fmt.Sprintf("a%d", i), 0, 4))
	}
	if _, err := l.Checkpoint(context.Background(), st.write); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	flipAt(t, filepath.Join(dir, segmentName(1)), 0.5)
	if _, err := Repair(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, CheckpointFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint after a repair: %v, want removed", err)
	}
}

// checkpointHelperEnv names the log directory of TestCheckpointHelper.
const checkpointHelperEnv = "HIR_EVENTLOG_CKPT_HELPER_DIR"

// TestCheckpointHelper is not a real test: run as a child by
// TestKill9DuringCheckpoint, it appends events from several goroutines,
// applying each acknowledged batch to its state, and writes checkpoints
// without pause; it prints "ack <id>" once each Append has returned and
// "ckpt" when a checkpoint starts. It runs until killed.
func TestCheckpointHelper(t *testing.T) {
	dir := os.Getenv(checkpointHelperEnv)
	if dir == "" {
		t.Skip("helper process for TestKill9DuringCheckpoint")
	}
	st := &idState{}
	l, _, err := Open(context.Background(), Options{Dir: dir, Restore: st.restore, SegmentSizeBytes: 16 << 10}, st.apply)
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper: %v\n", err)
		os.Exit(2)
	}
	var hold sync.RWMutex // appends and their application against checkpoints
	var out sync.Mutex
	say := func(s string) {
		out.Lock()
		defer out.Unlock()
		if _, err := os.Stdout.WriteString(s); err != nil {
			os.Exit(4)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	run := time.Now().UnixNano() // ids unique across runs on one log
	pad := []byte(strings.Repeat("\n", 1<<20))
	selfKill := os.Getenv(checkpointHelperEnv+"_SELF_KILL") != ""
	ckpts := 0
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				b := testBatch(fmt.Sprintf("r%d-w%d-b%d", run, w, i), 0, 1+i%4)
				hold.RLock()
				_, err := l.Append(context.Background(), b)
				if err == nil {
					err = st.apply(b)
				}
				hold.RUnlock()
				if err != nil {
					fmt.Fprintf(os.Stderr, "helper: append: %v\n", err)
					os.Exit(3)
				}
				say(ackLines(b))
			}
		})
	}
	wg.Go(func() {
		for time.Now().Before(deadline) {
			hold.Lock()
			say("ckpt\n")
			_, err := l.Checkpoint(context.Background(), func(w io.Writer) error {
				if err := st.write(w); err != nil {
					return err
				}
				// Blank lines, skipped by restore; with selfKill the process
				// kills itself in their middle, at its 20th checkpoint.
				if _, err := w.Write(pad[:len(pad)/2]); err != nil {
					return err
				}
				if ckpts++; selfKill && ckpts == 20 {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
					time.Sleep(time.Minute)
				}
				_, err := w.Write(pad[len(pad)/2:])
				return err
			})
			hold.Unlock()
			if err != nil {
				fmt.Fprintf(os.Stderr, "helper: checkpoint: %v\n", err)
				os.Exit(5)
			}
		}
	})
	wg.Wait()
	os.Exit(0)
}

// TestKill9DuringCheckpoint kills a process that writes checkpoints without
// pause while it ingests, several times over the same log, each run
// starting from the last one's checkpoint: every event acknowledged in any
// run is in the restored state or the replayed tail, and none twice.
func TestKill9DuringCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	acked := map[string]bool{}
	restored := 0
	midWrites := 0
	for round, killAt := range []int{300, 900, 500, 1500} {
		// Rounds 1 and 3 end with the child killing itself in the middle of
		// writing its 20th checkpoint.
		selfKill := round%2 == 1
		env := []string{checkpointHelperEnv + "=" + dir}
		if selfKill {
			env = append(env, checkpointHelperEnv+"_SELF_KILL=1")
		}
		cmd, sc := startHelper(t, "TestCheckpointHelper", env...)
		n, ckpts := 0, 0
		var killed atomic.Bool
		for sc.Scan() {
			line := sc.Text()
			if line == "ckpt" {
				ckpts++
			}
			id, ok := strings.CutPrefix(line, "ack ")
			if ok {
				acked[id] = true
				n++
			}
			if selfKill {
				continue
			}
			if n >= killAt && ckpts > 0 && !killed.Load() {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatalf("kill child: %v", err)
				}
				killed.Store(true)
			}
		}
		werr := cmd.Wait()
		if !killed.Load() && !selfKill {
			t.Fatalf("round %d: child exited before being killed: %v", round, werr)
		}
		wantSIGKILLed(t, cmd, fmt.Sprintf("round %d", round))
		_, terr := os.Stat(filepath.Join(dir, CheckpointFile+".tmp"))
		midWrite := terr == nil
		if midWrite {
			midWrites++
		}

		st := &idState{}
		l, rep, err := Open(context.Background(), Options{Dir: dir, Restore: st.restore, SegmentSizeBytes: 16 << 10}, st.apply)
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, id := range st.list() {
			if seen[id]++; seen[id] > 1 {
				t.Fatalf("round %d: event %s applied twice", round, id)
			}
		}
		missing := 0
		for id := range acked {
			if seen[id] == 0 {
				missing++
			}
		}
		if missing > 0 {
			t.Fatalf("round %d: %d of %d acknowledged events lost (report %+v)", round, missing, len(acked), rep)
		}
		if rep.Checkpoint.Seq > 0 {
			restored++
		}
		t.Logf("round %d: killed after %d acks and %d checkpoint starts (a checkpoint's temporary file left: %v); reopened from checkpoint seq %d %q, replayed %d batches",
			round, n, ckpts, midWrite, rep.Checkpoint.Seq, rep.CheckpointSkipped, rep.Batches)
	}
	if restored == 0 || midWrites == 0 {
		t.Fatalf("%d reopens started from a checkpoint and %d kills hit a checkpoint's write; want some of each", restored, midWrites)
	}
}
