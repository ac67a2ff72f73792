package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ModelInfo describes a published model version.
type ModelInfo struct {
	// Version identifies the model; required, unique per publication.
	Version string `json:"version"`
	// Dir is where the replicas load the model from (a shared volume or
	// object-store path).
	Dir string `json:"dir"`
	// TrainedAt is when training finished.
	TrainedAt time.Time `json:"trained_at"`
	// Metrics are the evaluation figures the model was accepted on.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Publisher is the replica id that published it; set by Publish.
	Publisher string `json:"publisher,omitempty"`
	// Seq is the registry's publication sequence, set by Publish: every
	// publication, a republished version included, gets a larger one than
	// all before it. Zero for a version stored without one.
	Seq uint64 `json:"seq,omitempty"`
}

// Hash fields of a model version.
const (
	fieldVersion   = "version"
	fieldDir       = "dir"
	fieldTrainedAt = "trained_at"
	fieldPublisher = "publisher"
	fieldSeq       = "seq"
	metricPrefix   = "metric:"
)

// DefaultPollInterval is how often [Registry.Watch] re-reads the latest
// version, in case a pub/sub message was lost during a reconnect.
const DefaultPollInterval = 30 * time.Second

// RegistryOptions configure a [Registry].
type RegistryOptions struct {
	// PollInterval: see DefaultPollInterval (the default).
	PollInterval time.Duration
}

// Registry is the model registry shared by the replicas: the latest
// version's name in the key Prefix+"model:latest", one hash per version at
// Prefix+"model:v:"+Version, the publication counter at Prefix+"model:seq",
// and a pub/sub channel Prefix+"model:updates" announcing each
// publication. Safe for concurrent use.
type Registry struct {
	c       *Client
	opts    RegistryOptions
	latest  string
	seq     string
	channel string
	log     *slog.Logger
	// beforeLatest, when set (by tests), runs in Watch between the
	// subscription and the first read of the latest version.
	beforeLatest func()
}

// NewRegistry returns the registry.
func (c *Client) NewRegistry(opts RegistryOptions) *Registry {
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	return &Registry{
		c:       c,
		opts:    opts,
		latest:  c.key("model", "latest"),
		seq:     c.key("model", "seq"),
		channel: c.key("model", "updates"),
		log:     c.log.With("registry", "model"),
	}
}

func (r *Registry) versionKey(v string) string { return r.c.key("model", "v", v) }

// publishScript numbers a publication and makes it the latest, in one
// step: KEYS = version hash, latest key, sequence counter; ARGV = version,
// channel, then the hash's field/value pairs. It returns the sequence.
var publishScript = redis.NewScript(`
local seq = redis.call('INCR', KEYS[3])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], '` + fieldSeq + `', seq, unpack(ARGV, 3))
redis.call('SET', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[1])
return seq
`)

// Publish stores info, numbers it with the next sequence (see
// [ModelInfo.Seq]), makes it the latest version and announces it to the
// watchers, atomically (one Lua script). A republished version replaces the
// stored one, metrics included, and gets a new sequence.
func (r *Registry) Publish(ctx context.Context, info ModelInfo) error {
	if info.Version == "" {
		return fmt.Errorf("publish model: %w: empty version", ErrInvalid)
	}
	args := []any{
		info.Version, r.channel,
		fieldVersion, info.Version,
		fieldDir, info.Dir,
		fieldTrainedAt, info.TrainedAt.UTC().Format(time.RFC3339Nano),
		fieldPublisher, r.c.replicaID,
	}
	for name, v := range info.Metrics {
		args = append(args, metricPrefix+name, strconv.FormatFloat(v, 'g', -1, 64))
	}
	seq, err := publishScript.Run(ctx, r.c.rdb, []string{r.versionKey(info.Version), r.latest, r.seq}, args...).Uint64()
	if err != nil {
		return fmt.Errorf("publish model %s: %w", info.Version, err)
	}
	r.log.Info("published model", "version", info.Version, "seq", seq, "dir", info.Dir)
	return nil
}

