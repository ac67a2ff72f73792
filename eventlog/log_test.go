package eventlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hir-ads/hir/graph"
)

func TestConcurrentAppendRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, rep, got := openTest(t, Options{Dir: dir})
	if len(got) != 0 || rep != (OpenReport{}) {
		t.Fatalf("Open(empty dir) replayed %d batches, report %+v", len(got), rep)
	}
	const writers, perWriter = 16, 25
	var (
		mu    sync.Mutex
		acked []Batch
		wg    sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				b := testBatch(fmt.Sprintf("w%d-%d", w, i), i%3, 1+(w+i)%7)
				res, err := l.Append(context.Background(), b)
				if err != nil {
					t.Errorf("Append = %v", err)
					return
				}
				if res.Entities != len(b.Entities) || res.Events != len(b.Events) || res.Duplicates != 0 || res.Seq == 0 {
					t.Errorf("Append(%d entities, %d events) = %+v", len(b.Entities), len(b.Events), res)
				}
				b.Seq = res.Seq
				mu.Lock()
				acked = append(acked, b)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(acked, func(a, b Batch) int { return int(a.Seq) - int(b.Seq) })
	for i, b := range acked {
		if b.Seq != uint64(i+1) {
			t.Fatalf("acknowledged seqs are not 1..%d: position %d has %d", len(acked), i, b.Seq)
		}
	}
	st := l.Stats()
	if st.Batches != writers*perWriter || st.Syncs == 0 || st.Syncs > st.Commits || st.LastSeq != uint64(len(acked)) {
		t.Errorf("Stats() = %+v", st)
	}
	t.Logf("%d batches in %d commits (%d fsyncs)", st.Batches, st.Commits, st.Syncs)

	var live []Batch
	if err := l.Replay(context.Background(), func(b Batch) error { live = append(live, b); return nil }); err != nil {
		t.Fatalf("Replay = %v", err)
	}
	if diff := cmp.Diff(acked, live, batchOpts); diff != "" {
		t.Errorf("Replay on the open log mismatch (-acked +replayed):\n%s", diff)
	}
	mustClose(t, l)

	_, rep, got = openTest(t, Options{Dir: dir})
	if diff := cmp.Diff(acked, got, batchOpts); diff != "" {
		t.Errorf("replay after reopen mismatch (-acked +replayed):\n%s", diff)
	}
	events := 0
	for _, b := range acked {
		events += len(b.Events)
	}
	if rep.Batches != len(acked) || rep.Events != events || rep.TruncatedBytes != 0 || rep.Segments != 1 {
		t.Errorf("OpenReport = %+v, want %d batches, %d events, clean", rep, len(acked), events)
	}
}

func TestIdempotency(t *testing.T) {
	ev := func(id string) graph.Event { return testEvent(id, len(id)) }
	tests := []struct {
		name    string
		before  [][]graph.Event // appended first, then the log is reopened
		events  []graph.Event
		ent     int
		want    AppendResult // Seq is checked for zero / non-zero only
		written bool
	}{
		{"fresh", nil, []graph.Event{ev("a"), ev("b")}, 0, AppendResult{Events: 2}, true},
		{"repeat inside batch", nil, []graph.Event{ev("a"), ev("a"), ev("b")}, 0, AppendResult{Events: 2, Duplicates: 1}, true},
		{"already stored", [][]graph.Event{{ev("a")}}, []graph.Event{ev("a"), ev("c")}, 0, AppendResult{Events: 1, Duplicates: 1}, true},
		{"all duplicates not written", [][]graph.Event{{ev("a"), ev("b")}}, []graph.Event{ev("b"), ev("a")}, 0, AppendResult{Duplicates: 2}, false},
		{"empty ids never deduplicated", [][]graph.Event{{ev("")}}, []graph.Event{ev(""), ev("")}, 0, AppendResult{Events: 2}, true},
		{"entities written despite duplicate events", [][]graph.Event{{ev("a")}}, []graph.Event{ev("a")}, 2, AppendResult{Entities: 2, Duplicates: 1}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _, _ := openTest(t, Options{Dir: dir})
			for _, evs := range tc.before {
				mustAppend(t, l, Batch{Events: evs})
			}
			mustClose(t, l) // the seen ids must come back from replay
			l, _, _ = openTest(t, Options{Dir: dir})
			before := l.Stats()
			b := testBatch("x", tc.ent, 0)
			b.Events = tc.events
			got := mustAppend(t, l, b)
			if (got.Seq != 0) != tc.written {
				t.Errorf("Append seq = %d, want written=%v", got.Seq, tc.written)
			}
			got.Seq = 0
			if got != tc.want {
				t.Errorf("Append = %+v, want %+v", got, tc.want)
			}
			after := l.Stats()
			if grew := after.Bytes > before.Bytes; grew != tc.written {
				t.Errorf("log grew from %d to %d bytes, want written=%v", before.Bytes, after.Bytes, tc.written)
			}
			mustClose(t, l)
			_, _, batches := openTest(t, Options{Dir: dir})
			stored := 0
			for _, b := range batches {
				stored += len(b.Events)
			}
			wantStored := tc.want.Events
			for _, evs := range tc.before {
				wantStored += len(evs)
			}
			if stored != wantStored {
				t.Errorf("replayed %d events, want %d", stored, wantStored)
			}
		})
	}
}

