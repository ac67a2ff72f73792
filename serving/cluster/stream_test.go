package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
)

// testBatch returns a batch with one entity and one event whose ids are
// derived from origin and i.
func testBatch(origin string, i int) eventlog.Batch {
	user := graph.Ref{Type: graph.NodeUser, ID: fmt.Sprintf("%s-u%d", origin, i)}
	return eventlog.Batch{
		Seq:      uint64(i),
		Entities: []graph.Entity{{Type: graph.NodeUser, ID: user.ID, Attrs: map[string]string{"origin": origin}}},
		Events: []graph.Event{{
			ID:     fmt.Sprintf("%s-e%d", origin, i),
			Src:    user,
			Dst:    graph.Ref{Type: graph.NodeAd, ID: "ad1"},
			Type:   graph.EdgeClick,
			TS:     1_700_000_000_000 + int64(i),
			Weight: 1,
		}},
	}
}

// recorder is an ApplyFunc that records applied batches; fail, when set,
// decides whether an apply call fails.
type recorder struct {
	mu      sync.Mutex
	applied []eventlog.Batch
	calls   map[string]int // event id -> apply calls
	fail    func(eventID string, call int) bool
}

func (r *recorder) apply(_ context.Context, b eventlog.Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = make(map[string]int)
	}
	id := b.Events[0].ID
	r.calls[id]++
	if r.fail != nil && r.fail(id, r.calls[id]) {
		return fmt.Errorf("refuse %s", id)
	}
	r.applied = append(r.applied, b)
	return nil
}

func (r *recorder) batches() []eventlog.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.applied)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.applied)
}

// runStream runs s.Run in a goroutine; the returned stop cancels it and
// checks that Run returns nil promptly.
func runStream(t *testing.T, s *Stream) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("Run did not return within 3s of cancellation")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

var fastStream = StreamOptions{Block: 100 * time.Millisecond, RetryBackoff: 20 * time.Millisecond}

var batchCmp = cmpopts.EquateEmpty()

func pendingCount(t *testing.T, c *Client, s *Stream) int64 {
	t.Helper()
	p, err := c.rdb.XPending(t.Context(), s.key, s.group).Result()
	if err != nil {
		t.Fatalf("XPENDING: %v", err)
	}
	return p.Count
}