// Latest returns the latest published model, or an error wrapping
// [ErrNoModel].
func (r *Registry) Latest(ctx context.Context) (ModelInfo, error) {
	v, err := r.c.rdb.Get(ctx, r.latest).Result()
	if errors.Is(err, redis.Nil) {
		return ModelInfo{}, fmt.Errorf("read latest model: %w", ErrNoModel)
	}
	if err != nil {
		return ModelInfo{}, fmt.Errorf("read latest model: %w", err)
	}
	return r.Get(ctx, v)
}

// Get returns the model with the given version, or an error wrapping
// [ErrNoModel].
func (r *Registry) Get(ctx context.Context, version string) (ModelInfo, error) {
	h, err := r.c.rdb.HGetAll(ctx, r.versionKey(version)).Result()
	if err != nil {
		return ModelInfo{}, fmt.Errorf("read model %s: %w", version, err)
	}
	if len(h) == 0 {
		return ModelInfo{}, fmt.Errorf("read model %s: %w", version, ErrNoModel)
	}
	info, err := decodeModelInfo(h)
	if err != nil {
		return ModelInfo{}, fmt.Errorf("read model %s: %w", version, err)
	}
	return info, nil
}

func decodeModelInfo(h map[string]string) (ModelInfo, error) {
	info := ModelInfo{Version: h[fieldVersion], Dir: h[fieldDir], Publisher: h[fieldPublisher]}
	if info.Version == "" {
		return ModelInfo{}, fmt.Errorf("%w: model hash without version", ErrCorrupt)
	}
	if s := h[fieldSeq]; s != "" {
		seq, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return ModelInfo{}, fmt.Errorf("%w: seq: %w", ErrCorrupt, err)
		}
		info.Seq = seq
	}
	if s := h[fieldTrainedAt]; s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return ModelInfo{}, fmt.Errorf("%w: trained_at: %w", ErrCorrupt, err)
		}
		info.TrainedAt = t
	}
	for k, raw := range h {
		name, ok := strings.CutPrefix(k, metricPrefix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return ModelInfo{}, fmt.Errorf("%w: metric %s: %w", ErrCorrupt, name, err)
		}
		if info.Metrics == nil {
			info.Metrics = make(map[string]float64)
		}
		info.Metrics[name] = v
	}
	return info, nil
}

// Watch calls fn with the current model (if any) once it has subscribed,
// then with every newly published one, until ctx is cancelled; it then
// returns nil. fn runs on Watch's goroutine, one call at a time, and only
// with a model whose [ModelInfo.Seq] is larger than that of the model it
// was last called with: announcements that arrive late (queued before the
// first read of the latest version, or overtaken by a poll) are dropped, so
// the models fn sees only get newer. Besides the pub/sub channel, Watch
// re-reads the latest version every PollInterval, so a message lost while
// reconnecting delays a reload but does not drop it. Redis errors are
// logged and retried; Watch returns an error only when its first
// subscription fails.
func (r *Registry) Watch(ctx context.Context, fn func(ModelInfo)) error {
	ps := r.c.rdb.Subscribe(ctx, r.channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription confirmation
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("subscribe to %s: %w", r.channel, err)
	}
	msgs := ps.Channel()
	var (
		delivered bool
		last      uint64 // the sequence of the model fn was last called with
	)
	deliver := func(info ModelInfo, err error) {
		switch {
		case errors.Is(err, ErrNoModel):
		case err != nil:
			if ctx.Err() == nil {
				r.log.Warn("read published model", "err", err)
			}
		case !delivered || info.Seq > last:
			delivered, last = true, info.Seq
			fn(info)
		}
	}
	if r.beforeLatest != nil {
		r.beforeLatest()
	}
	deliver(r.Latest(ctx))
	tick := time.NewTicker(r.opts.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			deliver(r.Get(ctx, m.Payload))
		case <-tick.C:
			deliver(r.Latest(ctx))
		}
	}
}
