package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewUnreachable(t *testing.T) {
	// A port nothing listens on: connection refused, quickly.
	_, err := New(t.Context(), Options{Addr: "127.0.0.1:1", ReplicaID: "r", DialTimeout: 500 * time.Millisecond})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("New(unreachable) error = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("New(unreachable) error = %q, want it to name the address", err)
	}
}

func TestNewDefaults(t *testing.T) {
	requireRedis(t)
	c, err := New(t.Context(), Options{Addr: redisAddr()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if c.Prefix() != DefaultPrefix {
		t.Errorf("Prefix() = %q, want %q", c.Prefix(), DefaultPrefix)
	}
	if c.ReplicaID() == "" {
		t.Error("ReplicaID() is empty, want the host name")
	}
	if err := c.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestNewURL(t *testing.T) {
	requireRedis(t)
	c, err := New(t.Context(), Options{Addr: "redis://" + redisAddr() + "/0", ReplicaID: "r"})
	if err != nil {
		t.Fatalf("New(url): %v", err)
	}
	c.Close()
}
