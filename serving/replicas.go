package serving

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/retrieval"
	"github.com/hir-ads/hir/serving/cluster"
)

// ErrNotLeader is returned (wrapped, naming the leader) by POST
// /v1/model/train on a replica that does not hold the trainer lease; it
// answers 409.
var ErrNotLeader = errors.New("this replica is not the trainer leader")

// DefaultPublishTimeout bounds the publication of one ingested batch to the
// cluster's event stream.
const DefaultPublishTimeout = 5 * time.Second

// ClusterOptions configures [Server.JoinCluster]. Zero fields take the
// documented defaults.
type ClusterOptions struct {
	// Stream configures the shared event stream (see [cluster.StreamOptions]).
	Stream cluster.StreamOptions
	// Registry configures the model registry watch.
	Registry cluster.RegistryOptions
	// Lease configures the trainer's leader lease (name "trainer", TTL 15 s
	// by default).
	Lease cluster.LeaseOptions
	// Build configures the generations built from models published by other
	// replicas.
	Build retrieval.BuildOptions
	// PublishTimeout bounds the publication of one ingested batch (default
	// DefaultPublishTimeout).
	PublishTimeout time.Duration
	// OutboxDir is the directory in which the batches stored here whose
	// publication failed wait, one file each, until Redis takes them (hir
	// serve: DIR/outbox). Required.
	OutboxDir string
}

// replication is the server's membership of a cluster of replicas sharing
// one Redis (see [Server.JoinCluster]).
type replication struct {
	client   *cluster.Client
	opts     ClusterOptions
	stream   *cluster.Stream
	registry *cluster.Registry
	lease    *cluster.Lease
	outbox   *outbox
	leading  atomic.Bool
}

// JoinCluster makes the server one replica of a service sharing c's Redis.
// Call it once, before [Server.Run] and before serving requests. Then:
//
//   - every batch ingested through [Server.Ingest] is published to the
//     shared event stream after the local append (a failed publication is
//     logged, counted, queued in the outbox, which publishes it once Redis
//     is back, and answered 503: see [Server.Ingest]);
//   - Run consumes the stream and ingests the other replicas' batches
//     through the same path (append to the local log, apply to the graph,
//     index fresh ads), idempotent by event id;
//   - Run runs the attached trainer only while this replica holds the
//     leader lease, and each snapshot it publishes is announced in the
//     model registry with its checkpoint directory (retrieval.Served.Dir);
//   - Run watches the registry and hot-swaps the models the other replicas
//     publish: [model.Load] of the announced directory (which must be
//     readable here: a shared filesystem), retrieval.Open over the local
//     graph (the publisher's persisted files when they match this graph's
//     node numbering, else a full re-embedding), [Server.Publish].
//
// The server does not own c: close it after Run returns.
func (s *Server) JoinCluster(c *cluster.Client, opts ClusterOptions) error {
	if c == nil {
		return fmt.Errorf("%w: nil cluster client", ErrBadOptions)
	}
	if opts.PublishTimeout <= 0 {
		opts.PublishTimeout = DefaultPublishTimeout
	}
	if opts.OutboxDir == "" {
		return fmt.Errorf("%w: no outbox directory", ErrBadOptions)
	}
	lease, err := c.NewLease(opts.Lease)
	if err != nil {
		return fmt.Errorf("join cluster: %w", err)
	}
	ob, err := openOutbox(opts.OutboxDir, s.logger)
	if err != nil {
		return fmt.Errorf("join cluster: %w", err)
	}
	r := &replication{client: c, opts: opts, registry: c.NewRegistry(opts.Registry), lease: lease, outbox: ob}
	r.stream = c.NewStream(opts.Stream, s.applyRemote)
	if !s.repl.CompareAndSwap(nil, r) {
		return fmt.Errorf("%w: server already joined a cluster", ErrBadOptions)
	}
	s.logger.Info("joined cluster", "replica", c.ReplicaID(), "prefix", c.Prefix())
	return nil
}

// Leading reports whether this replica runs the trainer: outside a cluster
// always, in a cluster while it holds the leader lease.
func (s *Server) Leading() bool {
	r := s.repl.Load()
	return r == nil || r.leading.Load()
}

// StreamStats returns the counters of the cluster event stream, zero
// outside a cluster.
func (s *Server) StreamStats() cluster.StreamStats {
	if r := s.repl.Load(); r != nil {
		return r.stream.Stats()
	}
	return cluster.StreamStats{}
}

// runCluster starts the cluster loops on g: the stream consumer, the model
// registry watch and, when a trainer is attached, the trainer under the
// leader lease. It reports whether it started the trainer.
func (s *Server) runCluster(ctx context.Context, goFn func(func() error)) (trainerStarted bool) {
	r := s.repl.Load()
	if r == nil {
		return false
	}
	goFn(func() error { return r.stream.Run(ctx) })
	goFn(func() error {
		return r.outbox.run(ctx, time.Second, func(ctx context.Context, b eventlog.Batch) error {
			pctx, cancel := context.WithTimeout(ctx, r.opts.PublishTimeout)
			defer cancel()
			_, err := r.stream.Publish(pctx, b)
			outcome := "ok"
			if err != nil {
				outcome = "error"
			}
			s.tel.clusterPublished.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
			return err
		}, func() { s.publishFailedAt.Store(0) })
	})
	goFn(func() error { return r.registry.Watch(ctx, func(info cluster.ModelInfo) { s.hotSwap(ctx, r, info) }) })
	t := s.trainer.Load()
	if t == nil {
		return false
	}
	goFn(func() error {
		return r.lease.RunWhileLeader(ctx, func(lctx context.Context) error {
			r.leading.Store(true)
			defer r.leading.Store(false)
			s.logger.Info("leading: running the trainer", "replica", r.client.ReplicaID())
			err := t.Run(lctx)
			if ctx.Err() == nil && lctx.Err() != nil {
				s.logger.Warn("lost the trainer lease", "cause", context.Cause(lctx))
			}
			return err
		})
	})
	return true
}

