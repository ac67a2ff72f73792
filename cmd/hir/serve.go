package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/retrieval"
	"github.com/hir-ads/hir/serving"
	"github.com/hir-ads/hir/serving/cluster"
)

// errRedisUnreachable is returned when --redis does not answer at start.
var errRedisUnreachable = errors.New("--redis: Redis does not answer")

// serveConfig is what serve runs with; `hir serve` fills it from flags and
// `hir demo` builds one.
type serveConfig struct {
	dataDir    string
	addr       string
	apiKeys    []string
	readAuth   bool
	trainEvery time.Duration // 0: train only on POST /v1/model/train
	train      model.TrainConfig
	// keepModels is how many model versions DIR/models keeps after each
	// accepted training round (0: every version).
	keepModels int
	// redis, when set, makes this process one replica of a service sharing
	// that Redis (serving.Server.JoinCluster); replicaID (default
	// hostname-PORT) and redisPrefix (default "hir:") go with it.
	redis       string
	replicaID   string
	redisPrefix string
	// leaseTTL is the trainer lease's time to live (0: 15 s).
	leaseTTL time.Duration
	// ratePerSecond and rateBurst shape the per-client token bucket (0:
	// serving's defaults; a negative rate disables limiting).
	ratePerSecond float64
	rateBurst     int
	// maxInFlight and maxQueueWait shape admission control (0: serving's
	// defaults, 64 and 50ms; a negative maxInFlight turns it off).
	maxInFlight  int
	maxQueueWait time.Duration
	// checkpointEvery is serving.Options.CheckpointEvery.
	checkpointEvery time.Duration
	// maxClockSkew is how far ahead of the server clock an event may be
	// dated (0: serving's default, 1h; negative: no limit).
	maxClockSkew time.Duration
	// embedBatch and narrowView shape request-time embedding
	// (retrieval.Options.EmbedBatch.Max and NarrowRequestView).
	embedBatch int
	narrowView bool
	// errorBand is the token index's index.SearchOptions.ErrorBand.
	errorBand float64
	// init lets serve create a data directory that does not exist (and
	// start on an empty one); without it a missing directory is an error.
	init bool
	// addrFile, when set, receives the listen address once the listener
	// is open (written whole: a reader never sees part of it).
	addrFile string
	// debugAddr, when set, is the address of a second listener serving
	// Go's profiles (net/http/pprof) under /debug/pprof/.
	debugAddr string
	// prior shapes the ads' engagement priors and their weight in the
	// re-rank.
	prior priorFlags
	// ready, when set, runs in its own goroutine once the listener is open
	// and the stored model (if any) is published; serve waits for it
	// before returning.
	ready func(ctx context.Context, srv *serving.Server, addr net.Addr)
}

