package eventlog_test

import (
	"context"
	"fmt"
	"os"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
)

func Example() {
	dir, err := os.MkdirTemp("", "eventlog-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	log, _, err := eventlog.Open(ctx, eventlog.Options{Dir: dir}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	click := graph.Event{
		ID:     "evt-1",
		Src:    graph.Ref{Type: graph.NodeUser, ID: "u42"},
		Dst:    graph.Ref{Type: graph.NodeAd, ID: "ad7"},
		Type:   graph.EdgeClick,
		TS:     1_700_000_000_000,
		Weight: 1,
	}
	ad := graph.Entity{Type: graph.NodeAd, ID: "ad7", Text: "trail running shoes"}
	res, _ := log.Append(ctx, eventlog.Batch{Entities: []graph.Entity{ad}, Events: []graph.Event{click}})
	fmt.Printf("stored seq=%d entities=%d events=%d\n", res.Seq, res.Entities, res.Events)
	res, _ = log.Append(ctx, eventlog.Batch{Events: []graph.Event{click}}) // a retry
	fmt.Printf("retry: seq=%d duplicates=%d\n", res.Seq, res.Duplicates)
	if err := log.Close(); err != nil {
		fmt.Println(err)
		return
	}

	log, report, err := eventlog.Open(ctx, eventlog.Options{Dir: dir}, func(b eventlog.Batch) error {
		fmt.Printf("replay seq=%d: %s %s -> %s\n", b.Seq, b.Events[0].Type, b.Events[0].Src, b.Events[0].Dst)
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer log.Close()
	fmt.Printf("replayed %d batch(es), %d event(s), truncated %d bytes\n", report.Batches, report.Events, report.TruncatedBytes)
	// Output:
	// stored seq=1 entities=1 events=1
	// retry: seq=0 duplicates=1
	// replay seq=1: click user:u42 -> ad:ad7
	// replayed 1 batch(es), 1 event(s), truncated 0 bytes
}
