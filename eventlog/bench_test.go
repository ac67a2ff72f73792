package eventlog

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// BenchmarkAppend measures group commit. One op is a round in which each of
// the writers appends one batch concurrently; events/s counts stored events.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, writers := range []int{1, 8, 64} {
			for _, batch := range []int{1, 100} {
				mode := "sync"
				if !sync {
					mode = "nosync"
				}
				b.Run(fmt.Sprintf("%s/writers=%d/batch=%d", mode, writers, batch), func(b *testing.B) {
					benchAppend(b, !sync, writers, batch)
				})
			}
		}
	}
}

func benchAppend(b *testing.B, noSync bool, writers, batch int) {
	l, _, err := Open(context.Background(), Options{Dir: b.TempDir(), NoSync: noSync}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	// Pre-build every writer's batch; ids are rewritten per round so that
	// nothing is deduplicated.
	batches := make([][]graph.Event, writers)
	for w := range batches {
		for i := range batch {
			batches[w] = append(batches[w], testEvent("", i))
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	round := 0
	for b.Loop() {
		var wg sync.WaitGroup
		for w := range writers {
			evs := batches[w]
			for i := range evs {
				evs[i].ID = fmt.Sprintf("r%d-w%d-%d", round, w, i)
			}
			wg.Go(func() {
				if _, err := l.Append(ctx, Batch{Events: evs}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		round++
	}
	st := l.Stats()
	if st.Events != uint64(round*writers*batch) {
		b.Fatalf("stored %d events, want %d", st.Events, round*writers*batch)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(st.Events)/sec, "events/s")
	b.ReportMetric(float64(st.Syncs)/float64(round), "fsyncs/op")
	b.ReportMetric(float64(st.Syncs)/float64(st.Batches), "fsyncs/append")
	b.ReportMetric(float64(st.Bytes)/float64(st.Events), "bytes/event")
}
