package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults applied by [Client.NewLease].
const (
	DefaultLeaseName = "trainer"
	DefaultLeaseTTL  = 15 * time.Second
)

// renewScript extends the lease only when the caller's token holds it.
var renewScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)

// releaseScript deletes the lease only when the caller's token holds it.
var releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`)

// LeaseOptions configure a [Lease].
type LeaseOptions struct {
	// Name names the lease; its key is Prefix+"lease:"+Name. Default
	// DefaultLeaseName.
	Name string
	// TTL is how long the lease lasts without renewal: the longest a
	// crashed leader blocks the others. Default DefaultLeaseTTL; at least
	// 3 ms.
	TTL time.Duration
}

// Lease is a leader lease (e.g. for the trainer): a key set with SET NX PX
// to a token unique to this Lease value ("replica-id/random"); renewal and
// release check the token atomically (Lua), so only the holder can extend
// or drop it. Safe for concurrent use; each contender builds its own Lease.
type Lease struct {
	c     *Client
	key   string
	token string
	ttl   time.Duration
	log   *slog.Logger
}

// NewLease returns a lease contender with a fresh random token.
func (c *Client) NewLease(opts LeaseOptions) (*Lease, error) {
	if opts.Name == "" {
		opts.Name = DefaultLeaseName
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultLeaseTTL
	}
	if opts.TTL < 3*time.Millisecond {
		return nil, fmt.Errorf("new lease %s: %w: ttl %v under 3ms", opts.Name, ErrInvalid, opts.TTL)
	}
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("new lease token: %w", err)
	}
	return &Lease{
		c:     c,
		key:   c.key("lease", opts.Name),
		token: c.replicaID + "/" + hex.EncodeToString(rnd[:]),
		ttl:   opts.TTL,
		log:   c.log.With("lease", opts.Name),
	}, nil
}

// TTL returns the lease's time to live.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Token returns this contender's token, the value of the key while it holds
// the lease.
func (l *Lease) Token() string { return l.token }

// Acquire takes the lease if it is free (SET NX PX) and reports whether
// this contender holds it; when it already holds it, Acquire renews it.
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	ok, err := l.c.rdb.SetNX(ctx, l.key, l.token, l.ttl).Result()
	if err != nil {
		return false, fmt.Errorf("acquire lease: %w", err)
	}
	if ok {
		return true, nil
	}
	return l.Renew(ctx)
}

// Renew extends the lease by its TTL when this contender holds it and
// reports whether it does.
func (l *Lease) Renew(ctx context.Context) (bool, error) {
	n, err := renewScript.Run(ctx, l.c.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("renew lease: %w", err)
	}
	return n == 1, nil
}

// Release drops the lease when this contender holds it and reports whether
// it did.
func (l *Lease) Release(ctx context.Context) (bool, error) {
	n, err := releaseScript.Run(ctx, l.c.rdb, []string{l.key}, l.token).Int()
	if err != nil {
		return false, fmt.Errorf("release lease: %w", err)
	}
	return n == 1, nil
}

// Holder returns the replica id of the lease's current holder, or "" when
// it is free.
func (l *Lease) Holder(ctx context.Context) (string, error) {
	v, err := l.c.rdb.Get(ctx, l.key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read lease holder: %w", err)
	}
	id, _, _ := strings.Cut(v, "/")
	return id, nil
}

// RunWhileLeader runs fn whenever this contender holds the lease, until fn
// returns on its own or ctx is cancelled. It tries to acquire the lease
// every TTL/3; once it holds it, it calls fn with a context that is
// cancelled, with cause [ErrLeaseLost], when the lease is lost (taken over,
// or not renewed for 2/3 of the TTL because Redis failed). It renews the
// lease every TTL/3. After a loss it waits for fn to return and contends
// again. When fn returns on its own, RunWhileLeader releases the lease and
// returns fn's error; when ctx is cancelled, it returns nil once fn has
// returned and the lease is released.
func (l *Lease) RunWhileLeader(ctx context.Context, fn func(ctx context.Context) error) error {
	every := l.ttl / 3
	for {
		held, err := l.Acquire(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			l.log.Warn("contend for lease", "err", err)
		case held:
			done, err := l.lead(ctx, fn)
			if done {
				return err
			}
		}
		if !sleep(ctx, every) {
			return nil
		}
	}
}

// lead runs fn while holding the lease. done is false when the lease was
// lost and the caller should contend again.
func (l *Lease) lead(ctx context.Context, fn func(context.Context) error) (done bool, err error) {
	l.log.Info("acquired lease")
	lastOK := time.Now() // the lease lasts at least TTL from before the SET
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res := make(chan error, 1)
	go func() { res <- fn(fctx) }()

	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case err := <-res:
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
			defer rcancel()
			if _, rerr := l.Release(rctx); rerr != nil {
				l.log.Warn("release lease", "err", rerr)
			}
			if ctx.Err() != nil {
				return true, nil
			}
			return true, err
		case <-tick.C:
			if ctx.Err() != nil {
				continue // fn is stopping; release once it returns
			}
			start := time.Now()
			held, err := l.Renew(ctx)
			switch {
			case err == nil && held:
				lastOK = start
				continue
			case err == nil:
				l.log.Warn("lease taken over")
			case time.Since(lastOK) < l.ttl*2/3:
				l.log.Warn("renew lease; will retry", "err", err)
				continue
			default:
				l.log.Warn("renew lease; giving up leadership", "err", err)
			}
			cancel(ErrLeaseLost)
			<-res
			return ctx.Err() != nil, nil
		}
	}
}