func TestConcurrentDuplicates(t *testing.T) {
	l, _, _ := openTest(t, Options{Dir: t.TempDir(), NoSync: true})
	const writers, ids = 8, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total AppendResult
	for range writers {
		wg.Go(func() {
			for i := range ids {
				res, err := l.Append(context.Background(), Batch{Events: []graph.Event{testEvent(fmt.Sprint("id", i), i)}})
				if err != nil {
					t.Errorf("Append = %v", err)
					return
				}
				mu.Lock()
				total.Events += res.Events
				total.Duplicates += res.Duplicates
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total.Events != ids || total.Duplicates != ids*(writers-1) {
		t.Errorf("stored %d events and dropped %d, want %d and %d", total.Events, total.Duplicates, ids, ids*(writers-1))
	}
	if st := l.Stats(); st.IDs != ids || st.Events != ids {
		t.Errorf("Stats() = %+v, want %d ids and events", st, ids)
	}
}

// segmentFiles returns the paths of the segment files in dir, in order.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(paths)
	return paths
}

func TestSegmentRollOver(t *testing.T) {
	dir := t.TempDir()
	const segSize = 1024
	l, _, _ := openTest(t, Options{Dir: dir, SegmentSizeBytes: segSize})
	var want []Batch
	for i := range 60 {
		b := testBatch(fmt.Sprint("r", i), i%2, 2)
		if i == 30 {
			b = testBatch("big", 0, 40) // larger than a segment: gets one of its own
		}
		b.Seq = mustAppend(t, l, b).Seq
		want = append(want, b)
	}
	st := l.Stats()
	mustClose(t, l)
	files := segmentFiles(t, dir)
	if len(files) < 5 || st.Segments != len(files) {
		t.Fatalf("%d segment files, Stats().Segments = %d; want >= 5 and equal", len(files), st.Segments)
	}
	var total int64
	oversized := 0
	for i, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
		if fi.Size() > segSize {
			oversized++
		}
		if base := filepath.Base(f); base != segmentName(uint64(i+1)) {
			t.Errorf("segment %d is named %s, want %s", i, base, segmentName(uint64(i+1)))
		}
	}
	if oversized != 1 {
		t.Errorf("%d segments exceed %d bytes, want only the one holding the big batch", oversized, segSize)
	}
	if total != st.Bytes {
		t.Errorf("segment files hold %d bytes, Stats().Bytes = %d", total, st.Bytes)
	}
	_, rep, got := openTest(t, Options{Dir: dir, SegmentSizeBytes: segSize})
	if diff := cmp.Diff(want, got, batchOpts); diff != "" {
		t.Errorf("replay across segments mismatch (-want +got):\n%s", diff)
	}
	if rep.Segments != len(files) {
		t.Errorf("OpenReport.Segments = %d, want %d", rep.Segments, len(files))
	}
}

func TestCloseAndLock(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := openTest(t, Options{Dir: dir})
	if _, _, err := Open(context.Background(), Options{Dir: dir}, nil); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open of a locked dir = %v, want ErrLocked", err)
	}
	// Appends racing with Close either succeed (and are stored) or get ErrClosed.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored []string
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("c%d-%d", w, i)
				_, err := l.Append(context.Background(), Batch{Events: []graph.Event{testEvent(id, i)}})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Append = %v, want nil or ErrClosed", err)
					return
				}
				mu.Lock()
				stored = append(stored, id)
				mu.Unlock()
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); l.Stats().Events < 50 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // let the writers get going
	}
	mustClose(t, l)
	wg.Wait()
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if _, err := l.Append(context.Background(), testBatch("late", 0, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	_, _, batches := openTest(t, Options{Dir: dir})
	got := map[string]bool{}
	for _, b := range batches {
		for _, ev := range b.Events {
			got[ev.ID] = true
		}
	}
	for _, id := range stored {
		if !got[id] {
			t.Fatalf("event %s acknowledged before Close is missing after reopen", id)
		}
	}
	if len(got) != len(stored) {
		t.Errorf("reopen has %d events, %d were acknowledged", len(got), len(stored))
	}
}

func TestAppendRejects(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := openTest(t, Options{Dir: dir})
	bad := testEvent("bad", 1)
	bad.Type = graph.EdgeNone
	huge := graph.Entity{Type: graph.NodeAd, ID: "huge", Text: strings.Repeat("x", MaxBatchBytes)}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		b    Batch
		want error
	}{
		{"invalid event", context.Background(), Batch{Events: []graph.Event{testEvent("ok", 0), bad}}, ErrInvalidBatch},
		{"invalid entity", context.Background(), Batch{Entities: []graph.Entity{{Type: graph.NodeAd}}}, ErrInvalidBatch},
		{"too large", context.Background(), Batch{Entities: []graph.Entity{huge}}, ErrBatchTooLarge},
		{"canceled", canceled, testBatch("c", 1, 1), context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if res, err := l.Append(tc.ctx, tc.b); !errors.Is(err, tc.want) {
				t.Errorf("Append = %+v, %v; want %v", res, err, tc.want)
			}
		})
	}
	if st := l.Stats(); st.Batches != 0 || st.Bytes != headerSize {
		t.Errorf("rejected batches were written: %+v", st)
	}
	if res := mustAppend(t, l, Batch{}); res != (AppendResult{}) {
		t.Errorf("Append(empty) = %+v, want zero", res)
	}
}

