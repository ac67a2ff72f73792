package serving

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/retrieval"
	"github.com/hir-ads/hir/serving/middleware"
)

// Server is the HIR REST server: it implements [api.ServerInterface] over an
// event log and a retrieval engine (package retrieval), which owns the
// graph store and the served generation. Safe for concurrent use.
type Server struct {
	opts      Options
	logger    *slog.Logger
	log       *eventlog.Log
	store     *graph.Store
	tel       *telemetry
	limiter   *middleware.Limiter
	admission *middleware.Admission // nil: no bound on requests in flight
	// bodyBudget bounds the bytes of request bodies held at once (read,
	// waiting for a slot or being handled); nil: no bound.
	bodyBudget *semaphore.Weighted
	// drainCtx ends when the server starts to drain (drain): body reads
	// in progress are cut short.
	drainCtx  context.Context
	drain     context.CancelFunc
	keyHashes [][sha256.Size]byte
	handler   http.Handler

	closeOnce sync.Once
	closeErr  error

	engine   *retrieval.Engine
	trainer  atomic.Pointer[Trainer]
	repl     atomic.Pointer[replication] // nil outside a cluster
	draining atomic.Bool
	// ingestHold is held for reading by each ingestion (log append and
	// graph apply), for writing by a checkpoint.
	ingestHold sync.RWMutex
	// publishFailedAt is the time (unix ns) of the last failed publication
	// to the cluster stream, 0 after a success (see clusterWritable).
	publishFailedAt atomic.Int64
}

var _ api.ServerInterface = (*Server)(nil)

// New returns a server that appends to log and applies to store. The server
// takes ownership of log: [Server.Close] (or the end of [Server.Run]) closes
// it. store must hold what log holds (see [OpenStore]).
func New(opts Options, log *eventlog.Log, store *graph.Store) (*Server, error) {
	if err := opts.applyDefaults(); err != nil {
		return nil, err
	}
	if log == nil || store == nil {
		return nil, fmt.Errorf("%w: nil log or store", ErrBadOptions)
	}
	s := &Server{opts: opts, logger: opts.Logger.With("component", "serving"), log: log, store: store}
	for _, k := range opts.APIKeys {
		s.keyHashes = append(s.keyHashes, sha256.Sum256([]byte(k)))
	}
	if len(s.keyHashes) == 0 {
		s.logger.Warn("no API keys configured: write and admin endpoints are open to anyone")
	}
	if opts.RatePerSecond > 0 {
		s.limiter = middleware.NewLimiter(opts.RatePerSecond, opts.RateBurst, opts.MaxRateKeys)
	}
	s.admission = middleware.NewAdmission(opts.MaxInFlight, opts.MaxQueueWait)
	s.bodyBudget = middleware.NewBodyBudget(opts.MaxInFlight, opts.MaxBodyBytes)
	s.drainCtx, s.drain = context.WithCancel(context.Background())
	tel, err := newTelemetry(opts.TracerProvider, s)
	if err != nil {
		return nil, err
	}
	ropts := opts.Retrieval
	if ropts.Logger == nil {
		ropts.Logger = opts.Logger
	}
	if s.engine, err = retrieval.NewEngine(store, ropts); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	s.tel = tel
	s.handler = s.routes()
	return s, nil
}

