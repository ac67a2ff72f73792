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
}

// Hash fields of a model version.
const (
	fieldVersion   = "version"
	fieldDir       = "dir"
	fieldTrainedAt = "trained_at"
	fieldPublisher = "publisher"
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
// Prefix+"model:v:"+Version, and a pub/sub channel Prefix+"model:updates"
// announcing each publication. Safe for concurrent use.
type Registry struct {
	c       *Client
	opts    RegistryOptions
	latest  string
	channel string
	log     *slog.Logger
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
		channel: c.key("model", "updates"),
		log:     c.log.With("registry", "model"),
	}
}

func (r *Registry) versionKey(v string) string { return r.c.key("model", "v", v) }

// Publish stores info, makes it the latest version and announces it to the
// watchers, atomically (MULTI/EXEC).
func (r *Registry) Publish(ctx context.Context, info ModelInfo) error {
	if info.Version == "" {
		return fmt.Errorf("publish model: %w: empty version", ErrInvalid)
	}
	fields := []any{
		fieldVersion, info.Version,
		fieldDir, info.Dir,
		fieldTrainedAt, info.TrainedAt.UTC().Format(time.RFC3339Nano),
		fieldPublisher, r.c.replicaID,
	}
	for name, v := range info.Metrics {
		fields = append(fields, metricPrefix+name, strconv.FormatFloat(v, 'g', -1, 64))
	}
	vkey := r.versionKey(info.Version)
	_, err := r.c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, vkey) // a republished version drops stale metrics
		p.HSet(ctx, vkey, fields...)
		p.Set(ctx, r.latest, info.Version, 0)
		p.Publish(ctx, r.channel, info.Version)
		return nil
	})
	if err != nil {
		return fmt.Errorf("publish model %s: %w", info.Version, err)
	}
	r.log.Info("published model", "version", info.Version, "dir", info.Dir)
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
// returns nil. fn runs on Watch's goroutine, one call at a time, and is
// never called twice in a row with the same version. Besides the pub/sub
// channel, Watch re-reads the latest version every PollInterval, so a
// message lost while reconnecting delays a reload but does not drop it.
// Redis errors are logged and retried; Watch returns an error only when
// its first subscription fails.
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
	last := ""
	deliver := func(info ModelInfo, err error) {
		switch {
		case errors.Is(err, ErrNoModel):
		case err != nil:
			if ctx.Err() == nil {
				r.log.Warn("read published model", "err", err)
			}
		case info.Version != last:
			last = info.Version
			fn(info)
		}
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
