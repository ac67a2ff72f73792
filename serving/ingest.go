package serving

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/retrieval"
)

// OpenStore opens (or creates) the event log in opts.Dir and replays it into
// a new graph store: the state a [Server] starts from. Where the log has a
// checkpoint ([Server.Checkpoint]) the store is read from it and only the
// batches after it are replayed (opts.Restore is set here). The caller owns
// the returned log (hand it to [New]).
func OpenStore(ctx context.Context, opts eventlog.Options, storeOpts graph.Options) (*eventlog.Log, *graph.Store, eventlog.OpenReport, error) {
	store := graph.NewStore(storeOpts)
	opts.Restore = func(r io.Reader) (func(), error) {
		st, err := graph.ReadCheckpoint(r, storeOpts)
		if err != nil {
			return nil, err
		}
		return func() { store = st }, nil
	}
	log, rep, err := eventlog.Open(ctx, opts, func(b eventlog.Batch) error {
		_, err := retrieval.ApplyToStore(store, b.Entities, b.Events)
		return err
	})
	if err != nil {
		return nil, nil, rep, fmt.Errorf("open event log: %w", err)
	}
	return log, store, rep, nil
}

// PostEntities upserts a batch of entities, all or nothing.
func (s *Server) PostEntities(w http.ResponseWriter, r *http.Request) {
	body, err := readJSONBody(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	ents, err := decodeEntities(body, s.opts.MaxBatchItems)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.Ingest(r.Context(), eventlog.Batch{Entities: ents})
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// PostEvents appends a batch of events, all or nothing, idempotent by id.
func (s *Server) PostEvents(w http.ResponseWriter, r *http.Request) {
	body, err := readJSONBody(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	evs, err := decodeEvents(body, s.opts.MaxBatchItems)
	if err == nil {
		err = checkEventTimes("events", evs, s.maxEventTS(), s.opts.MaxClockSkew)
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.Ingest(r.Context(), eventlog.Batch{Events: evs})
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// Ingest stores b durably as one event-log batch (atomic, fsynced group
// commit), then applies it to the graph store, then indexes the ads it
// touched into the live index when a model is served. The batch must be
// valid; an invalid one is refused whole before anything is stored. In a
// cluster ([Server.JoinCluster]) the stored batch is then published to the
// shared event stream. A failed publication (Redis down) is logged and
// counted (hir.cluster.published{outcome="error"}) and fails the ingestion
// with [ErrClusterUnavailable] (503, Retry-After): the batch is not
// acknowledged, but it is stored here and queued in the outbox
// (ClusterOptions.OutboxDir), which publishes it once Redis answers, so the
// other replicas get it with or without a retry (a retry is deduplicated by
// event id).
// While publications fail, new batches are refused before they are stored
// unless Redis answers a ping.
func (s *Server) Ingest(ctx context.Context, b eventlog.Batch) (api.IngestResult, error) {
	if err := s.clusterWritable(ctx); err != nil {
		return api.IngestResult{}, err
	}
	res, err := s.ingest(ctx, b, false)
	if err != nil {
		return res, err
	}
	var seq uint64
	if res.Seq != nil {
		seq = uint64(*res.Seq)
	}
	if err := s.publishBatch(ctx, b, seq); err != nil {
		s.publishFailedAt.Store(time.Now().UnixNano())
		if qerr := s.repl.Load().outbox.add(b); qerr != nil {
			s.logger.Error("outbox: a stored batch is not queued for the cluster stream; the other replicas get it only when the client retries",
				"seq", seq, "err", qerr)
		}
		return api.IngestResult{}, fmt.Errorf("%w: %w", ErrClusterUnavailable, err)
	}
	s.publishFailedAt.Store(0)
	return res, nil
}

// clusterWritable refuses a write with ErrClusterUnavailable while the
// last publication to the cluster stream failed and Redis does not answer
// a ping (bounded by a short timeout); outside a cluster it is nil.
func (s *Server) clusterWritable(ctx context.Context) error {
	r := s.repl.Load()
	if r == nil || s.publishFailedAt.Load() == 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := r.client.Ping(pctx); err != nil {
		return fmt.Errorf("%w: %w", ErrClusterUnavailable, err)
	}
	return nil
}

// ingest is the local ingestion path shared by [Server.Ingest] and the
// batches of other replicas (replicated): an event whose id is stored with
// a different payload fails a client's batch with 409 (ErrEventConflict),
// and is dropped from a replicated one, so that the first payload stored
// here stays.
func (s *Server) ingest(ctx context.Context, b eventlog.Batch, replicated bool) (api.IngestResult, error) {
	if s.draining.Load() {
		return api.IngestResult{}, ErrShuttingDown
	}
	ctx, span := s.tel.tracer.Start(ctx, "ingest")
	defer span.End()
	span.SetAttributes(attribute.Int("hir.entities", len(b.Entities)), attribute.Int("hir.events", len(b.Events)))
	appendFn := s.log.Append
	if replicated {
		appendFn = s.log.AppendReplicated
	}
	// A checkpoint waits for the batch to be in the log and the graph both.
	s.ingestHold.RLock()
	defer s.ingestHold.RUnlock()
	res, err := appendFn(ctx, b)
	if err != nil {
		var conflict *eventlog.ConflictError
		if errors.As(err, &conflict) {
			return api.IngestResult{}, &ItemError{Field: "events", Index: conflict.Index, Err: &statusError{sentinel: ErrEventConflict,
				msg: fmt.Sprintf("id %s is already stored with a different %s; a replay must repeat the stored event, a new event needs a new id",
					strconv.Quote(clip(conflict.ID)), conflict.What())}}
		}
		if errors.Is(err, eventlog.ErrInvalidBatch) {
			return api.IngestResult{}, &statusError{sentinel: ErrBadRequest, msg: err.Error()}
		}
		if errors.Is(err, eventlog.ErrBatchTooLarge) {
			return api.IngestResult{}, &statusError{sentinel: ErrBodyTooLarge, msg: "batch too large for one log record"}
		}
		return api.IngestResult{}, fmt.Errorf("append batch: %w", err)
	}
	// The batch is durable: apply it even if the client has gone away, so the
	// in-memory graph and the served live part match the log.
	actx := context.WithoutCancel(ctx)
	if added, err := s.engine.Apply(actx, b.Entities, b.Events); err != nil {
		if added == nil { // the graph refused it
			s.logger.Error("stored batch failed to apply to the graph", "seq", res.Seq, "err", err)
			return api.IngestResult{}, fmt.Errorf("apply batch %d: %w", res.Seq, err)
		}
		// The batch is in the graph; the live part catches up at the next
		// publication.
		s.logger.Warn("update the served live part", "seq", res.Seq, "err", err)
	}
	s.tel.ingested.Add(actx, int64(res.Entities), metric.WithAttributes(attribute.String("kind", "entity")))
	s.tel.ingested.Add(actx, int64(res.Events), metric.WithAttributes(attribute.String("kind", "event")))
	s.tel.ingested.Add(actx, int64(res.Duplicates), metric.WithAttributes(attribute.String("kind", "duplicate")))
	if res.Conflicts > 0 {
		s.tel.ingested.Add(actx, int64(res.Conflicts), metric.WithAttributes(attribute.String("kind", "conflict")))
		s.logger.Warn("a replicated batch repeats stored event ids with other payloads; the stored ones stay",
			"seq", res.Seq, "conflicts", res.Conflicts)
	}
	out := api.IngestResult{Entities: res.Entities, Events: res.Events, Duplicates: res.Duplicates}
	if res.Seq != 0 {
		seq := int64(res.Seq)
		out.Seq = &seq
	}
	s.logger.LogAttrs(ctx, slog.LevelDebug, "ingested", slog.Uint64("seq", res.Seq),
		slog.Int("entities", res.Entities), slog.Int("events", res.Events), slog.Int("duplicates", res.Duplicates))
	return out, nil
}

// Checkpoint writes the event log's checkpoint with the graph store as its
// state ([eventlog.Log.Checkpoint], [graph.Store.WriteCheckpoint]):
// the next [OpenStore] reads the store from it and replays only the
// batches stored after it. Ingestion waits while it runs (the store must
// hold exactly what the log holds); reads do not.
func (s *Server) Checkpoint(ctx context.Context) (eventlog.CheckpointInfo, error) {
	s.ingestHold.Lock()
	defer s.ingestHold.Unlock()
	info, err := s.log.Checkpoint(ctx, s.store.WriteCheckpoint)
	if err != nil {
		return info, fmt.Errorf("checkpoint: %w", err)
	}
	return info, nil
}

// checkpointIfBehind writes a checkpoint when the log holds batches the
// last one lacks; a failure is logged (the log alone still holds every
// batch).
func (s *Server) checkpointIfBehind(ctx context.Context) {
	st := s.log.Stats()
	if s.opts.CheckpointEvery < 0 || st.LastSeq <= st.CheckpointSeq || s.log.Err() != nil {
		return
	}
	if _, err := s.Checkpoint(ctx); err != nil {
		s.logger.Error("write checkpoint; the next start replays more of the log", "err", err)
	}
}

// runCheckpoints writes a checkpoint every Options.CheckpointEvery while
// batches arrive, until ctx is done.
func (s *Server) runCheckpoints(ctx context.Context) error {
	if s.opts.CheckpointEvery < 0 {
		return nil
	}
	tk := time.NewTicker(s.opts.CheckpointEvery)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C:
			s.checkpointIfBehind(ctx)
		}
	}
}
