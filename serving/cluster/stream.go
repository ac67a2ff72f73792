package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hir-ads/hir/eventlog"
)

// Stream entry fields.
const (
	fieldOrigin = "origin"
	fieldBatch  = "batch"
)

// Defaults applied by [Client.NewStream].
const (
	DefaultStreamName   = "events"
	DefaultStreamMaxLen = 1_000_000
	DefaultStreamBlock  = time.Second
	DefaultStreamCount  = 100
	DefaultRetryBackoff = 500 * time.Millisecond
	maxRetryBackoff     = 30 * time.Second
)

// ApplyFunc applies a batch published by another replica. It must be
// idempotent: delivery is at least once, so a batch may arrive again after
// a failure or a restart (event ids make applying events idempotent, and
// entities are upserts).
type ApplyFunc func(ctx context.Context, b eventlog.Batch) error

// StreamOptions configure a [Stream].
type StreamOptions struct {
	// Name is the stream's name; its key is Prefix+"stream:"+Name. Default
	// DefaultStreamName.
	Name string
	// MaxLen caps the stream's length (approximate trimming, XADD MAXLEN ~).
	// A replica that stays down while more than MaxLen batches are
	// published misses the trimmed ones (see [StreamStats.Gap]). Default
	// DefaultStreamMaxLen; negative disables trimming.
	MaxLen int64
	// Block is how long one XREADGROUP waits for new entries; it also bounds
	// how long Run takes to return after its context is cancelled. Default
	// DefaultStreamBlock.
	Block time.Duration
	// Count is the most entries read at once. Default DefaultStreamCount.
	Count int64
	// RetryBackoff is the first wait after a failed apply or Redis error;
	// it doubles on each consecutive failure up to 30 s. Default
	// DefaultRetryBackoff.
	RetryBackoff time.Duration
	// StartNew makes a consumer group created for the first time start at
	// the end of the stream; by default it starts at the beginning of the
	// retained stream, so a new replica catches up on the history Redis
	// still holds.
	StartNew bool
}

// StreamStats are a [Stream]'s counters since it was built.
type StreamStats struct {
	// Published is the number of batches this replica published.
	Published uint64
	// Applied is the number of other replicas' batches applied.
	Applied uint64
	// Own is the number of this replica's own batches read and skipped.
	Own uint64
	// Failures is the number of apply calls that returned an error (the
	// batch is retried).
	Failures uint64
	// Malformed is the number of entries that could not be decoded or were
	// trimmed while pending; they are logged, acknowledged and dropped.
	Malformed uint64
	// Gap reports that, when Run started, entries this replica had not yet
	// read had already been trimmed from the stream: its state misses them
	// and should be rebuilt (from a snapshot or another replica).
	Gap bool
}

// Stream is the event stream shared by the replicas (a Redis Stream).
// Publish appends a batch; Run delivers every other replica's batches to the
// apply function, in stream order, through this replica's own consumer group
// (named after the replica id), acknowledging each batch after apply
// succeeds. After a restart Run first re-delivers the batches read but not
// acknowledged, then continues where the group left off. Safe for
// concurrent use; run at most one Run per replica id.
type Stream struct {
	c     *Client
	opts  StreamOptions
	key   string
	group string
	apply ApplyFunc
	log   *slog.Logger

	published, applied, own, failures, malformed atomic.Uint64
	gap                                          atomic.Bool
}

// NewStream returns the stream named opts.Name. apply receives the batches
// of the other replicas during [Stream.Run]; it may be nil for a
// publish-only stream.
func (c *Client) NewStream(opts StreamOptions, apply ApplyFunc) *Stream {
	if opts.Name == "" {
		opts.Name = DefaultStreamName
	}
	if opts.MaxLen == 0 {
		opts.MaxLen = DefaultStreamMaxLen
	}
	if opts.Block <= 0 {
		opts.Block = DefaultStreamBlock
	}
	if opts.Count <= 0 {
		opts.Count = DefaultStreamCount
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = DefaultRetryBackoff
	}
	return &Stream{
		c:     c,
		opts:  opts,
		key:   c.key("stream", opts.Name),
		group: "replica:" + c.replicaID,
		apply: apply,
		log:   c.log.With("stream", opts.Name),
	}
}

// Publish appends b to the stream, encoded with [eventlog.AppendBatch] and
// tagged with this replica's id, and returns the entry id. b.Seq travels
// as is (the origin's sequence number).
func (s *Stream) Publish(ctx context.Context, b eventlog.Batch) (string, error) {
	args := &redis.XAddArgs{
		Stream: s.key,
		Values: []any{fieldOrigin, s.c.replicaID, fieldBatch, eventlog.AppendBatch(nil, &b)},
	}
	if s.opts.MaxLen > 0 {
		args.MaxLen = s.opts.MaxLen
		args.Approx = true
	}
	id, err := s.c.rdb.XAdd(ctx, args).Result()
	if err != nil {
		return "", fmt.Errorf("publish batch: %w", err)
	}
	s.published.Add(1)
	return id, nil
}

// Stats returns the stream's counters.
func (s *Stream) Stats() StreamStats {
	return StreamStats{
		Published: s.published.Load(),
		Applied:   s.applied.Load(),
		Own:       s.own.Load(),
		Failures:  s.failures.Load(),
		Malformed: s.malformed.Load(),
		Gap:       s.gap.Load(),
	}
}

