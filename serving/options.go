package serving

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hir-ads/hir/retrieval"
)

// Defaults applied by [New] to zero fields of [Options].
const (
	DefaultMaxBodyBytes     int64         = 8 << 20
	DefaultMaxReadBodyBytes int64         = 1 << 20
	DefaultRequestTimeout   time.Duration = 10 * time.Second
	DefaultShutdownTimeout  time.Duration = 15 * time.Second
	DefaultBodyReadTimeout  time.Duration = 15 * time.Second
	DefaultRatePerSecond    float64       = 1000
	DefaultRateBurst        int           = 2000
	DefaultMaxRateKeys      int           = 100_000
	DefaultMaxBatchItems    int           = 50_000
	DefaultMaxInFlight      int           = 64
	DefaultMaxQueueWait     time.Duration = 50 * time.Millisecond
	DefaultCheckpointEvery  time.Duration = 10 * time.Minute
)

// ErrBadOptions is returned by [New] for invalid options.
var ErrBadOptions = errors.New("bad serving options")

// Options configures a [Server]. Zero fields take the documented defaults.
type Options struct {
	// Logger receives the access log and errors; default: discard.
	Logger *slog.Logger
	// TracerProvider creates the request and stage spans; default: no-op.
	TracerProvider trace.TracerProvider

	// APIKeys are the bearer tokens accepted on write and admin endpoints
	// (POST /v1/entities, /v1/events, /v1/model/train). When empty, auth is
	// disabled and New logs a warning.
	APIKeys []string
	// ReadAuth makes the read endpoints require a key too (probes and
	// /metrics stay open).
	ReadAuth bool

	// MaxBodyBytes caps the bodies of the ingest requests, POST
	// /v1/entities and /v1/events (default 8 MiB); larger ones get 413.
	MaxBodyBytes int64
	// MaxReadBodyBytes caps every other request body, a retrieve's among
	// them (default 1 MiB: 1,000 context events, a user's content and a
	// filter of some 100,000 short ids); larger ones get 413 before they
	// are decoded, as soon as their Content-Length or their first
	// MaxReadBodyBytes+1 bytes say so.
	MaxReadBodyBytes int64
	// MaxBatchItems caps the entities or events of one ingest request
	// (default 50000); more get 413.
	MaxBatchItems int
	// RequestTimeout bounds the handling of one request, from its admission
	// (default 10s): its context ends then, and a request not answered yet
	// is answered 503 (type timeout) at once, its handler's later answer
	// dropped; it keeps its admission slot until the handler returns.
	RequestTimeout time.Duration
	// BodyReadTimeout bounds the time to read a request's body, from the end
	// of its headers (default 15s); a slower body gets 408 and its
	// connection is closed.
	BodyReadTimeout time.Duration
	// ShutdownTimeout bounds the drain of in-flight requests (default 15s).
	ShutdownTimeout time.Duration
	// CheckpointEvery is how often [Server.Run] writes the event log's
	// checkpoint (the graph store and the log's ids, [Server.Checkpoint])
	// when batches were stored since the last one (default 10 min); it
	// writes one at shutdown too, so that the next start replays only the
	// log's tail. Ingestion waits while a checkpoint is written. Negative:
	// never.
	CheckpointEvery time.Duration

	// RatePerSecond and RateBurst shape the token bucket of each API key or,
	// without a key, each client IP (defaults 1000/s and 2000). A negative
	// RatePerSecond disables rate limiting.
	RatePerSecond float64
	RateBurst     int
	// MaxRateKeys bounds the number of buckets kept (default 100000).
	MaxRateKeys int

	// MaxInFlight bounds the requests handled at once, over all callers
	// (default 64; negative: no bound). Probes and /metrics are not
	// counted. A request that finds every slot taken waits at most
	// MaxQueueWait (default 50ms), with at most MaxInFlight others, and is
	// then answered 503 with Retry-After without being started. One caller
	// (API key, else client IP) holds or awaits at most three quarters of
	// the slots; beyond that it gets 429 with Retry-After. A request's
	// body is read whole before it asks for a slot, so a slow body holds
	// none. The bodies held at once (being read, waiting or handled) take
	// at most MaxInFlight × MaxBodyBytes bytes of memory, taken as their
	// bytes arrive; a body that finds this budget spent gets 503.
	MaxInFlight  int
	MaxQueueWait time.Duration

	// Retrieval configures the retrieval engine: the ranking settings, the
	// default re-rank weights, the keyword index and the embedding cache
	// (start from rank.DefaultOptions and rank.DefaultWeights; see
	// retrieval.Options).
	Retrieval retrieval.Options

	// MaxClockSkew is how far ahead of the server clock an ingested or
	// context event's ts may be (0: DefaultMaxClockSkew, one hour; negative:
	// no limit). Later events get a 400 naming the item's ts.
	MaxClockSkew time.Duration
}

func (o *Options) applyDefaults() error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxReadBodyBytes == 0 {
		o.MaxReadBodyBytes = DefaultMaxReadBodyBytes
	}
	if o.MaxBatchItems == 0 {
		o.MaxBatchItems = DefaultMaxBatchItems
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.BodyReadTimeout == 0 {
		o.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = DefaultCheckpointEvery
	}
	if o.RatePerSecond == 0 {
		o.RatePerSecond = DefaultRatePerSecond
	}
	if o.RateBurst == 0 {
		o.RateBurst = DefaultRateBurst
	}
	if o.MaxRateKeys == 0 {
		o.MaxRateKeys = DefaultMaxRateKeys
	}
	if o.MaxClockSkew == 0 {
		o.MaxClockSkew = DefaultMaxClockSkew
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxQueueWait == 0 {
		o.MaxQueueWait = DefaultMaxQueueWait
	}
	switch {
	case o.MaxBodyBytes < 0 || o.MaxReadBodyBytes < 0:
		return fmt.Errorf("%w: MaxBodyBytes %d or MaxReadBodyBytes %d < 0", ErrBadOptions, o.MaxBodyBytes, o.MaxReadBodyBytes)
	case o.MaxBatchItems < 0:
		return fmt.Errorf("%w: MaxBatchItems %d < 0", ErrBadOptions, o.MaxBatchItems)
	case o.RequestTimeout < 0 || o.ShutdownTimeout < 0 || o.BodyReadTimeout < 0 || o.MaxQueueWait < 0:
		return fmt.Errorf("%w: negative timeout", ErrBadOptions)
	case o.RatePerSecond > 0 && o.RateBurst < 1:
		return fmt.Errorf("%w: RateBurst %d < 1", ErrBadOptions, o.RateBurst)
	}
	for i, k := range o.APIKeys {
		if len(k) < 8 {
			return fmt.Errorf("%w: APIKeys[%d] is shorter than 8 characters", ErrBadOptions, i)
		}
	}
	return nil
}
