package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newTestLease(t *testing.T, prefix, replica string, ttl time.Duration) *Lease {
	t.Helper()
	l, err := newTestClient(t, prefix, replica).NewLease(LeaseOptions{Name: "trainer", TTL: ttl})
	if err != nil {
		t.Fatalf("NewLease: %v", err)
	}
	return l
}

func TestLeaseOwnership(t *testing.T) {
	type step struct {
		who  string // "a" or "b"
		op   string // acquire, renew, release, wait
		want bool
	}
	const ttl = 300 * time.Millisecond
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "mutual exclusion", steps: []step{
			{"a", "acquire", true}, {"b", "acquire", false}, {"a", "acquire", true}, {"b", "acquire", false},
		}},
		{name: "renew and release only by owner", steps: []step{
			{"a", "acquire", true}, {"b", "renew", false}, {"b", "release", false},
			{"a", "renew", true}, {"b", "acquire", false}, {"a", "release", true},
			{"a", "release", false}, {"a", "renew", false}, {"b", "acquire", true},
		}},
		{name: "expiry takeover", steps: []step{
			{"a", "acquire", true}, {"b", "acquire", false}, {"_", "wait", true},
			{"b", "acquire", true}, {"a", "renew", false}, {"a", "acquire", false}, {"a", "release", false},
			{"b", "renew", true},
		}},
		{name: "renew keeps it past the ttl", steps: []step{
			{"a", "acquire", true}, {"_", "half", true}, {"a", "renew", true}, {"_", "half", true},
			{"b", "acquire", false}, {"_", "wait", true}, {"b", "acquire", true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := testPrefix(t)
			leases := map[string]*Lease{"a": newTestLease(t, prefix, "a", ttl), "b": newTestLease(t, prefix, "b", ttl)}
			for i, s := range tc.steps {
				var got bool
				var err error
				switch s.op {
				case "acquire":
					got, err = leases[s.who].Acquire(t.Context())
				case "renew":
					got, err = leases[s.who].Renew(t.Context())
				case "release":
					got, err = leases[s.who].Release(t.Context())
				case "wait":
					time.Sleep(ttl + 50*time.Millisecond)
					got = true
				case "half":
					time.Sleep(ttl * 6 / 10)
					got = true
				}
				if err != nil {
					t.Fatalf("step %d: %s %s: %v", i, s.who, s.op, err)
				}
				if got != s.want {
					t.Fatalf("step %d: %s %s = %v, want %v", i, s.who, s.op, got, s.want)
				}
			}
		})
	}
}

func TestLeaseHolder(t *testing.T) {
	prefix := testPrefix(t)
	a := newTestLease(t, prefix, "replica-a", time.Second)
	if h, err := a.Holder(t.Context()); err != nil || h != "" {
		t.Fatalf("Holder() of a free lease = %q, %v; want \"\", nil", h, err)
	}
	if ok, err := a.Acquire(t.Context()); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	if h, err := a.Holder(t.Context()); err != nil || h != "replica-a" {
		t.Errorf("Holder() = %q, %v; want replica-a", h, err)
	}
}

func TestLeaseContention(t *testing.T) {
	prefix := testPrefix(t)
	const n = 8
	var won atomic.Int32
	var wg sync.WaitGroup
	leases := make([]*Lease, n)
	for i := range leases {
		leases[i] = newTestLease(t, prefix, fmt.Sprint("r", i), time.Second)
	}
	for _, l := range leases {
		wg.Go(func() {
			ok, err := l.Acquire(t.Context())
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if got := won.Load(); got != 1 {
		t.Errorf("%d of %d concurrent contenders acquired the lease, want 1", got, n)
	}
}

func TestNewLeaseInvalidTTL(t *testing.T) {
	prefix := testPrefix(t)
	if _, err := newTestClient(t, prefix, "a").NewLease(LeaseOptions{TTL: time.Millisecond}); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewLease(ttl 1ms) = %v, want ErrInvalid", err)
	}
}

// runLeader runs l.RunWhileLeader with fn in a goroutine and returns its
// result channel and a cancel function.
func runLeader(t *testing.T, l *Lease, fn func(context.Context) error) (<-chan error, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		done <- l.RunWhileLeader(ctx, fn)
		close(finished)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(3 * time.Second):
			t.Error("RunWhileLeader did not return within 3s of cancellation")
		}
	})
	return done, cancel
}

