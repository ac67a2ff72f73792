package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors returned (wrapped) by the package.
var (
	// ErrUnavailable is returned by [New] when Redis does not answer PING.
	ErrUnavailable = errors.New("redis unavailable")
	// ErrNoModel is returned by [Registry.Latest] and [Registry.Get] when no
	// such model has been published.
	ErrNoModel = errors.New("no model published")
	// ErrLeaseLost is the cause of the context handed to the function run by
	// [Lease.RunWhileLeader] when the lease is lost while it runs.
	ErrLeaseLost = errors.New("lease lost")
	// ErrCorrupt is returned when a value stored in Redis cannot be decoded.
	ErrCorrupt = errors.New("corrupt value")
	// ErrInvalid is returned for invalid arguments (an empty model version,
	// mismatched slice lengths, ...).
	ErrInvalid = errors.New("invalid argument")
)

// Defaults applied by [New].
const (
	DefaultAddr        = "127.0.0.1:6379"
	DefaultPrefix      = "hir:"
	DefaultDialTimeout = 2 * time.Second
)

// Options configure a [Client]. The zero value is usable: it connects to
// DefaultAddr with DefaultPrefix and the host name as replica id.
type Options struct {
	// Addr is "host:port", or a redis:// or rediss:// URL (which may carry
	// user, password and database). Default DefaultAddr.
	Addr string
	// Username and Password authenticate with Redis ACLs; they override the
	// URL's.
	Username string
	Password string
	// DB selects the logical database when Addr is not a URL.
	DB int
	// Prefix starts every key and channel name the package uses, so several
	// deployments can share one Redis. Default DefaultPrefix ("hir:").
	Prefix string
	// ReplicaID names this replica: its consumer group on the event stream,
	// the origin of the batches it publishes (which it does not apply
	// again) and its lease tokens. It must be unique among the replicas
	// and stable across restarts, or a restarted replica starts a new
	// consumer group. Default: the host name.
	ReplicaID string
	// Logger receives the package's logs, scoped with component=cluster.
	// Default: discard.
	Logger *slog.Logger
	// DialTimeout bounds connecting and the initial PING. Default
	// DefaultDialTimeout.
	DialTimeout time.Duration
}

// Client is a connection pool to Redis shared by the package's components
// ([Stream], [Registry], [Lease], [Cache]). Safe for concurrent use.
type Client struct {
	rdb       *redis.Client
	prefix    string
	replicaID string
	log       *slog.Logger
}

// New connects to Redis and pings it. When Redis does not answer within
// Options.DialTimeout it returns an error wrapping [ErrUnavailable] that
// names the address.
func New(ctx context.Context, opts Options) (*Client, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.ReplicaID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return nil, fmt.Errorf("default replica id: %w", errors.Join(ErrInvalid, err))
		}
		opts.ReplicaID = host
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var ro *redis.Options
	if strings.HasPrefix(opts.Addr, "redis://") || strings.HasPrefix(opts.Addr, "rediss://") {
		var err error
		if ro, err = redis.ParseURL(opts.Addr); err != nil {
			return nil, fmt.Errorf("parse redis url: %w", err)
		}
	} else {
		ro = &redis.Options{Addr: opts.Addr, DB: opts.DB}
	}
	if opts.Username != "" {
		ro.Username = opts.Username
	}
	if opts.Password != "" {
		ro.Password = opts.Password
	}
	ro.DialTimeout = opts.DialTimeout
	ro.DisableIdentity = true // no CLIENT SETINFO: works with older and proxied servers
	rdb := redis.NewClient(ro)

	pctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("ping redis at %s: %w", ro.Addr, errors.Join(ErrUnavailable, err))
	}
	return &Client{
		rdb:       rdb,
		prefix:    opts.Prefix,
		replicaID: opts.ReplicaID,
		log:       opts.Logger.With("component", "cluster", "replica", opts.ReplicaID),
	}, nil
}

// ReplicaID returns this replica's id.
func (c *Client) ReplicaID() string { return c.replicaID }

// Prefix returns the key prefix.
func (c *Client) Prefix() string { return c.prefix }

// Ping checks that Redis answers (a readiness probe).
func (c *Client) Ping(ctx context.Context) error {
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", errors.Join(ErrUnavailable, err))
	}
	return nil
}

// Close closes the connection pool. Components built on the client must be
// stopped first.
func (c *Client) Close() error {
	if err := c.rdb.Close(); err != nil {
		return fmt.Errorf("close redis client: %w", err)
	}
	return nil
}

func (c *Client) key(parts ...string) string {
	return c.prefix + strings.Join(parts, ":")
}

// sleep waits for d or until ctx is done; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