// routes builds the chi router: middleware first, then the generated routes.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.DeadlineBody(s.opts.BodyReadTimeout), middleware.RequestID, middleware.Observe(s.tel.tracer, s.tel.reqDuration, s.logger),
		middleware.Recoverer(s.writeProblem), middleware.Identify(s.keyHashes),
		middleware.RateLimit(s.limiter, func(r *http.Request) bool { return probeRoutes[r.URL.Path] }, s.writeProblem),
		middleware.Auth(len(s.keyHashes) > 0, s.needKey, s.writeProblem),
		middleware.ReadBody(middleware.BodyOptions{MaxBytes: s.opts.MaxReadBodyBytes, MaxLargeBytes: s.opts.MaxBodyBytes,
			Large: func(r *http.Request) bool { return ingestRoutes[r.Method+" "+r.URL.Path] }, Budget: s.bodyBudget, Drain: s.drainCtx},
			s.writeProblem),
		middleware.Admit(s.admission, func(r *http.Request) bool { return unadmittedRoutes[r.URL.Path] },
			func(ctx context.Context) { s.tel.shed.Add(ctx, 1) }, s.writeProblem),
		middleware.Timeout(s.opts.RequestTimeout, s.writeProblem))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeProblem(w, r, notFoundf("no route for %s %s", r.Method, clip(r.URL.Path)))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if r.Match(chi.NewRouteContext(), m, req.URL.Path) {
				allow = append(allow, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		s.writeProblem(w, req, fmt.Errorf("%s %s: %w", req.Method, clip(req.URL.Path), ErrMethodNotAllowed))
	})
	r.Get(uiPrefix, s.serveUI)
	r.Get(uiPrefix+"/*", s.serveUI)
	return api.HandlerWithOptions(s, api.ChiServerOptions{
		BaseRouter:       r,
		ErrorHandlerFunc: s.paramError,
	})
}

// paramError answers a path or query parameter the generated wrapper could
// not bind.
func (s *Server) paramError(w http.ResponseWriter, r *http.Request, err error) {
	var pf *api.InvalidParamFormatError
	if errors.As(err, &pf) {
		err = badRequestf("parameter %s: invalid value", pf.ParamName)
	}
	s.writeProblem(w, r, err)
}

// Handler returns the server's HTTP handler (router and middleware).
func (s *Server) Handler() http.Handler { return s.handler }

// Store returns the graph store the server applies ingested batches to.
func (s *Server) Store() *graph.Store { return s.store }

// Engine returns the retrieval engine the server answers from.
func (s *Server) Engine() *retrieval.Engine { return s.engine }

// Served returns the generation served now, or nil before the first.
func (s *Server) Served() *retrieval.Served { return s.engine.Current() }

// Publish serves next to new requests once it has caught up with what was
// ingested since it was built ([retrieval.Engine.Publish]); requests in
// flight keep what they loaded. next must not be modified afterwards.
func (s *Server) Publish(ctx context.Context, next *retrieval.Served) error {
	return s.engine.Publish(ctx, next)
}

// Run serves on ln until ctx is done, running the attached trainer beside
// it (in a cluster, see [Server.JoinCluster]: the stream consumer, the model
// registry watch, and the trainer only while this replica leads), then shuts down gracefully: it stops accepting, drains in-flight
// requests for up to Options.ShutdownTimeout, stops the trainer and closes
// the event log (flushing it). It returns nil after a clean shutdown.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		s.logger.Info("serving", "addr", ln.Addr().String())
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		s.startDrain()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			_ = hs.Close()
			return fmt.Errorf("shut down http server: %w", err)
		}
		return nil
	})
	g.Go(func() error { return s.runCheckpoints(gctx) })
	if !s.runCluster(gctx, g.Go) {
		if t := s.trainer.Load(); t != nil {
			g.Go(func() error { return t.Run(gctx) })
		}
	}
	err := g.Wait()
	if cerr := s.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// Close releases the server's resources: it closes the event log and the
// meter provider. It does not wait for in-flight requests; use Run for a
// graceful shutdown.
// Close is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

// startDrain marks the server as draining: new work is refused and body
// reads in progress are cut short.
func (s *Server) startDrain() {
	s.draining.Store(true)
	s.drain()
}

