package eventlog

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// sharedData returns the shared data directory (HIR_SHARED_DATA, default
// ../../shared/data from this package) or skips the test.
func sharedData(t testing.TB, sub string) string {
	dir := os.Getenv("HIR_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	dir = filepath.Join(dir, sub)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared data not available: %v", err)
	}
	return dir
}

// movieLensEvents reads MovieLens-100K ratings as rating events, user -> product.
func movieLensEvents(t testing.TB) []graph.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(sharedData(t, "movielens-100k"), "u.data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []graph.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			t.Fatalf("u.data line %d: %q", len(evs)+1, sc.Text())
		}
		rating, err1 := strconv.Atoi(fields[2])
		ts, err2 := strconv.ParseInt(fields[3], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("u.data line %d: %q", len(evs)+1, sc.Text())
		}
		evs = append(evs, graph.Event{
			ID:     "ml:" + fields[0] + ":" + fields[1],
			Src:    graph.Ref{Type: graph.NodeUser, ID: fields[0]},
			Dst:    graph.Ref{Type: graph.NodeProduct, ID: fields[1]},
			Type:   graph.EdgeInterested,
			TS:     ts * 1000,
			Weight: float32(rating),
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestMovieLensIngest ingests all 100,000 MovieLens ratings from 4 writers in
// batches of 500, reopens, and re-ingests a slice to check deduplication.
func TestMovieLensIngest(t *testing.T) {
	evs := movieLensEvents(t)
	if len(evs) != 100_000 {
		t.Fatalf("read %d ratings, want 100000", len(evs))
	}
	dir := t.TempDir()
	l, _, _ := openTest(t, Options{Dir: dir, SegmentSizeBytes: 1 << 20})
	const batch, writers = 500, 4
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for lo := w * batch; lo < len(evs); lo += writers * batch {
				hi := min(lo+batch, len(evs))
				res, err := l.Append(context.Background(), Batch{Events: evs[lo:hi]})
				if err != nil || res.Events != hi-lo || res.Duplicates != 0 {
					t.Errorf("Append(ratings %d..%d) = %+v, %v", lo, hi, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := l.Stats()
	mustClose(t, l)
	t.Logf("100k ratings: %d bytes (%.1f bytes/event) in %d segments, %d commits",
		st.Bytes, float64(st.Bytes)/float64(len(evs)), st.Segments, st.Commits)

	l, rep, batches := openTest(t, Options{Dir: dir, SegmentSizeBytes: 1 << 20})
	seen := make(map[string]bool, len(evs))
	for _, b := range batches {
		for _, ev := range b.Events {
			seen[ev.ID] = true
		}
	}
	if rep.Events != len(evs) || len(seen) != len(evs) || rep.Segments != st.Segments {
		t.Errorf("reopen: report %+v, %d distinct ids; want %d events in %d segments", rep, len(seen), len(evs), st.Segments)
	}
	res := mustAppend(t, l, Batch{Events: evs[1000:3000]})
	if res.Seq != 0 || res.Duplicates != 2000 {
		t.Errorf("re-ingesting 2000 ratings = %+v, want all duplicates", res)
	}
	fresh := evs[0]
	fresh.ID = "ml:new"
	if res := mustAppend(t, l, Batch{Events: []graph.Event{fresh}}); res.Events != 1 {
		t.Errorf("Append(new rating) = %+v", res)
	}
}
