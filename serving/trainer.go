package serving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hir-ads/hir/retrieval"
)

// TrainerOptions configures a [Trainer].
type TrainerOptions struct {
	// Job is the training round (retrieval.NewTrainJob). Required.
	Job retrieval.TrainJob
	// Every runs a round on this period; 0 runs rounds only when triggered.
	Every time.Duration
	// Timeout bounds one round (default 1h).
	Timeout time.Duration
	// Logger defaults to the server's logger.
	Logger *slog.Logger
}

// Trainer is the background training actor attached to a [Server]: it runs
// a round on a schedule or on [Trainer.Trigger], one at a time, and
// publishes the generation a round returns (caught up with what was
// ingested during the round: [retrieval.Engine.Publish]). Safe for concurrent use.
type Trainer struct {
	opts    TrainerOptions
	srv     *Server
	logger  *slog.Logger
	trigger chan struct{}

	busy     atomic.Bool   // a round is requested or running
	lossBits atomic.Uint64 // math.Float64bits of the last loss; NaN when none
	rounds   atomic.Int64  // finished rounds (any outcome)

	mtx     sync.Mutex
	lastErr error // mtx must be held
}

// AttachTrainer creates the server's trainer; [Server.Run] runs it and
// POST /v1/model/train triggers it.
func (s *Server) AttachTrainer(opts TrainerOptions) (*Trainer, error) {
	if opts.Job == nil {
		return nil, fmt.Errorf("%w: trainer without a job", ErrBadOptions)
	}
	if opts.Every < 0 {
		return nil, fmt.Errorf("%w: negative trainer period", ErrBadOptions)
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = s.logger
	}
	t := &Trainer{opts: opts, srv: s, logger: opts.Logger.With("component", "trainer"),
		trigger: make(chan struct{}, 1)}
	t.lossBits.Store(math.Float64bits(math.NaN()))
	s.trainer.Store(t)
	return t, nil
}

// Trigger asks for a round now. It returns ErrTrainingInProgress when a
// round is running or already requested.
func (t *Trainer) Trigger() error {
	if !t.busy.CompareAndSwap(false, true) {
		return ErrTrainingInProgress
	}
	t.trigger <- struct{}{} // never blocks: only the holder of busy sends
	return nil
}

// Running reports whether a round is in progress or requested.
func (t *Trainer) Running() bool { return t.busy.Load() }

// Rounds returns the number of finished rounds, whatever their outcome.
func (t *Trainer) Rounds() int64 { return t.rounds.Load() }

// LastLoss returns the training loss of the last successful round.
func (t *Trainer) LastLoss() (float64, bool) {
	l := math.Float64frombits(t.lossBits.Load())
	return l, !math.IsNaN(l)
}

// LastErr returns the error of the last round, nil if it succeeded.
func (t *Trainer) LastErr() error {
	t.mtx.Lock()
	defer t.mtx.Unlock()
	return t.lastErr
}

// Run runs rounds until ctx is done (the actor's run function; cancelling
// ctx is its interrupt). A round in progress is cancelled through its
// context. Run returns nil when ctx is done.
func (t *Trainer) Run(ctx context.Context) error {
	var tick <-chan time.Time
	if t.opts.Every > 0 {
		tk := time.NewTicker(t.opts.Every)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.trigger: // the sender holds busy for us
		case <-tick:
			if !t.busy.CompareAndSwap(false, true) {
				continue
			}
		}
		_ = t.round(ctx) // logged and kept for LastErr
	}
}

// RunOnce runs one round synchronously and publishes its generation when it
// succeeds. It returns the round's error (also kept for LastErr).
func (t *Trainer) RunOnce(ctx context.Context) error {
	if !t.busy.CompareAndSwap(false, true) {
		return ErrTrainingInProgress
	}
	return t.round(ctx)
}

// round runs one round; the caller holds busy, which round releases.
func (t *Trainer) round(ctx context.Context) error {
	defer t.busy.Store(false)
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	ctx, span := t.srv.tel.tracer.Start(ctx, "train")
	defer span.End()
	start := time.Now()
	prev := t.srv.engine.Current()
	next, loss, err := t.opts.Job(ctx, prev)
	outcome := "published"
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		outcome = "cancelled" // shutdown; a timeout is a failure
		t.logger.Info("training round cancelled", "err", err, "elapsed", time.Since(start))
	case errors.Is(err, retrieval.ErrRegressed):
		outcome = "rejected"
		t.logger.Info("candidate model rejected", "err", err, "elapsed", time.Since(start))
	case err != nil:
		outcome = "failed"
		t.logger.Error("training round failed", "err", err, "elapsed", time.Since(start))
	case next == nil:
		outcome, err = "failed", errors.New("training job returned no generation")
	default:
		if err = t.srv.Publish(ctx, next); err != nil {
			outcome = "failed"
			t.logger.Error("publish trained generation", "version", next.Version(), "err", err)
			break
		}
		t.lossBits.Store(math.Float64bits(loss))
		t.srv.announce(ctx, next)
		t.logger.Info("training round published", "version", next.Version(), "loss", loss, "elapsed", time.Since(start))
	}
	span.SetAttributes(attribute.String("hir.outcome", outcome))
	t.srv.tel.trainRuns.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	t.mtx.Lock()
	t.lastErr = err
	t.mtx.Unlock()
	t.rounds.Add(1)
	return err
}