func TestOpenReplayError(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := openTest(t, Options{Dir: dir})
	mustAppend(t, l, testBatch("a", 1, 1))
	mustClose(t, l)
	errStop := errors.New("stop")
	if _, _, err := Open(context.Background(), Options{Dir: dir}, func(Batch) error { return errStop }); !errors.Is(err, errStop) {
		t.Fatalf("Open with failing replay = %v, want %v", err, errStop)
	}
	// The failed Open released the lock.
	openTest(t, Options{Dir: dir})
}

// TestConflicts (issue 48, defect 3): an event id repeated with a
// different payload, after a restart or within one batch, fails the whole
// batch with a *ConflictError naming the event, its id and what differs;
// nothing of the batch is stored or remembered, so that the corrected
// batch is then stored. AppendReplicated keeps the first payload and
// counts the conflict instead.
func TestConflicts(t *testing.T) {
	ev := func(id string, ts int64, mod func(*graph.Event)) graph.Event {
		e := testEvent(id, 1)
		e.TS = ts
		if mod != nil {
			mod(&e)
		}
		return e
	}
	base := ev("a", 1000, nil)
	tests := []struct {
		name       string
		before     []graph.Event // stored, then the log is reopened
		events     []graph.Event
		replicated bool
		want       AppendResult
		wantErr    *ConflictError
	}{
		{"same payload is a duplicate", []graph.Event{base}, []graph.Event{ev("n", 5, nil), base}, false, AppendResult{Events: 1, Duplicates: 1}, nil},
		{"other ts", []graph.Event{base}, []graph.Event{ev("n", 5, nil), ev("a", 2000, nil)}, false, AppendResult{},
			&ConflictError{Index: 1, ID: "a", Fields: []string{"ts"}}},
		{"other dst and weight", []graph.Event{base}, []graph.Event{ev("a", 1000, func(e *graph.Event) { e.Dst.ID = "other"; e.Weight = 3 })}, false, AppendResult{},
			&ConflictError{Index: 0, ID: "a", Fields: []string{"dst", "weight"}}},
		{"other type", []graph.Event{base}, []graph.Event{ev("a", 1000, func(e *graph.Event) { e.Type = graph.EdgePurchase })}, false, AppendResult{},
			&ConflictError{Index: 0, ID: "a", Fields: []string{"type"}}},
		{"within one batch", nil, []graph.Event{ev("n", 5, nil), ev("b", 1, nil), ev("b", 2, nil)}, false, AppendResult{},
			&ConflictError{Index: 2, ID: "b", Fields: []string{"ts"}}},
		{"same payload within one batch", nil, []graph.Event{ev("b", 1, nil), ev("b", 1, nil)}, false, AppendResult{Events: 1, Duplicates: 1}, nil},
		{"replicated keeps the first", []graph.Event{base}, []graph.Event{ev("n", 5, nil), ev("a", 2000, nil)}, true, AppendResult{Events: 1, Conflicts: 1}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _, _ := openTest(t, Options{Dir: dir, NoSync: true})
			if tc.before != nil {
				mustAppend(t, l, Batch{Events: tc.before})
			}
			mustClose(t, l) // the payloads' fingerprints must come back from replay
			l, _, _ = openTest(t, Options{Dir: dir, NoSync: true})
			appendFn := l.Append
			if tc.replicated {
				appendFn = l.AppendReplicated
			}
			got, err := appendFn(context.Background(), Batch{Events: tc.events})
			got.Seq = 0
			if tc.wantErr == nil {
				if err != nil || got != tc.want {
					t.Fatalf("Append = %+v, %v; want %+v", got, err, tc.want)
				}
				mustClose(t, l)
				return
			}
			var ce *ConflictError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) {
				t.Fatalf("Append error = %v, want a *ConflictError", err)
			}
			// Fields come from 6-bit hashes of each part under a seed drawn
			// per process: a part that differs is missed 1 time in 64, so
			// only what is named must differ (TestDiffering checks the
			// naming itself).
			if ce.Index != tc.wantErr.Index || ce.ID != tc.wantErr.ID || !isSubset(ce.Fields, tc.wantErr.Fields) {
				t.Errorf("conflict %+v, want %+v (fields a subset of those)", ce, tc.wantErr)
			}
			if st := l.Stats(); st.Events != 0 {
				t.Errorf("%d events stored from a refused batch", st.Events)
			}
			// Nothing of the refused batch is remembered: without the
			// conflicting event it is stored whole.
			fixed := slices.Delete(slices.Clone(tc.events), ce.Index, ce.Index+1)
			if res, err := l.Append(context.Background(), Batch{Events: fixed}); err != nil || res.Duplicates != 0 && tc.before == nil {
				t.Errorf("the batch without its conflicting event: %+v, %v", res, err)
			}
			mustClose(t, l)
		})
	}
}