// Run consumes the stream until ctx is cancelled, then returns nil (within
// StreamOptions.Block). Failed applies and Redis errors are logged and
// retried with backoff; the batches after a failed one wait, so order is
// kept. Run returns an error only when it cannot start (no apply function,
// consumer group not creatable).
func (s *Stream) Run(ctx context.Context) error {
	if s.apply == nil {
		return fmt.Errorf("run stream %s: %w: nil apply function", s.opts.Name, ErrInvalid)
	}
	if err := s.ensureGroup(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	s.checkGap(ctx)

	pending := true // first drain what was delivered but not acknowledged
	backoff := time.Duration(0)
	fail := func(msg string, err error) bool {
		backoff = min(max(2*backoff, s.opts.RetryBackoff), maxRetryBackoff)
		s.log.Warn(msg, "err", err, "retry_in", backoff)
		pending = true
		return sleep(ctx, backoff)
	}
	for ctx.Err() == nil {
		start, block := ">", s.opts.Block
		if pending {
			start, block = "0", -1
		}
		res, err := s.c.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group:    s.group,
			Consumer: s.c.replicaID,
			Streams:  []string{s.key, start},
			Count:    s.opts.Count,
			Block:    block,
		}).Result()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, redis.Nil):
			continue // nothing new within Block
		case err != nil && strings.HasPrefix(err.Error(), "NOGROUP"):
			// The stream key was deleted (FLUSHDB, manual cleanup): recreate.
			if gerr := s.ensureGroup(ctx); gerr != nil && !fail("recreate consumer group", gerr) {
				return nil
			}
			continue
		case err != nil:
			if !fail("read stream", err) {
				return nil
			}
			continue
		}
		var msgs []redis.XMessage
		if len(res) > 0 {
			msgs = res[0].Messages
		}
		if pending && len(msgs) == 0 {
			pending = false
			continue
		}
		if err := s.handle(ctx, msgs); err != nil {
			if ctx.Err() != nil || !fail("apply batch", err) {
				return nil
			}
			continue
		}
		backoff = 0
	}
	return nil
}

// handle applies msgs in order and acknowledges the ones done, stopping at
// the first failure.
func (s *Stream) handle(ctx context.Context, msgs []redis.XMessage) error {
	done := make([]string, 0, len(msgs))
	var applyErr error
	for _, m := range msgs {
		origin, _ := m.Values[fieldOrigin].(string)
		raw, ok := m.Values[fieldBatch].(string)
		switch {
		case origin == s.c.replicaID:
			s.own.Add(1)
		case !ok:
			s.malformed.Add(1)
			s.log.Error("drop stream entry without batch (trimmed while pending?)", "id", m.ID, "origin", origin)
		default:
			b, err := eventlog.DecodeBatch([]byte(raw))
			if err != nil {
				s.malformed.Add(1)
				s.log.Error("drop undecodable stream entry", "id", m.ID, "origin", origin, "err", err)
				break
			}
			if err := s.apply(ctx, b); err != nil {
				s.failures.Add(1)
				applyErr = fmt.Errorf("apply entry %s from %s: %w", m.ID, origin, err)
			} else {
				s.applied.Add(1)
			}
		}
		if applyErr != nil {
			break
		}
		done = append(done, m.ID)
	}
	if len(done) > 0 {
		// Use a context that survives cancellation: work already applied
		// should be acknowledged, or it is delivered again after restart.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.c.rdb.XAck(actx, s.key, s.group, done...).Err(); err != nil {
			return errors.Join(applyErr, fmt.Errorf("acknowledge %d entries: %w", len(done), err))
		}
	}
	return applyErr
}

func (s *Stream) ensureGroup(ctx context.Context) error {
	start := "0"
	if s.opts.StartNew {
		start = "$"
	}
	err := s.c.rdb.XGroupCreateMkStream(ctx, s.key, s.group, start).Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create consumer group %s: %w", s.group, err)
	}
	return nil
}

// checkGap sets the Gap flag when entries after the group's last delivered
// id have been trimmed: the oldest retained entry (or, for an empty stream,
// the last generated id) is newer than the last delivered one, and more
// entries were trimmed (added minus retained) than the group has read.
// Errors are logged only: the check is advisory.
func (s *Stream) checkGap(ctx context.Context) {
	info, err := s.c.rdb.XInfoStream(ctx, s.key).Result()
	if err != nil {
		s.log.Warn("inspect stream", "err", err)
		return
	}
	groups, err := s.c.rdb.XInfoGroups(ctx, s.key).Result()
	if err != nil {
		s.log.Warn("inspect consumer groups", "err", err)
		return
	}
	oldest := info.FirstEntry.ID
	if info.Length == 0 {
		oldest = info.LastGeneratedID
	}
	trimmed := info.EntriesAdded - info.Length
	for _, g := range groups {
		// EntriesRead is 0 when Redis does not know it: then any trimming
		// past the last delivered id counts as a gap.
		if g.Name == s.group && idLess(g.LastDeliveredID, oldest) && trimmed > g.EntriesRead {
			s.gap.Store(true)
			s.log.Error("stream entries this replica had not read were trimmed; its state is incomplete",
				"last_delivered", g.LastDeliveredID, "oldest_retained", oldest,
				"trimmed", trimmed, "read", g.EntriesRead)
		}
	}
}

// idLess compares two stream ids "ms-seq"; malformed ids compare as 0-0.
func idLess(a, b string) bool {
	am, as := parseID(a)
	bm, bs := parseID(b)
	return am < bm || am == bm && as < bs
}

func parseID(id string) (ms, seq uint64) {
	l, r, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(l, 10, 64)
	seq, _ = strconv.ParseUint(r, 10, 64)
	return ms, seq
}
