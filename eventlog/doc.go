// Package eventlog is the durable, embedded event log of HIR (DESIGN §2): the
// first stop of every entity upsert and event posted to the service, and the
// source from which the graph is rebuilt at start-up.
//
// The log is a directory of append-only segment files. Each record in a
// segment holds one [Batch] — the entities and events of one ingest request —
// framed with its length and a CRC-32C checksum, so a batch is replayed whole
// or not at all. The on-disk format is described in FORMAT.md.
//
// # Example
//
//	log, report, err := eventlog.Open(ctx, eventlog.Options{Dir: "data/log"},
//		func(b eventlog.Batch) error { return g.Apply(b.Entities, b.Events) })
//	if err != nil {
//		return err
//	}
//	defer log.Close()
//	if report.TruncatedBytes > 0 {
//		// a torn tail from a crash was cut off (and logged)
//	}
//	res, err := log.Append(ctx, eventlog.Batch{Events: evs})
//	// res.Duplicates events were already stored and were dropped.
//
// # Sections
//
// Group commit: any number of goroutines may call [Log.Append] concurrently.
// A single writer goroutine collects every queued batch, writes them with one
// write call, issues one fsync, and only then acknowledges them all. Append
// returns after the fsync (or with an error), so an acknowledged batch
// survives a crash of the process or of the machine. [Options.NoSync] skips
// the fsync (tests and benchmarks).
//
// Idempotency: an event with a non-empty ID that is already stored, or that
// repeats inside the queued batches, with the same payload (src, dst, type,
// ts, weight) is dropped and counted in [AppendResult.Duplicates]; with a
// different payload it fails its batch whole with a [*ConflictError]
// ([ErrConflict]) naming the event and what differs ([Log.AppendReplicated],
// for batches another replica stored, drops it instead and counts it in
// [AppendResult.Conflicts]). The seen ids and their payloads' 64-bit
// fingerprints live in memory (24 bytes per id) and are rebuilt by replay
// or read from the checkpoint.
// Entities are upserts and are never dropped.
//
// Checkpoint: [Log.Checkpoint] writes the log's deduplication ids and the
// caller's state (for HIR, the graph store) as of the last committed batch
// into one file of the directory, atomically; [Open] with
// [Options.Restore] reads it back and replays only the batches after it.
// A checkpoint Open cannot use (bad checksum, missing segment, state the
// caller refuses) is skipped with a warning and the whole log is replayed.
//
// Recovery: [Open] replays every segment in order. A torn tail — an
// incomplete last write at the end of the last segment (short header or
// record) that no valid batch follows — is cut off, logged with slog.Warn
// and reported in [OpenReport]. A last record written whole but damaged
// (bad checksum, undecodable payload) is corruption: its bytes are moved
// aside into a file of the log directory (OpenReport.MovedAside), it is cut,
// and Open logs an error and goes on. Damage anywhere else, including damage in
// the last segment followed by a valid batch, is a [*CorruptError]
// ([ErrCorrupt]) naming the file and offset: Open fails and changes
// nothing. [Check] lists the damage and [Repair] rewrites the damaged
// segments keeping every valid batch.
package eventlog
