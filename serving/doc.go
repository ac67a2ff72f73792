// Package serving is HIR's REST layer (DESIGN §8): a [Server] implementing
// the chi server interface generated from openapi.yaml ([api.ServerInterface])
// over the event log and a retrieval engine (package retrieval), plus
// ingestion, the background trainer actor and scale-out replicas.
//
// # Example
//
//	log, store, _, err := serving.OpenStore(ctx, eventlog.Options{Dir: "data/log"}, graph.Options{})
//	if err != nil {
//		return err
//	}
//	srv, err := serving.New(serving.Options{Logger: logger, APIKeys: keys,
//		Retrieval: retrieval.Options{Rank: rank.DefaultOptions(), Weights: rank.DefaultWeights()}}, log, store)
//	if err != nil {
//		return err
//	}
//	if _, err := srv.AttachTrainer(serving.TrainerOptions{
//		Job:   retrieval.NewTrainJob(store, retrieval.JobOptions{DataDir: "data"}),
//		Every: time.Hour,
//	}); err != nil {
//		return err
//	}
//	ln, err := net.Listen("tcp", ":8080")
//	if err != nil {
//		return err
//	}
//	return srv.Run(ctx, ln) // until ctx is done, then a graceful shutdown
//
// # Sections
//
// Middleware, outermost first, each a func(http.Handler) http.Handler
// closure: request id (X-Request-Id), observation (one server span per
// request continuing a W3C traceparent, the latency histogram by route, one
// slog access-log line), recoverer (a panic becomes a 500 problem),
// identification (API key, else client IP), token-bucket rate limiting per
// identity (429 with Retry-After), bearer API-key auth for POST
// /v1/entities, /v1/events and /v1/model/train (and reads with
// [Options.ReadAuth], except the probes, /metrics, the API description and
// the /ui page's files), body size limit (413), and a per-request deadline.
//
// Errors: every failure goes through one writeProblem, which maps the
// package's sentinels ([ErrNoSnapshot], [ErrBadRequest], [ErrNotFound], ...),
// JSON decoding errors and the graph's validation errors to an RFC 9457
// application/problem+json body. A batch item's error is an [ItemError]:
// its message names the item (`events[3]: src: unknown node type: "usr"`)
// and the problem's "item" member holds its index. A 5xx detail never
// carries internal error text.
//
// Ingestion: POST /v1/entities and /v1/events decode the whole batch
// strictly into graph.Entity / graph.Event (unknown fields refused), append
// it to the event log as one batch (atomic, fsynced group commit) and only
// then apply it through the engine (retrieval.Engine.Apply: graph store,
// keyword index, fresh ads embedded into the live index, priors and
// co-engagement); events are idempotent by id (the log and the store drop
// the same duplicates).
//
// Retrieval: POST /v1/retrieve is decode -> retrieval.Engine.Retrieve ->
// encode; GET interests and similar read retrieval.Engine.Vector. Before
// the first generation is published they answer 503 and /readyz is not
// ready; ingestion works regardless. Spans: keywords, embed, candidates,
// rerank (from the retrieval's stage timings).
//
// Explorer: the interest explorer page (GET /ui, its files embedded from
// ui/ and open like /docs: they hold no data) reads paged and sampled views
// of the served state: GET /v1/tokens (a level's tokens, or a token's
// children, largest first), GET /v1/tokens/{token}/members (the live
// index's postings from a cursor), GET /v1/entities/{type}/{id}/events (an
// entity's out-events, newest first), GET /v1/map and POST /v1/map/project
// (a PCA basis of package explore, fitted once per generation on at most
// 4,096 ad embeddings), and the training history in GET /v1/model (read once
// per generation from the versions' metrics.json).
//
// Training: a [Trainer] attached with [Server.AttachTrainer] runs a
// retrieval.TrainJob on a schedule or on POST /v1/model/train (202; 409
// while one runs) and publishes the generation it returns through
// retrieval.Engine.Publish, which catches it up with what was ingested
// during the round. Requests in flight keep what they loaded.
//
// Replicas: [Server.JoinCluster] makes the server one replica of a service
// sharing a Redis (package serving/cluster): ingested batches are published
// to a shared stream after the local append and the other replicas' batches
// are ingested through the same local path; the trainer runs only on the
// holder of the leader lease (elsewhere POST /v1/model/train answers 409
// naming it), and the models it publishes are announced in the registry and
// hot-swapped by the others from their checkpoint directory, which must be
// on a filesystem every replica reads.
//
// Shutdown: [Server.Run] serves until its context is done, then drains
// in-flight requests under [Options.ShutdownTimeout], stops the trainer and
// closes the event log.
//
// Telemetry: OpenTelemetry metrics exported with the Prometheus exporter at
// GET /metrics: hir_http_request_duration_seconds, hir_retrieve_candidates,
// hir_retrieve_stage_duration_seconds, hir_ingest_items_total,
// hir_trainer_runs_total, hir_cluster_published_total (outcome label),
// hir_cluster_applied_total, hir_cluster_model_reloads_total, hir_index_size, hir_model_trained_at_seconds
// (version label), hir_trainer_loss and hir_ready.
package serving
