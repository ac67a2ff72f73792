package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRegistryPublishGet(t *testing.T) {
	prefix := testPrefix(t)
	reg := newTestClient(t, prefix, "trainer").NewRegistry(RegistryOptions{})
	if _, err := reg.Latest(t.Context()); !errors.Is(err, ErrNoModel) {
		t.Fatalf("Latest on an empty registry = %v, want ErrNoModel", err)
	}
	trained := time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	tests := []struct {
		name string
		info ModelInfo
	}{
		{name: "with metrics", info: ModelInfo{Version: "v1", Dir: "/models/v1", TrainedAt: trained,
			Metrics: map[string]float64{"recall@50": 0.4125, "ndcg@10": 1.0 / 3}}},
		{name: "no metrics", info: ModelInfo{Version: "v2", Dir: "/models/v2", TrainedAt: trained.Add(time.Hour)}},
		{name: "zero time", info: ModelInfo{Version: "2026-03-04T07:00:00Z", Dir: "s3://b/m"}},
		{name: "republish drops old metrics", info: ModelInfo{Version: "v1", Dir: "/models/v1b", TrainedAt: trained,
			Metrics: map[string]float64{"auc": 0.75}}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := reg.Publish(t.Context(), tc.info); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			want := tc.info
			want.Publisher = "trainer"
			want.Seq = uint64(i + 1) // one more per publication, a republished version too
			got, err := reg.Get(t.Context(), tc.info.Version)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Get(%q) (-want +got):\n%s", tc.info.Version, diff)
			}
			latest, err := reg.Latest(t.Context())
			if err != nil {
				t.Fatalf("Latest: %v", err)
			}
			if diff := cmp.Diff(want, latest); diff != "" {
				t.Errorf("Latest() (-want +got):\n%s", diff)
			}
		})
	}
	if err := reg.Publish(t.Context(), ModelInfo{Dir: "/x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Publish without version = %v, want ErrInvalid", err)
	}
	if _, err := reg.Get(t.Context(), "nope"); !errors.Is(err, ErrNoModel) {
		t.Errorf("Get(unknown) = %v, want ErrNoModel", err)
	}
}

// watcher runs Registry.Watch and records the versions it is called with.
type watcher struct {
	mu       sync.Mutex
	versions []string
	stop     func()
}

func startWatcher(t *testing.T, reg *Registry) *watcher {
	t.Helper()
	w := &watcher{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- reg.Watch(ctx, func(m ModelInfo) {
			w.mu.Lock()
			w.versions = append(w.versions, m.Version)
			w.mu.Unlock()
		})
	}()
	var once sync.Once
	w.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Watch returned %v, want nil", err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("Watch did not return within 3s of cancellation")
			}
		})
	}
	t.Cleanup(w.stop)
	return w
}

func (w *watcher) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.versions)
}

func TestRegistryWatchers(t *testing.T) {
	prefix := testPrefix(t)
	trainer := newTestClient(t, prefix, "trainer").NewRegistry(RegistryOptions{})
	publish := func(v string) {
		t.Helper()
		if err := trainer.Publish(t.Context(), ModelInfo{Version: v, Dir: "/m/" + v}); err != nil {
			t.Fatal(err)
		}
	}
	// Each watcher reads v0 as the latest model at start; once it has, every
	// later model reaches it over pub/sub only, in publication order.
	publish("v0")
	noPoll := RegistryOptions{PollInterval: time.Hour} // only pub/sub
	wa := startWatcher(t, newTestClient(t, prefix, "a").NewRegistry(noPoll))
	wb := startWatcher(t, newTestClient(t, prefix, "b").NewRegistry(noPoll))
	for name, w := range map[string]*watcher{"a": wa, "b": wb} {
		eventually(t, 5*time.Second, "watcher "+name+" to read v0", func() bool { return len(w.got()) >= 1 })
	}
	publish("v1")
	publish("v2")
	want := []string{"v0", "v1", "v2"}
	for name, w := range map[string]*watcher{"a": wa, "b": wb} {
		eventually(t, 5*time.Second, "watcher "+name, func() bool { return len(w.got()) >= len(want) })
		if got := w.got(); !slices.Equal(got, want) {
			t.Errorf("watcher %s got %v, want %v", name, got, want)
		}
	}

	// A watcher started later is called once with the current model.
	wc := startWatcher(t, newTestClient(t, prefix, "c").NewRegistry(noPoll))
	eventually(t, 5*time.Second, "late watcher", func() bool { return len(wc.got()) >= 1 })
	time.Sleep(100 * time.Millisecond)
	if got := wc.got(); !slices.Equal(got, []string{"v2"}) {
		t.Errorf("late watcher got %v, want [v2]", got)
	}
}

// TestRegistryWatchNeverGoesBack publishes while a watcher is between its
// subscription and its first read of the latest version, so the
// announcements of older versions are still queued when it has read the
// newest: it must not go back to them.
func TestRegistryWatchNeverGoesBack(t *testing.T) {
	tests := []struct {
		name    string
		publish []string
		want    []string
	}{
		{name: "two versions", publish: []string{"v1", "v2"}, want: []string{"v2"}},
		{name: "republished older version", publish: []string{"v1", "v2", "v1"}, want: []string{"v1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := testPrefix(t)
			trainer := newTestClient(t, prefix, "trainer").NewRegistry(RegistryOptions{})
			reg := newTestClient(t, prefix, "a").NewRegistry(RegistryOptions{PollInterval: time.Hour})
			reg.beforeLatest = func() {
				for _, v := range tc.publish {
					if err := trainer.Publish(t.Context(), ModelInfo{Version: v, Dir: "/m/" + v}); err != nil {
						t.Error(err)
					}
				}
			}
			w := startWatcher(t, reg)
			eventually(t, 5*time.Second, "first model", func() bool { return len(w.got()) >= 1 })
			// A marker published last: once the watcher has it, every queued
			// announcement before it has been handled.
			if err := trainer.Publish(t.Context(), ModelInfo{Version: "end", Dir: "/m/end"}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "marker", func() bool { return slices.Contains(w.got(), "end") })
			want := append(slices.Clone(tc.want), "end")
			if got := w.got(); !slices.Equal(got, want) {
				t.Errorf("watcher got %v, want %v", got, want)
			}
		})
	}
}

func TestRegistryWatchPolls(t *testing.T) {
	prefix := testPrefix(t)
	c := newTestClient(t, prefix, "a")
	reg := c.NewRegistry(RegistryOptions{PollInterval: 50 * time.Millisecond})
	w := startWatcher(t, reg)
	eventually(t, 5*time.Second, "subscriber", func() bool {
		n, err := c.rdb.PubSubNumSub(t.Context(), reg.channel).Result()
		return err == nil && n[reg.channel] == 1
	})
	// Store a version without announcing it, as if the message were lost.
	ctx := t.Context()
	if err := c.rdb.HSet(ctx, reg.versionKey("v9"), fieldVersion, "v9", fieldDir, "/m/v9").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.rdb.Set(ctx, reg.latest, "v9", 0).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "poll to find v9", func() bool { return len(w.got()) >= 1 })
	time.Sleep(150 * time.Millisecond) // several more polls: no repeat
	if got := w.got(); !slices.Equal(got, []string{"v9"}) {
		t.Errorf("watcher got %v, want [v9]", got)
	}
}