func (s *Server) close() error {
	s.startDrain()
	// A checkpoint now makes the next start replay nothing; in-flight
	// ingestions finish first.
	s.checkpointIfBehind(context.Background())
	var errs []error
	if err := s.log.Close(); err != nil && !errors.Is(err, eventlog.ErrClosed) {
		errs = append(errs, fmt.Errorf("close event log: %w", err))
	}
	if err := s.engine.Close(); err != nil {
		errs = append(errs, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.tel.close(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// gauges implements gaugeSource for the metrics scrape.
func (s *Server) gauges() gaugeValues {
	g := gaugeValues{inFlight: -1}
	if s.admission != nil {
		g.inFlight = int64(s.admission.InFlight())
	}
	if cur := s.engine.Current(); cur != nil {
		g.ready = true
		g.modelVersion = cur.Version()
		g.trainedAtSec = float64(cur.TrainedAt().UnixMilli()) / 1000
		g.indexSize = int64(cur.IndexSize())
	}
	if t := s.trainer.Load(); t != nil {
		g.trainerLoss, g.hasLoss = t.LastLoss()
		g.training = t.Running()
	}
	return g
}

// Healthz answers 200 while the process is up.
func (s *Server) Healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok"})
}

// Readyz answers 200 once a generation is served, 503 before, while
// draining, while the event log cannot write (a full disk: the problem
// says so; reads keep being served), and in a cluster while Redis does not
// answer a ping within 300 ms (writes are refused then; reads are served).
func (s *Server) Readyz(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.draining.Load():
		s.writeProblem(w, r, ErrShuttingDown)
	case s.log.Err() != nil:
		s.writeProblem(w, r, ErrWritesFailing)
	case !s.clusterReachable(r.Context()):
		s.writeProblem(w, r, ErrClusterUnavailable)
	case s.engine.Current() == nil:
		s.writeProblem(w, r, ErrNoSnapshot)
	default:
		writeJSON(w, http.StatusOK, api.Health{Status: "ready"})
	}
}

// clusterReachable reports whether Redis answers a ping within 300 ms;
// true outside a cluster.
func (s *Server) clusterReachable(ctx context.Context) bool {
	r := s.repl.Load()
	if r == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	return r.client.Ping(ctx) == nil
}

// Metrics serves the Prometheus exposition of the server's OpenTelemetry
// metrics.
func (s *Server) Metrics(w http.ResponseWriter, r *http.Request) {
	s.tel.metrics.ServeHTTP(w, r)
}

// GetModel reports the serving model and the trainer's state.
func (s *Server) GetModel(w http.ResponseWriter, r *http.Request) {
	var st api.ModelStatus
	if t := s.trainer.Load(); t != nil {
		running := t.Running()
		st.Training = &running
	}
	if m, err := s.engine.Model(); err == nil {
		st.Ready = true
		st.Version = &m.Version
		at := m.TrainedAt.UTC()
		st.TrainedAt = &at
		st.IndexSize = &m.IndexSize
		if len(m.Metrics) > 0 {
			mm := make(map[string]float32, len(m.Metrics))
			for k, v := range m.Metrics {
				mm[k] = float32(v)
			}
			st.Metrics = &mm
		}
		points := make([]api.TrainingPoint, len(m.History))
		for i, p := range m.History {
			points[i] = api.TrainingPoint{Version: p.Version, Step: p.Step, Loss: p.Loss, ValLoss: p.ValLoss, ValAuc: p.ValAUC}
			if p.UsageEntropy != nil {
				e := p.UsageEntropy
				points[i].UsageEntropy = &e
			}
		}
		st.History = &points
		if m.UsageEntropy != nil {
			st.UsageEntropy = &m.UsageEntropy
		}
	}
	writeJSON(w, http.StatusOK, st)
}

// TrainModel triggers a background training run: 202 when it starts, 409
// when one is already running or, in a cluster, when another replica holds
// the trainer lease (the problem names it), 503 when no trainer is attached.
func (s *Server) TrainModel(w http.ResponseWriter, r *http.Request) {
	t := s.trainer.Load()
	if t == nil {
		s.writeProblem(w, r, ErrNoTrainer)
		return
	}
	if repl := s.repl.Load(); repl != nil && !repl.leading.Load() {
		s.writeProblem(w, r, s.leaderProblem(r.Context(), repl))
		return
	}
	if err := t.Trigger(); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	msg := "training started; poll GET /v1/model for the new version"
	writeJSON(w, http.StatusAccepted, api.TrainAccepted{Accepted: true, Message: &msg})
}
