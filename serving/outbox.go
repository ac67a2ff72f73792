package serving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hir-ads/hir/eventlog"
)

// outboxSuffix ends the name of each queued batch's file.
const outboxSuffix = ".batch"

// outbox keeps the batches this replica stored but could not publish to the
// cluster's event stream, one file each (the batch's event-log encoding),
// until they are published: a batch answered 503 for the stream still
// reaches the other replicas once Redis is back, across restarts too. Safe
// for concurrent use.
type outbox struct {
	dir    string
	logger *slog.Logger
	wake   chan struct{}

	mtx     sync.Mutex
	pending []uint64 // file numbers, oldest first; mtx must be held
	next    uint64   // the next file number; mtx must be held
}

// openOutbox opens (or creates) the outbox in dir, keeping the batches a
// previous run left there and removing the temporary files a crash left.
func openOutbox(dir string, logger *slog.Logger) (*outbox, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	o := &outbox{dir: dir, logger: logger, wake: make(chan struct{}, 1), next: 1}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(name, outboxSuffix), 10, 64); err == nil && strings.HasSuffix(name, outboxSuffix) {
			o.pending = append(o.pending, n)
			o.next = max(o.next, n+1)
		}
	}
	slices.Sort(o.pending)
	if len(o.pending) > 0 {
		logger.Warn("outbox: batches stored here wait for the cluster stream", "batches", len(o.pending), "dir", dir)
	}
	return o, nil
}

func (o *outbox) path(n uint64) string {
	return filepath.Join(o.dir, fmt.Sprintf("%020d%s", n, outboxSuffix))
}

// add queues b durably (its file and the directory are fsynced).
func (o *outbox) add(b eventlog.Batch) error {
	o.mtx.Lock()
	defer o.mtx.Unlock()
	n := o.next
	f, err := os.CreateTemp(o.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("queue batch in outbox: %w", err)
	}
	_, err = f.Write(eventlog.AppendBatch(nil, &b))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), o.path(n))
	}
	if err == nil {
		err = eventlog.SyncDir(o.dir)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("queue batch in outbox: %w", err), os.Remove(f.Name()))
	}
	o.next++
	o.pending = append(o.pending, n)
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

// len returns the number of queued batches.
func (o *outbox) len() int {
	o.mtx.Lock()
	defer o.mtx.Unlock()
	return len(o.pending)
}

// run publishes the queued batches in order with publish, removing each
// once published, until ctx ends; after a failure it waits retry (or a new
// batch) before trying again. drained is called each time the queue
// empties after a publication.
func (o *outbox) run(ctx context.Context, retry time.Duration, publish func(context.Context, eventlog.Batch) error, drained func()) error {
	t := time.NewTicker(retry)
	defer t.Stop()
	for {
		if o.flush(ctx, publish) {
			drained()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-o.wake:
		}
	}
}

// flush publishes the queued batches, oldest first, and stops at the first
// failure. It reports whether it published any and emptied the queue.
func (o *outbox) flush(ctx context.Context, publish func(context.Context, eventlog.Batch) error) bool {
	sent := 0
	for ctx.Err() == nil {
		o.mtx.Lock()
		if len(o.pending) == 0 {
			o.mtx.Unlock()
			break
		}
		n := o.pending[0]
		o.mtx.Unlock()
		data, err := os.ReadFile(o.path(n))
		var b eventlog.Batch
		if err == nil {
			b, err = eventlog.DecodeBatch(data)
		}
		if err != nil { // not publishable: keep the file for an operator
			o.logger.Error("outbox: unreadable queued batch left in place", "file", o.path(n), "err", err)
			_ = os.Rename(o.path(n), o.path(n)+".damaged")
		} else if err := publish(ctx, b); err != nil {
			return false
		}
		if err == nil {
			if err := os.Remove(o.path(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				o.logger.Error("outbox: remove published batch", "file", o.path(n), "err", err)
				return false
			}
			sent++
		}
		o.mtx.Lock()
		o.pending = o.pending[1:]
		o.mtx.Unlock()
	}
	if sent > 0 {
		_ = eventlog.SyncDir(o.dir)
		o.logger.Info("outbox: queued batches published to the cluster stream", "batches", sent, "left", o.len())
	}
	return sent > 0 && o.len() == 0
}