// build returns the build options of the served generations.
func (cfg *serveConfig) build(logger *slog.Logger) retrieval.BuildOptions {
	return retrieval.BuildOptions{Logger: logger, Search: index.SearchOptions{ErrorBand: float32(cfg.errorBand)}}
}

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "serve", "--data DIR [--init] [--addr 127.0.0.1:8080] [--max-clock-skew 1h] [--api-key K ...] [--read-auth] [--train-every D] [--train-steps N] [--redis ADDR [--replica-id ID] [--redis-prefix P]]")
	cfg := serveConfig{prior: defaultPriorFlags()}
	fs.StringVar(&cfg.dataDir, "data", "", "data directory (event log in DIR/log, models in DIR/models) (required)")
	fs.StringVar(&cfg.addr, "addr", defaultAddr, "listen address (loopback by default; give \":8080\" or HOST:PORT to listen on other interfaces)")
	fs.DurationVar(&cfg.maxClockSkew, "max-clock-skew", serving.DefaultMaxClockSkew, "refuse events dated more than this ahead of the server clock (negative: no limit)")
	fs.Func("api-key", "bearer API key accepted on writes and admin endpoints (repeatable; also env HIR_API_KEYS, comma separated)", func(s string) error {
		cfg.apiKeys = append(cfg.apiKeys, s)
		return nil
	})
	fs.BoolVar(&cfg.init, "init", false, "create the data directory when it does not exist and serve it empty (without --init a missing directory is an error: a typo would serve nothing)")
	fs.StringVar(&cfg.addrFile, "addr-file", "", "once listening, write the listen address (HOST:PORT) to this file, whole (for scripts that give --addr 127.0.0.1:0)")
	fs.BoolVar(&cfg.readAuth, "read-auth", false, "require an API key on read endpoints too")
	fs.DurationVar(&cfg.trainEvery, "train-every", 0, "run a background training round on this period (e.g. 1h); 0: only on POST /v1/model/train")
	fs.IntVar(&cfg.train.Steps, "train-steps", model.DefaultSteps, "optimisation steps of each background training round")
	fs.IntVar(&cfg.train.Pairs, "train-pairs", 0, "engagement events per training step (0: model default; small values train small worlds fast)")
	fs.Uint64Var(&cfg.train.Seed, "seed", 1, "training seed")
	fs.IntVar(&cfg.train.Model.Spectral, "train-spectral", 0, "spectral factors appended to the embeddings of each background training round's model, as hir train --spectral (0: model default, 128; -1 off)")
	fs.IntVar(&cfg.keepModels, "keep-models", defaultKeepModels, "model versions kept in DIR/models after each accepted training round, the serving one always (0: keep every version)")
	fs.StringVar(&cfg.redis, "redis", "", "Redis address (host:port or redis:// URL) shared by the replicas of one service: event stream, model registry, trainer lease")
	fs.StringVar(&cfg.replicaID, "replica-id", "", "this replica's id in the cluster, unique and stable across restarts (default: hostname-PORT)")
	fs.StringVar(&cfg.redisPrefix, "redis-prefix", cluster.DefaultPrefix, "prefix of every Redis key this service uses")
	fs.Float64Var(&cfg.ratePerSecond, "rate-limit", 0, "requests per second per API key or client IP (0: 1000; negative: no limit)")
	fs.IntVar(&cfg.rateBurst, "rate-burst", 0, "token-bucket burst of the rate limit (0: 2000)")
	fs.IntVar(&cfg.maxInFlight, "max-inflight", serving.DefaultMaxInFlight, "requests handled at once; more wait up to --max-queue-wait, then get 503 with Retry-After (negative: no bound)")
	fs.DurationVar(&cfg.maxQueueWait, "max-queue-wait", serving.DefaultMaxQueueWait, "how long a request waits for one of the --max-inflight slots before it is shed")
	fs.DurationVar(&cfg.checkpointEvery, "checkpoint-every", serving.DefaultCheckpointEvery, "how often to checkpoint the graph and the log's ids while events arrive (also at shutdown), so that a start replays only the log's tail; negative: never")
	fs.IntVar(&cfg.embedBatch, "embed-batch", retrieval.DefaultEmbedBatchMax, "most request-time embeddings (never-seen users, context events) of concurrent requests run in one forward call where GoMLX runs the encoder (XLA); the pure-Go backend's native forward pass embeds each in its own request (1: no batching)")
	fs.BoolVar(&cfg.narrowView, "narrow-request-view", false, "embed request-time users from the model's narrow student view (faster; answers differ from the teacher view's)")
	fs.Float64Var(&cfg.errorBand, "error-band", 0, errorBandUsage)
	fs.StringVar(&cfg.debugAddr, "debug-addr", "", "serve Go's profiles (net/http/pprof, /debug/pprof/) on this second address, e.g. 127.0.0.1:6060 (empty: off; unauthenticated, keep it on loopback)")
	cfg.prior.register(fs, "weight of the ads' engagement prior in the re-rank when a request names none")
	level := fs.String("log-level", "info", "log level: debug, info (one access-log line per request), warn, error")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := cfg.prior.check(); err != nil {
		fmt.Fprintln(e.stderr, err)
		return errUsage
	}
	if math.IsNaN(cfg.errorBand) || math.IsInf(cfg.errorBand, 0) {
		return fmt.Errorf("%w\n--error-band %v: want a finite number", errUsage, cfg.errorBand)
	}
	if cfg.embedBatch < 1 {
		return fmt.Errorf("%w\n--embed-batch %d: want at least 1", errUsage, cfg.embedBatch)
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(e.stderr, "--log-level: %v\n", err)
		return errUsage
	}
	e = &env{stdout: e.stdout, stderr: e.stderr, logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lv}))}
	if err := required(fs, "data"); err != nil {
		return err
	}
	cfg.apiKeys = append(cfg.apiKeys, envAPIKeys(os.Getenv("HIR_API_KEYS"))...)
	return serve(ctx, e, cfg)
}