// isSubset reports whether every element of sub is in of.
func isSubset(sub, of []string) bool {
	for _, x := range sub {
		if !slices.Contains(of, x) {
			return false
		}
	}
	return true
}

// TestDiffering checks how a conflict names what differs: the parts whose
// 6 bits of hash differ in two fingerprints, in printFields order, and
// none when only the whole-payload hash differs.
func TestDiffering(t *testing.T) {
	part := func(i int, v uint64) uint64 { return (v & 63) << (34 + 6*i) }
	for _, tc := range []struct {
		name string
		a, b uint64
		want []string
	}{
		{"same", part(1, 5) | 7, part(1, 5) | 7, nil},
		{"whole payload only", part(1, 5) | 7, part(1, 5) | 8, nil},
		{"dst and weight", part(1, 5) | part(4, 9), part(1, 6) | part(4, 10), []string{"dst", "weight"}},
		{"src and ts", part(0, 1) | part(3, 63), part(0, 2) | part(3, 0), []string{"src", "ts"}},
		{"type", part(2, 1), part(2, 2), []string{"type"}},
	} {
		if got := differing(tc.a, tc.b); !slices.Equal(got, tc.want) {
			t.Errorf("%s: differing = %v, want %v", tc.name, got, tc.want)
		}
	}
}
