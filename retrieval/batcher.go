package retrieval

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
)

// Defaults of request-time micro-batching (Options.EmbedBatch).
const (
	DefaultEmbedBatchMax  = 4
	DefaultEmbedBatchWait = 200 * time.Microsecond
)

// errBatcherClosed answers embeddings asked for after Engine.Close.
var errBatcherClosed = errors.New("retrieval engine closed")

// EmbedBatchOptions configures the micro-batching of request-time
// embeddings: the subgraphs of concurrent requests (never-seen users,
// context events) run through the model in one forward call, which the
// pure-Go backend runs at a higher rate per subgraph than one call each.
// A subgraph's embedding does not depend on the batch it ran in, so
// batching changes no answer.
type EmbedBatchOptions struct {
	// Max bounds the subgraphs of one forward call (default
	// DefaultEmbedBatchMax); 1 turns batching off.
	Max int
	// Wait is how long a runner that found one waiting subgraph waits for
	// more, when other requests are on their way to embedding, before it
	// runs (default DefaultEmbedBatchWait; negative: no wait). Subgraphs
	// that queue while a call runs join the next call without waiting.
	Wait time.Duration
	// Runners is the number of forward calls that may run at once
	// (default 2).
	Runners int
}

func (o *EmbedBatchOptions) applyDefaults() {
	if o.Max <= 0 {
		o.Max = DefaultEmbedBatchMax
	}
	if o.Wait == 0 {
		o.Wait = DefaultEmbedBatchWait
	}
	if o.Runners <= 0 {
		o.Runners = 2
	}
}

// embedJob is one subgraph waiting to be embedded.
type embedJob struct {
	model *model.Model
	src   model.Entities
	sg    *graph.Subgraph
	done  chan embedDone // buffered: runners never block on it
}

type embedDone struct {
	vec []float32
	err error
}

// runnerIdle is how long a runner waits for work before it exits (runners
// start again with the next job).
const runnerIdle = time.Second

// embedBatcher runs the request-time embeddings of concurrent requests in
// shared forward calls. Runners start with the first job and exit when idle
// or closed. Safe for concurrent use.
type embedBatcher struct {
	opts    EmbedBatchOptions
	in      chan *embedJob
	quit    chan struct{}
	active  atomic.Int32 // runners running
	wg      sync.WaitGroup
	closeMu sync.Mutex // held while starting a runner and by close
	closed  bool       // closeMu must be held

	calls, embedded atomic.Int64 // forward calls run and subgraphs embedded by them
	// inflight counts the requests between enter and leave: those that
	// will soon send a job. A runner waits for more jobs only when some
	// are on their way.
	inflight atomic.Int64
}

// enter marks a request that is about to embed (sample, then embed); leave
// ends it.
func (b *embedBatcher) enter() { b.inflight.Add(1) }
func (b *embedBatcher) leave() { b.inflight.Add(-1) }

func newEmbedBatcher(opts EmbedBatchOptions) *embedBatcher {
	opts.applyDefaults()
	return &embedBatcher{opts: opts, in: make(chan *embedJob, 4*opts.Max), quit: make(chan struct{})}
}

// ensureRunner starts a runner unless opts.Runners are running.
func (b *embedBatcher) ensureRunner() {
	for {
		n := b.active.Load()
		if n >= int32(b.opts.Runners) {
			return
		}
		if b.active.CompareAndSwap(n, n+1) {
			break
		}
	}
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed {
		b.active.Add(-1)
		return
	}
	b.wg.Go(b.run)
}

// embed returns m's embedding of sg, whose nodes' content src gives, run
// in a forward call shared with concurrent callers, or in the caller's own
// when batching gains nothing (Max 1, or a model without
// model.Model.BatchGain).
func (b *embedBatcher) embed(ctx context.Context, m *model.Model, src model.Entities, sg *graph.Subgraph) ([]float32, error) {
	if b.opts.Max == 1 || !m.BatchGain() {
		v, err := m.EmbedSubgraphs(ctx, src, []*graph.Subgraph{sg})
		if err != nil {
			return nil, err
		}
		return v[0], nil
	}
	j := &embedJob{model: m, src: src, sg: sg, done: make(chan embedDone, 1)}
	select {
	case b.in <- j:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.quit:
		return nil, errBatcherClosed
	}
	b.ensureRunner() // after the send: a runner exiting now sees the job (see run)
	select {
	case d := <-j.done:
		return d.vec, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.quit:
		return nil, errBatcherClosed
	}
}