// envAPIKeys splits a comma-separated key list, dropping empty entries.
func envAPIKeys(s string) []string {
	var keys []string
	for k := range strings.SplitSeq(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// serve opens the data directory, publishes the latest stored model (if
// any), attaches the background trainer and serves until ctx is done, then
// shuts down gracefully (drain, stop the trainer, flush and close the log).
func serve(ctx context.Context, e *env, cfg serveConfig) error {
	logger := e.logger
	if _, err := os.Stat(cfg.dataDir); errors.Is(err, os.ErrNotExist) && !cfg.init {
		return fmt.Errorf("%w: data directory %s does not exist: give --init to start an empty one, or make it with `hir import --src SRC --data %s` (or `hir demo`)", errNoData, cfg.dataDir, cfg.dataDir)
	}
	var cl *cluster.Client
	if cfg.redis != "" {
		var err error
		if cl, err = connectCluster(ctx, cfg, logger); err != nil {
			return err
		}
		defer cl.Close()
	}
	if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	start := time.Now()
	log, store, rep, err := serving.OpenStore(ctx, eventlog.Options{Dir: filepath.Join(cfg.dataDir, "log"), Logger: logger},
		graph.Options{Logger: logger})
	if errors.Is(err, eventlog.ErrCorrupt) {
		return fmt.Errorf("%w; refusing to start on a damaged log (nothing was changed): run `hir log check --data %s`, then `hir log repair --data %s`",
			err, cfg.dataDir, cfg.dataDir)
	}
	if err != nil {
		return err
	}
	store.Compact()
	if removed, err := model.CleanStale(cfg.dataDir); err != nil {
		return errors.Join(err, log.Close())
	} else if len(removed) > 0 {
		logger.Warn("removed what an interrupted model write left behind", "paths", removed)
	}
	logger.Info("event log replayed", "checkpoint_seq", rep.Checkpoint.Seq, "checkpoint_bytes", rep.Checkpoint.Bytes,
		"checkpoint_elapsed", rep.Checkpoint.Elapsed, "batches", rep.Batches, "events", store.NumEvents(), "elapsed", time.Since(start))
	srv, err := serving.New(serving.Options{Logger: logger, APIKeys: cfg.apiKeys, ReadAuth: cfg.readAuth,
		RatePerSecond: cfg.ratePerSecond, RateBurst: cfg.rateBurst, MaxClockSkew: cfg.maxClockSkew,
		MaxInFlight: cfg.maxInFlight, MaxQueueWait: cfg.maxQueueWait, CheckpointEvery: cfg.checkpointEvery,
		Retrieval: retrieval.Options{Rank: cfg.prior.options(), Weights: cfg.prior.weights(), CalibratedPrior: !cfg.prior.weightSet,
			Build:        cfg.build(logger),
			TextIndexDir: filepath.Join(cfg.dataDir, textIndexDir),
			EmbedBatch:   retrieval.EmbedBatchOptions{Max: cfg.embedBatch}, NarrowRequestView: cfg.narrowView}}, log, store)
	if err != nil {
		return errors.Join(fmt.Errorf("create server: %w", err), log.Close())
	}
	if err := publishStored(ctx, srv, cfg.dataDir, cfg.build(logger)); err != nil {
		return errors.Join(err, srv.Close())
	}
	if cl != nil {
		if err := srv.JoinCluster(cl, serving.ClusterOptions{Lease: cluster.LeaseOptions{TTL: cfg.leaseTTL},
			Build: cfg.build(logger), OutboxDir: filepath.Join(cfg.dataDir, outboxDir)}); err != nil {
			return errors.Join(err, srv.Close())
		}
	}
	train := cfg.train
	train.Logger = logger
	if _, err := srv.AttachTrainer(serving.TrainerOptions{
		Job: retrieval.NewTrainJob(store, retrieval.JobOptions{DataDir: cfg.dataDir, Train: train, Build: cfg.build(logger),
			Calibrate: cfg.prior.calibrate(cfg.prior.coWeight, logger), KeepVersions: cfg.keepModels}),
		Every: cfg.trainEvery,
	}); err != nil {
		return errors.Join(err, srv.Close())
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return errors.Join(fmt.Errorf("listen: %w", err), srv.Close())
	}
	warnOpenWrites(logger, cfg.apiKeys, ln.Addr())
	if cfg.addrFile != "" {
		if err := writeAddrFile(cfg.addrFile, ln.Addr()); err != nil {
			return errors.Join(err, ln.Close(), srv.Close())
		}
	}
	defer forceExitOnSecondSignal(ctx, logger)()

	var wg sync.WaitGroup
	bg, stopBG := context.WithCancel(ctx)
	defer func() { stopBG(); wg.Wait() }()
	wg.Go(func() { _ = store.RunCompactor(bg, time.Minute) })
	if cfg.debugAddr != "" {
		dln, err := listenDebug(cfg.debugAddr, logger)
		if err != nil {
			return errors.Join(err, ln.Close(), srv.Close())
		}
		wg.Go(func() { serveDebug(bg, dln, logger) })
	}
	if cfg.ready != nil {
		wg.Go(func() { cfg.ready(bg, srv, ln.Addr()) })
	}
	if err := srv.Run(ctx, ln); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("shut down cleanly")
	return nil
}

// writeAddrFile writes addr to path through a temporary file renamed into
// place, so that a script polling for path reads the whole address or
// nothing.
func writeAddrFile(path string, addr net.Addr) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("write --addr-file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("write --addr-file: %w", err), os.Remove(tmp))
	}
	return nil
}

// outboxDir is the directory of the data directory in which a replica's
// batches wait for the cluster stream while Redis is unreachable.
const outboxDir = "outbox"

// textIndexDir is the directory of the data directory that holds the
// keyword index of ad text, reopened after a clean stop and rebuilt from the
// store after any other (retrieval.Options.TextIndexDir).
const textIndexDir = "text"

// errorBandUsage documents serve's and eval's --error-band.
const errorBandUsage = "token index: a query with more than 512 ads to score scores them approximately first and exactly only those within this many estimated standard deviations of the approximation's error of the k-th best (e.g. 4; 0, the default, or negative: score every ad exactly)"

// defaultKeepModels is the default of serve's and demo's --keep-models.
const defaultKeepModels = 5

// defaultAddr is the listen address of serve and demo when none is given:
// loopback only, so that a server without API keys is not open to the
// network by accident.
const defaultAddr = "127.0.0.1:8080"

// warnOpenWrites logs, loudly, that anyone who reaches addr may write when
// no API key is configured.
func warnOpenWrites(logger *slog.Logger, keys []string, addr net.Addr) {
	if len(keys) > 0 {
		return
	}
	exposed := true
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		exposed = false
	}
	logger.Warn("!!! WRITES ARE OPEN: no API key is set, so anyone who can reach this address may ingest, overwrite ads and trigger training; set --api-key or HIR_API_KEYS !!!",
		"addr", addr.String(), "network_exposed", exposed)
}

