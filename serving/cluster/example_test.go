package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/serving/cluster"
)

// Example wires a replica: it applies the other replicas' batches, reloads
// every published model, and trains only while it holds the lease. It needs
// a Redis server, so it has no checked output.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cluster.New(ctx, cluster.Options{Addr: "127.0.0.1:6379", ReplicaID: "replica-1", Logger: slog.Default()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, stop := context.WithCancel(ctx)
	var g errgroup.Group
	defer func() { stop(); _ = g.Wait() }() // stop the actors before Close

	stream := c.NewStream(cluster.StreamOptions{}, func(ctx context.Context, b eventlog.Batch) error {
		fmt.Println("apply", len(b.Events), "events")
		return nil
	})
	g.Go(func() error { return stream.Run(ctx) })
	_, _ = stream.Publish(ctx, eventlog.Batch{Events: []graph.Event{{
		ID:  "e1",
		Src: graph.Ref{Type: graph.NodeUser, ID: "u1"}, Dst: graph.Ref{Type: graph.NodeAd, ID: "a1"},
		Type: graph.EdgeClick, TS: time.Now().UnixMilli(), Weight: 1,
	}}})

	reg := c.NewRegistry(cluster.RegistryOptions{})
	g.Go(func() error {
		return reg.Watch(ctx, func(m cluster.ModelInfo) { fmt.Println("load model", m.Version, "from", m.Dir) })
	})

	lease, err := c.NewLease(cluster.LeaseOptions{Name: "trainer", TTL: 15 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = lease.RunWhileLeader(ctx, func(ctx context.Context) error {
		return reg.Publish(ctx, cluster.ModelInfo{Version: "v1", Dir: "/models/v1", TrainedAt: time.Now()})
	})
}
