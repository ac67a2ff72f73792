package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// redisAddr is the test Redis: HIR_REDIS_ADDR, default 127.0.0.1:6379.
func redisAddr() string {
	if a := os.Getenv("HIR_REDIS_ADDR"); a != "" {
		return a
	}
	return DefaultAddr
}

var (
	probeOnce sync.Once
	probeErr  error
)

// requireRedis skips the test when the test Redis does not answer PING
// within 1 s.
func requireRedis(t testing.TB) {
	t.Helper()
	probeOnce.Do(func() {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr(), DialTimeout: time.Second, DisableIdentity: true})
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		probeErr = rdb.Ping(ctx).Err()
	})
	if probeErr != nil {
		t.Skipf("no Redis at %s (set HIR_REDIS_ADDR): %v", redisAddr(), probeErr)
	}
}

// testPrefix returns a random key prefix and deletes its keys when the test
// ends.
func testPrefix(t testing.TB) string {
	t.Helper()
	requireRedis(t)
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	prefix := "hirtest:" + hex.EncodeToString(rnd[:]) + ":"
	t.Cleanup(func() {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr(), DisableIdentity: true})
		defer rdb.Close()
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("clean up keys %s*: %v", prefix, err)
		}
	})
	return prefix
}

// newTestClient connects a replica with the given id under prefix.
func newTestClient(t testing.TB, prefix, replica string) *Client {
	t.Helper()
	c, err := New(t.Context(), Options{Addr: redisAddr(), Prefix: prefix, ReplicaID: replica})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
