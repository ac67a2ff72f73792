// Package cluster is HIR's scale-out layer (DESIGN §8): with --redis, the
// replicas share one Redis for the event stream, the model registry, the
// embedding cache and the trainer's leader lease. Without it, HIR runs
// embedded in one process and this package is not used.
//
// # Example
//
//	c, err := cluster.New(ctx, cluster.Options{Addr: "redis:6379", ReplicaID: hostname, Logger: logger})
//	if err != nil {
//		return err // wraps cluster.ErrUnavailable when Redis does not answer
//	}
//	defer c.Close()
//
//	// Events: publish what this replica ingested, apply what the others did.
//	stream := c.NewStream(cluster.StreamOptions{}, func(ctx context.Context, b eventlog.Batch) error {
//		_, err := log.Append(ctx, b) // idempotent by event id
//		if err != nil {
//			return err
//		}
//		return store.Apply(b.Entities, b.Events)
//	})
//	g.Go(func() error { return stream.Run(ctx) })
//	// in the ingest handler, after the local append:
//	_, err = stream.Publish(ctx, batch)
//
//	// Models: reload on every replica when the trainer publishes.
//	reg := c.NewRegistry(cluster.RegistryOptions{})
//	g.Go(func() error { return reg.Watch(ctx, func(m cluster.ModelInfo) { reload(m.Dir) }) })
//
//	// Training: only the lease holder trains and publishes.
//	lease, err := c.NewLease(cluster.LeaseOptions{Name: "trainer", TTL: 15 * time.Second})
//	g.Go(func() error { return lease.RunWhileLeader(ctx, trainer.Run) })
//
//	// Cold-start embeddings computed by one replica serve the others.
//	cache := c.NewCache(cluster.CacheOptions{TTL: time.Hour})
//	vecs, err := cache.MGet(ctx, modelVersion, refs) // nil where not cached
//
// # Sections
//
// Keys: every key and channel starts with [Options.Prefix] ("hir:" by
// default): stream:<name> (the event stream), model:latest, model:v:<version>
// (a hash), model:seq (the publication counter), model:updates (pub/sub channel), lease:<name>, and
// emb:<version>:<type>:<id>.
//
// Event stream ([Stream]): a Redis Stream trimmed to about
// [StreamOptions.MaxLen] entries. An entry holds the batch in the event
// log's binary encoding ([eventlog.AppendBatch]) and the publishing
// replica's id. Each replica reads through its own consumer group
// ("replica:<id>"), so every replica sees every batch; it skips its own,
// hands the others' to the [ApplyFunc] in stream order and acknowledges
// them (XACK) only after the function succeeds. Delivery is at least once:
// after a failure or a restart, entries read but not acknowledged are
// delivered again first, so the function must be idempotent (the event
// log's event-id deduplication makes it so). A replica down for longer than
// the stream retains loses entries; [StreamStats.Gap] reports it.
// Undecodable entries are logged and dropped.
//
// Model registry ([Registry]): Publish numbers the publication (INCR
// model:seq), writes the version's hash with that sequence, points
// model:latest at it and announces it on model:updates, in one Lua script.
// Watch calls its function with the current model at start and then only
// with models of a larger sequence, so a replica never goes back to an
// older model; it also polls model:latest so a pub/sub message lost across
// a reconnect only delays a reload.
//
// Leader lease ([Lease]): SET NX PX with a token unique to the contender;
// renewal and release run Lua scripts that check the token, so a replica
// that lost the lease cannot extend or drop someone else's.
// [Lease.RunWhileLeader] renews every TTL/3 and cancels the leader's
// context, with cause [ErrLeaseLost], when the lease is taken over or has
// not been renewed for 2/3 of the TTL, then contends again. A paused process
// may still act briefly after losing the lease, so the work it guards must
// tolerate a rare overlap (publishing a model twice is harmless).
//
// Embedding cache ([Cache]): one key per (model version, node) holding the
// vector as little-endian float32s ([AppendVector], [DecodeVector]), with a
// TTL; MGet and MSet take one round trip for a batch.
//
// Errors: [ErrUnavailable], [ErrNoModel], [ErrLeaseLost], [ErrCorrupt],
// [ErrInvalid], wrapped with the failing operation. Long-running loops
// (Stream.Run, Registry.Watch, Lease.RunWhileLeader) log Redis errors,
// retry with backoff and return nil when their context is cancelled.
package cluster