// run is one runner: it takes a waiting job, gathers those queued behind
// it (waiting up to opts.Wait when there are none), and embeds them.
func (b *embedBatcher) run() {
	jobs := make([]*embedJob, 0, b.opts.Max)
	var timer *time.Timer
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		jobs = jobs[:0]
		idle.Reset(runnerIdle)
		select {
		case j := <-b.in:
			jobs = append(jobs, j)
		case <-b.quit:
			b.active.Add(-1)
			return
		case <-idle.C:
			// Exit, unless a job was sent after this runner was counted
			// as running by its sender (which then started none).
			b.active.Add(-1)
			if len(b.in) == 0 {
				return
			}
			if n := b.active.Add(1); n > int32(b.opts.Runners) {
				b.active.Add(-1)
				return
			}
			continue
		}
	gather:
		for len(jobs) < b.opts.Max {
			select {
			case j := <-b.in:
				jobs = append(jobs, j)
				continue
			default:
			}
			if b.opts.Wait < 0 || len(jobs) > 1 || b.inflight.Load() <= int64(len(jobs)) {
				break // batched already, or no other request on its way
			}
			if timer == nil {
				timer = time.NewTimer(b.opts.Wait)
			} else {
				timer.Reset(b.opts.Wait)
			}
			select {
			case j := <-b.in:
				jobs = append(jobs, j)
				timer.Stop()
			case <-timer.C:
				break gather
			case <-b.quit:
				timer.Stop()
				b.fail(jobs)
				b.active.Add(-1)
				return
			}
		}
		b.embedAll(jobs)
	}
}

// embedAll embeds jobs, one forward call per model (a publication may
// leave jobs of two models in the queue).
func (b *embedBatcher) embedAll(jobs []*embedJob) {
	for len(jobs) > 0 {
		m := jobs[0].model
		var same, rest []*embedJob
		for _, j := range jobs {
			if j.model == m {
				same = append(same, j)
			} else {
				rest = append(rest, j)
			}
		}
		sgs := make([]*graph.Subgraph, len(same))
		for k, j := range same {
			sgs[k] = j.sg
		}
		vecs, err := m.EmbedSubgraphsFrom(context.Background(), func(k int) model.Entities { return same[k].src }, sgs)
		b.calls.Add(1)
		b.embedded.Add(int64(len(sgs)))
		for k, j := range same {
			if err != nil {
				j.done <- embedDone{err: err}
			} else {
				j.done <- embedDone{vec: vecs[k]}
			}
		}
		jobs = rest
	}
}

// EmbedBatchStats counts the forward calls of request-time embedding
// micro-batching since the engine started.
type EmbedBatchStats struct {
	// Calls is the number of forward calls and Embedded the number of
	// subgraphs they embedded (Embedded/Calls is the mean batch size).
	Calls, Embedded int64
}

// EmbedBatchStats returns the counts of request-time embedding batches.
func (e *Engine) EmbedBatchStats() EmbedBatchStats {
	return EmbedBatchStats{Calls: e.batch.calls.Load(), Embedded: e.batch.embedded.Load()}
}

func (b *embedBatcher) fail(jobs []*embedJob) {
	for _, j := range jobs {
		j.done <- embedDone{err: errBatcherClosed}
	}
}

// close stops the runners; jobs still queued are answered with an error.
func (b *embedBatcher) close() {
	b.closeMu.Lock()
	if b.closed {
		b.closeMu.Unlock()
		return
	}
	b.closed = true
	close(b.quit)
	b.closeMu.Unlock()
	b.wg.Wait()
	for {
		select {
		case j := <-b.in:
			j.done <- embedDone{err: errBatcherClosed}
		default:
			return
		}
	}
}
