package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hir-ads/hir/graph"
)

// DefaultCacheTTL is the default time to live of a cached embedding.
const DefaultCacheTTL = time.Hour

// CacheOptions configure a [Cache].
type CacheOptions struct {
	// TTL is how long an embedding stays cached. Default DefaultCacheTTL.
	TTL time.Duration
}

// Cache is the embedding cache shared by the replicas: one key per (model
// version, node), Prefix+"emb:"+version+":"+ref, holding the vector as
// little-endian float32s. Keys expire after the TTL, so a superseded
// version's entries age out. Safe for concurrent use.
type Cache struct {
	c   *Client
	ttl time.Duration
}

// NewCache returns the embedding cache.
func (c *Client) NewCache(opts CacheOptions) *Cache {
	if opts.TTL <= 0 {
		opts.TTL = DefaultCacheTTL
	}
	return &Cache{c: c, ttl: opts.TTL}
}

func (c *Cache) key(version string, ref graph.Ref) string {
	return c.c.key("emb", version, ref.String())
}

// Get returns the cached embedding of ref under the model version, and
// whether there was one.
func (c *Cache) Get(ctx context.Context, version string, ref graph.Ref) ([]float32, bool, error) {
	raw, err := c.c.rdb.Get(ctx, c.key(version, ref)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get embedding %s: %w", ref, err)
	}
	vec, err := DecodeVector(raw)
	if err != nil {
		return nil, false, fmt.Errorf("get embedding %s: %w", ref, err)
	}
	return vec, true, nil
}

// Set caches the embedding of ref under the model version for the TTL.
// vec is not retained.
func (c *Cache) Set(ctx context.Context, version string, ref graph.Ref, vec []float32) error {
	if err := c.c.rdb.Set(ctx, c.key(version, ref), AppendVector(nil, vec), c.ttl).Err(); err != nil {
		return fmt.Errorf("set embedding %s: %w", ref, err)
	}
	return nil
}

// MGet returns the cached embeddings of refs under the model version, in
// the order of refs, with nil for the ones not cached (one round trip).
func (c *Cache) MGet(ctx context.Context, version string, refs []graph.Ref) ([][]float32, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	keys := make([]string, len(refs))
	for i, r := range refs {
		keys[i] = c.key(version, r)
	}
	vals, err := c.c.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("get %d embeddings: %w", len(refs), err)
	}
	out := make([][]float32, len(refs))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // nil: not cached
		}
		if out[i], err = DecodeVector([]byte(s)); err != nil {
			return nil, fmt.Errorf("get embedding %s: %w", refs[i], err)
		}
	}
	return out, nil
}

// MSet caches the embeddings vecs[i] of refs[i] under the model version for
// the TTL (one pipelined round trip). refs and vecs must have the same
// length.
func (c *Cache) MSet(ctx context.Context, version string, refs []graph.Ref, vecs [][]float32) error {
	if len(refs) != len(vecs) {
		return fmt.Errorf("set embeddings: %w: %d refs, %d vectors", ErrInvalid, len(refs), len(vecs))
	}
	if len(refs) == 0 {
		return nil
	}
	_, err := c.c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range refs {
			p.Set(ctx, c.key(version, r), AppendVector(nil, vecs[i]), c.ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set %d embeddings: %w", len(refs), err)
	}
	return nil
}

// AppendVector appends the little-endian float32 encoding of vec to dst.
func AppendVector(dst []byte, vec []float32) []byte {
	dst = append(dst, make([]byte, 4*len(vec))...)
	b := dst[len(dst)-4*len(vec):]
	for i, f := range vec {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return dst
}

// DecodeVector decodes a vector encoded by [AppendVector]; its length must
// be a multiple of 4, or the error wraps [ErrCorrupt].
func DecodeVector(p []byte) ([]float32, error) {
	if len(p)%4 != 0 {
		return nil, fmt.Errorf("%w: vector of %d bytes", ErrCorrupt, len(p))
	}
	vec := make([]float32, len(p)/4)
	for i := range vec {
		vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return vec, nil
}