func TestStreamTwoReplicas(t *testing.T) {
	prefix := testPrefix(t)
	ca, cb := newTestClient(t, prefix, "a"), newTestClient(t, prefix, "b")
	var ra, rb recorder
	sa, sb := ca.NewStream(fastStream, ra.apply), cb.NewStream(fastStream, rb.apply)
	runStream(t, sa)
	runStream(t, sb)

	var fromA, fromB []eventlog.Batch
	for i := range 5 {
		b := testBatch("a", i)
		if _, err := sa.Publish(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		fromA = append(fromA, b)
	}
	for i := range 3 {
		b := testBatch("b", i)
		if _, err := sb.Publish(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		fromB = append(fromB, b)
	}
	eventually(t, 5*time.Second, "both replicas to read every batch", func() bool {
		return sa.Stats().Applied+sa.Stats().Own == 8 && sb.Stats().Applied+sb.Stats().Own == 8
	})
	time.Sleep(3 * fastStream.Block) // room for a wrong extra delivery

	if diff := cmp.Diff(fromA, rb.batches(), batchCmp); diff != "" {
		t.Errorf("B applied (-A published +B got):\n%s", diff)
	}
	if diff := cmp.Diff(fromB, ra.batches(), batchCmp); diff != "" {
		t.Errorf("A applied (-B published +A got):\n%s", diff)
	}
	for name, got := range map[string]StreamStats{"A": sa.Stats(), "B": sb.Stats()} {
		want := StreamStats{Published: 5, Applied: 3, Own: 5}
		if name == "B" {
			want = StreamStats{Published: 3, Applied: 5, Own: 3}
		}
		if got != want {
			t.Errorf("%s.Stats() = %+v, want %+v", name, got, want)
		}
	}
	if n := pendingCount(t, cb, sb); n != 0 {
		t.Errorf("B has %d unacknowledged entries, want 0", n)
	}
}

func TestStreamRetriesInOrder(t *testing.T) {
	prefix := testPrefix(t)
	ca, cb := newTestClient(t, prefix, "a"), newTestClient(t, prefix, "b")
	// The second batch fails twice before it applies.
	rb := recorder{fail: func(id string, call int) bool { return id == "a-e1" && call <= 2 }}
	sa, sb := ca.NewStream(fastStream, nil), cb.NewStream(fastStream, rb.apply)
	runStream(t, sb)
	for i := range 3 {
		if _, err := sa.Publish(t.Context(), testBatch("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "three batches applied", func() bool { return rb.count() == 3 })

	var got []string
	for _, b := range rb.batches() {
		got = append(got, b.Events[0].ID)
	}
	if want := []string{"a-e0", "a-e1", "a-e2"}; !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	rb.mu.Lock()
	calls := maps(rb.calls)
	rb.mu.Unlock()
	if want := map[string]int{"a-e0": 1, "a-e1": 3, "a-e2": 1}; !cmp.Equal(calls, want) {
		t.Errorf("apply calls = %v, want %v", calls, want)
	}
	if st := sb.Stats(); st.Failures != 2 || st.Applied != 3 {
		t.Errorf("Stats() = %+v, want 2 failures and 3 applied", st)
	}
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestStreamRestartResumes(t *testing.T) {
	prefix := testPrefix(t)
	ca := newTestClient(t, prefix, "a")
	sa := ca.NewStream(fastStream, nil)
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := sa.Publish(t.Context(), testBatch("a", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var all []string
	record := func(r *recorder) {
		for _, b := range r.batches() {
			all = append(all, b.Events[0].ID)
		}
	}

	// Life 1 of B: applies 0 and 1.
	var r1 recorder
	s1 := newTestClient(t, prefix, "b").NewStream(fastStream, r1.apply)
	stop := runStream(t, s1)
	publish(0, 2)
	eventually(t, 5*time.Second, "life 1 to apply 2 batches", func() bool { return r1.count() == 2 })
	stop()
	record(&r1)

	// Life 2: cannot apply batch 2, so 2 (and whatever was read after it)
	// stays pending when B stops.
	r2 := recorder{fail: func(id string, _ int) bool { return id == "a-e2" }}
	s2 := newTestClient(t, prefix, "b").NewStream(fastStream, r2.apply)
	stop = runStream(t, s2)
	publish(2, 4)
	eventually(t, 5*time.Second, "life 2 to fail on batch 2", func() bool { return s2.Stats().Failures > 0 })
	stop()
	record(&r2)
	cb := newTestClient(t, prefix, "b")
	if n := pendingCount(t, cb, s2); n == 0 {
		t.Fatal("no entries pending after the failed apply, want batch 2 pending")
	}

	// B is down: more batches arrive.
	publish(4, 6)

	// Life 3: gets the pending batch first, then the rest, in order.
	var r3 recorder
	s3 := cb.NewStream(fastStream, r3.apply)
	runStream(t, s3)
	eventually(t, 5*time.Second, "life 3 to apply 4 batches", func() bool { return r3.count() == 4 })
	time.Sleep(3 * fastStream.Block)
	record(&r3)

	want := []string{"a-e0", "a-e1", "a-e2", "a-e3", "a-e4", "a-e5"}
	if !slices.Equal(all, want) {
		t.Errorf("B applied %v over three lives, want %v", all, want)
	}
	if n := pendingCount(t, cb, s3); n != 0 {
		t.Errorf("%d entries pending at the end, want 0", n)
	}
}

func TestStreamStart(t *testing.T) {
	tests := []struct {
		name     string
		startNew bool
		want     []string
	}{
		{name: "history", startNew: false, want: []string{"a-e0", "a-e1"}},
		{name: "new only", startNew: true, want: []string{"a-e1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := testPrefix(t)
			sa := newTestClient(t, prefix, "a").NewStream(fastStream, nil)
			if _, err := sa.Publish(t.Context(), testBatch("a", 0)); err != nil {
				t.Fatal(err)
			}
			var rb recorder
			opts := fastStream
			opts.StartNew = tc.startNew
			sb := newTestClient(t, prefix, "b").NewStream(opts, rb.apply)
			runStream(t, sb)
			// The group exists once Run has created it.
			eventually(t, 5*time.Second, "consumer group", func() bool {
				g, err := sb.c.rdb.XInfoGroups(t.Context(), sb.key).Result()
				return err == nil && len(g) == 1
			})
			if _, err := sa.Publish(t.Context(), testBatch("a", 1)); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "batch 1", func() bool {
				bs := rb.batches()
				return len(bs) > 0 && bs[len(bs)-1].Events[0].ID == "a-e1"
			})
			var got []string
			for _, b := range rb.batches() {
				got = append(got, b.Events[0].ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("applied %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStreamDropsMalformed(t *testing.T) {
	prefix := testPrefix(t)
	var rb recorder
	sb := newTestClient(t, prefix, "b").NewStream(fastStream, rb.apply)
	sa := newTestClient(t, prefix, "a").NewStream(fastStream, nil)
	tests := []struct {
		name   string
		values []any
	}{
		{name: "undecodable", values: []any{fieldOrigin, "x", fieldBatch, "\x01\x02"}},
		{name: "no batch field", values: []any{fieldOrigin, "x"}},
	}
	for _, tc := range tests {
		if err := sa.c.rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: sa.key, Values: tc.values}).Err(); err != nil {
			t.Fatalf("%s: XADD: %v", tc.name, err)
		}
	}
	if _, err := sa.Publish(t.Context(), testBatch("a", 0)); err != nil {
		t.Fatal(err)
	}
	runStream(t, sb)
	eventually(t, 5*time.Second, "the good batch", func() bool { return rb.count() == 1 })
	if st := sb.Stats(); st.Malformed != 2 || st.Applied != 1 {
		t.Errorf("Stats() = %+v, want 2 malformed, 1 applied", st)
	}
	if n := pendingCount(t, sb.c, sb); n != 0 {
		t.Errorf("%d entries pending, want 0 (malformed ones acknowledged)", n)
	}
}

func TestStreamGap(t *testing.T) {
	// B reads batch 0, stops; batches 1 and 2 arrive; the stream is trimmed
	// to keep, then B restarts.
	tests := []struct {
		name    string
		keep    int64
		wantGap bool
		want    []string // applied after the restart
	}{
		{name: "only read entries trimmed", keep: 2, wantGap: false, want: []string{"a-e1", "a-e2"}},
		{name: "unread entry trimmed", keep: 1, wantGap: true, want: []string{"a-e2"}},
		{name: "all trimmed", keep: 0, wantGap: true, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := testPrefix(t)
			sa := newTestClient(t, prefix, "a").NewStream(fastStream, nil)
			cb := newTestClient(t, prefix, "b")
			var r1 recorder
			s1 := cb.NewStream(fastStream, r1.apply)
			stop := runStream(t, s1)
			if _, err := sa.Publish(t.Context(), testBatch("a", 0)); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "batch 0", func() bool { return r1.count() == 1 })
			stop()
			if s1.Stats().Gap {
				t.Error("Gap before any trimming")
			}
			for i := 1; i < 3; i++ {
				if _, err := sa.Publish(t.Context(), testBatch("a", i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := sa.c.rdb.XTrimMaxLen(t.Context(), sa.key, tc.keep).Err(); err != nil {
				t.Fatal(err)
			}
			var r2 recorder
			s2 := cb.NewStream(fastStream, r2.apply)
			runStream(t, s2)
			eventually(t, 5*time.Second, "the retained batches", func() bool { return r2.count() == len(tc.want) })
			time.Sleep(2 * fastStream.Block)
			if got := s2.Stats().Gap; got != tc.wantGap {
				t.Errorf("Stats().Gap = %v, want %v", got, tc.wantGap)
			}
			var got []string
			for _, b := range r2.batches() {
				got = append(got, b.Events[0].ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("applied %v after restart, want %v", got, tc.want)
			}
		})
	}
}

func TestStreamMaxLen(t *testing.T) {
	prefix := testPrefix(t)
	s := newTestClient(t, prefix, "a").NewStream(StreamOptions{MaxLen: 10}, nil)
	const n = 400
	for i := range n {
		if _, err := s.Publish(t.Context(), testBatch("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.c.rdb.XLen(t.Context(), s.key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got < 10 || got >= n {
		t.Errorf("XLEN after %d publishes with MaxLen 10 = %d, want in [10, %d)", n, got, n)
	}
}

func TestStreamRunWithoutApply(t *testing.T) {
	prefix := testPrefix(t)
	s := newTestClient(t, prefix, "a").NewStream(fastStream, nil)
	if err := s.Run(t.Context()); !errors.Is(err, ErrInvalid) {
		t.Errorf("Run without apply = %v, want ErrInvalid", err)
	}
}

func TestIDLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"0-0", "0-0", false},
		{"0-0", "1-0", true},
		{"5-3", "5-4", true},
		{"10-0", "9-9", false},
		{"", "1-1", true},
	}
	for _, tc := range tests {
		if got := idLess(tc.a, tc.b); got != tc.want {
			t.Errorf("idLess(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