func wait(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(3 * time.Second):
		t.Fatal("RunWhileLeader did not return within 3s")
		return nil
	}
}

func TestRunWhileLeaderHandover(t *testing.T) {
	prefix := testPrefix(t)
	const ttl = 300 * time.Millisecond
	var active, maxActive atomic.Int32
	var leader atomic.Value // replica id running fn
	fnFor := func(id string) func(context.Context) error {
		return func(ctx context.Context) error {
			n := active.Add(1)
			defer active.Add(-1)
			for m := maxActive.Load(); n > m && !maxActive.CompareAndSwap(m, n); m = maxActive.Load() {
			}
			leader.Store(id)
			<-ctx.Done()
			return ctx.Err()
		}
	}
	la, lb := newTestLease(t, prefix, "a", ttl), newTestLease(t, prefix, "b", ttl)
	doneA, cancelA := runLeader(t, la, fnFor("a"))
	eventually(t, 3*time.Second, "a to lead", func() bool { return leader.Load() == "a" })
	_, _ = runLeader(t, lb, fnFor("b"))
	time.Sleep(2 * ttl) // b contends while a renews
	if got := leader.Load(); got != "a" {
		t.Fatalf("leader after %v = %v, want a (renewals keep it)", 2*ttl, got)
	}
	cancelA()
	if err := wait(t, doneA); err != nil {
		t.Errorf("RunWhileLeader(a) after cancel = %v, want nil", err)
	}
	eventually(t, 3*time.Second, "b to take over", func() bool { return leader.Load() == "b" })
	if m := maxActive.Load(); m != 1 {
		t.Errorf("at most %d leaders ran at once, want 1", m)
	}
}

func TestRunWhileLeaderLoss(t *testing.T) {
	prefix := testPrefix(t)
	const ttl = 300 * time.Millisecond
	l := newTestLease(t, prefix, "a", ttl)
	var runs atomic.Int32
	causes := make(chan error, 4)
	_, cancel := runLeader(t, l, func(ctx context.Context) error {
		runs.Add(1)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	eventually(t, 3*time.Second, "first run", func() bool { return runs.Load() == 1 })
	// Another process steals the key, as after a long pause.
	if err := l.c.rdb.Set(t.Context(), l.key, "intruder/x", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, ErrLeaseLost) {
			t.Errorf("fn's context cause = %v, want ErrLeaseLost", cause)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("fn's context not cancelled after the lease was taken")
	}
	// Once the intruder's lease expires, a leads again.
	eventually(t, 3*time.Second, "second run", func() bool { return runs.Load() == 2 })
	cancel()
}

func TestRunWhileLeaderReturns(t *testing.T) {
	prefix := testPrefix(t)
	l := newTestLease(t, prefix, "a", time.Second)
	errJob := errors.New("job failed")
	tests := []struct {
		name string
		ret  error
	}{
		{name: "error", ret: errJob},
		{name: "nil", ret: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			done, _ := runLeader(t, l, func(context.Context) error { return tc.ret })
			if err := wait(t, done); !errors.Is(err, tc.ret) || (tc.ret == nil && err != nil) {
				t.Errorf("RunWhileLeader = %v, want %v", err, tc.ret)
			}
			if h, err := l.Holder(t.Context()); err != nil || h != "" {
				t.Errorf("Holder() after fn returned = %q, %v; want released", h, err)
			}
		})
	}
}