// connectCluster connects to cfg.redis, failing with errRedisUnreachable
// when it does not answer.
func connectCluster(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*cluster.Client, error) {
	id := cfg.replicaID
	if id == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "hir"
		}
		id = host
		if _, port, err := net.SplitHostPort(cfg.addr); err == nil && port != "" && port != "0" {
			id += "-" + port
		}
	}
	if strings.Contains(id, "/") {
		return nil, fmt.Errorf("--replica-id %q: must not contain '/'", id)
	}
	cl, err := cluster.New(ctx, cluster.Options{Addr: cfg.redis, Prefix: cfg.redisPrefix, ReplicaID: id, Logger: logger})
	if errors.Is(err, cluster.ErrUnavailable) {
		return nil, fmt.Errorf("%w at %s (start Redis or fix the address; run without --redis for a single replica): %w",
			errRedisUnreachable, cfg.redis, err)
	}
	if err != nil {
		return nil, fmt.Errorf("--redis %s: %w", cfg.redis, err)
	}
	logger.Info("connected to Redis", "addr", cfg.redis, "replica", id, "prefix", cl.Prefix())
	return cl, nil
}

// publishStored loads the latest model version of dataDir, if there is one,
// and its snapshot over the server's graph — from the files persisted in
// the version's directory when they are there and usable (only the nodes
// added since are embedded), otherwise by embedding every entity and then
// persisting those files — and publishes it. A version that does not load
// because its files are damaged or missing is moved aside
// ([model.Quarantine]) and the previous one is tried. Without a model, the
// server answers retrieval with 503 until one is trained.
func publishStored(ctx context.Context, srv *serving.Server, dataDir string, build retrieval.BuildOptions) error {
	logger := build.Logger
	for {
		dir, err := model.LatestVersionDir(dataDir)
		if errors.Is(err, model.ErrNoCheckpoint) {
			logger.Warn("no model yet: retrieval answers 503 until one is trained (POST /v1/model/train or `hir train`)")
			return nil
		}
		if err != nil {
			return err
		}
		build.PersistDir = dir
		next, err := retrieval.OpenVersion(ctx, srv.Store(), dir, nil, build)
		if errors.Is(err, retrieval.ErrBadVersion) && (errors.Is(err, model.ErrCorrupt) || errors.Is(err, fs.ErrNotExist)) {
			// A damaged version is derived data: move it aside and serve
			// the previous one rather than nothing.
			moved, qerr := model.Quarantine(dir)
			if qerr != nil {
				return fmt.Errorf("load model %s: %w", dir, errors.Join(err, qerr))
			}
			logger.Error("model version damaged: moved aside, serving the previous version", "dir", dir, "moved_to", moved, "err", err)
			continue
		}
		if err != nil {
			return err
		}
		return srv.Publish(ctx, next)
	}
}

// forceExitOnSecondSignal makes a SIGINT or SIGTERM received after ctx is
// done (the first signal starts the graceful shutdown) exit the process at
// once. The returned function disarms it.
func forceExitOnSecondSignal(ctx context.Context, logger *slog.Logger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		select {
		case <-done:
		case sig := <-ch:
			logger.Error("second signal: exiting without a graceful shutdown", "signal", sig.String())
			os.Exit(130)
		}
	})
	return func() { close(done); wg.Wait() }
}