// applyRemote is the stream's apply function: another replica's batch goes
// through local ingestion, without being published again.
func (s *Server) applyRemote(ctx context.Context, b eventlog.Batch) error {
	_, err := s.ingest(ctx, b, true)
	if err != nil {
		return err
	}
	s.tel.clusterApplied.Add(context.WithoutCancel(ctx), 1)
	return nil
}

// publishBatch publishes a locally stored batch to the stream; a failure
// is logged, counted and returned.
func (s *Server) publishBatch(ctx context.Context, b eventlog.Batch, seq uint64) (err error) {
	r := s.repl.Load()
	if r == nil || (len(b.Entities) == 0 && len(b.Events) == 0) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.PublishTimeout)
	defer cancel()
	outcome := "ok"
	if _, err = r.stream.Publish(ctx, b); err != nil {
		outcome = "error"
		s.logger.Error("publish ingested batch to the cluster stream; the other replicas miss it",
			"seq", seq, "entities", len(b.Entities), "events", len(b.Events), "err", err)
	}
	s.tel.clusterPublished.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	return err
}

// announce publishes a snapshot the local trainer made to the model
// registry. Failures are logged: the other replicas keep their model.
func (s *Server) announce(ctx context.Context, gen *retrieval.Served) {
	r := s.repl.Load()
	if r == nil {
		return
	}
	if gen.Dir() == "" {
		s.logger.Warn("trained generation has no checkpoint directory: not announced to the cluster", "version", gen.Version())
		return
	}
	info := cluster.ModelInfo{Version: RegistryVersion(gen.Version(), r.client.ReplicaID()), Dir: gen.Dir(),
		TrainedAt: gen.TrainedAt(), Metrics: gen.Metrics()}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.PublishTimeout)
	defer cancel()
	if err := r.registry.Publish(ctx, info); err != nil {
		s.logger.Error("announce trained model to the cluster", "version", info.Version, "err", err)
	}
}

// RegistryVersion is the version a model is announced under in the
// cluster's registry: the model's version qualified by the publishing
// replica, since each replica numbers the versions of its own data
// directory.
func RegistryVersion(modelVersion, replicaID string) string {
	return modelVersion + "@" + replicaID
}

// hotSwap loads a model announced in the registry and serves it, unless it
// is the one served already (this replica published it, or loaded it at
// start).
func (s *Server) hotSwap(ctx context.Context, r *replication, info cluster.ModelInfo) {
	dir := filepath.Clean(info.Dir)
	if cur := s.engine.Current(); cur != nil && cur.Dir() != "" && cur.Dir() == dir {
		return
	}
	start := time.Now()
	outcome := "loaded"
	defer func() {
		s.tel.clusterReloads.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	}()
	build := r.opts.Build
	build.PersistDir = "" // the directory is the publisher's: read its files (if they match this graph), never write
	next, err := retrieval.OpenVersion(ctx, s.store, dir, &retrieval.Announced{TrainedAt: info.TrainedAt, Metrics: info.Metrics}, build)
	if errors.Is(err, retrieval.ErrBadVersion) {
		outcome = "failed"
		s.logger.Error("load model announced by the cluster (model directories must be on a filesystem every replica reads)",
			"version", info.Version, "dir", dir, "publisher", info.Publisher, "err", err)
		return
	}
	if err == nil {
		err = s.Publish(ctx, next)
	}
	if err != nil {
		outcome = "failed"
		if ctx.Err() == nil {
			s.logger.Error("serve announced model", "version", info.Version, "err", err)
		}
		return
	}
	s.logger.Info("hot-swapped model from the cluster", "version", next.Version(), "seq", info.Seq, "publisher", info.Publisher,
		"dir", dir, "elapsed", time.Since(start))
}

// leaderProblem is the error of POST /v1/model/train on a non-leader.
func (s *Server) leaderProblem(ctx context.Context, r *replication) error {
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	holder, err := r.lease.Holder(hctx)
	switch {
	case err != nil:
		return &statusError{sentinel: ErrNotLeader, msg: ErrNotLeader.Error() + " (leader unknown: " + err.Error() + ")"}
	case holder == "":
		return &statusError{sentinel: ErrNotLeader, msg: ErrNotLeader.Error() + "; no replica holds the lease right now, retry shortly"}
	default:
		return &statusError{sentinel: ErrNotLeader, msg: fmt.Sprintf("%s; POST /v1/model/train to replica %q", ErrNotLeader, holder)}
	}
}
