package eventlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/hir-ads/hir/graph"
)

// Errors returned by the log.
var (
	// ErrClosed is returned by Append after Close, and by a second Close.
	ErrClosed = errors.New("event log closed")
	// ErrCorrupt reports damage that is not a torn tail: a bad record in a
	// segment other than the last, a bad record followed by valid ones in
	// the last, a bad header, or out-of-order batches. Open returns it as a
	// [*CorruptError] naming the file and offset; [Repair] fixes it.
	ErrCorrupt = errors.New("event log corrupt")
	// ErrUnsupportedVersion reports a segment written in an unknown format version.
	ErrUnsupportedVersion = errors.New("unsupported event log format version")
	// ErrLocked is returned by Open when another process holds the log directory.
	ErrLocked = errors.New("event log directory locked by another process")
	// ErrInvalidBatch is returned (wrapped) by Append for a batch with an
	// invalid entity or event; nothing of the batch is stored.
	ErrInvalidBatch = errors.New("invalid batch")
	// ErrBatchTooLarge is returned by Append when a batch encodes to more than
	// MaxBatchBytes.
	ErrBatchTooLarge = errors.New("batch too large")
	// ErrFailed is returned (wrapped, with the cause, e.g. syscall.ENOSPC) by
	// Append when a write or fsync has failed. Nothing of the failed group of
	// batches is stored: the log cuts its last segment back to the last
	// committed size and refuses writes until a probe write succeeds again
	// (retried every RetryInterval, and before each commit), then recovers
	// by itself. [Log.Err] reports the state.
	ErrFailed = errors.New("event log failed")
	// ErrConflict is returned (as a *ConflictError) by Append when an event
	// repeats a stored id with a different payload.
	ErrConflict = errors.New("event id already stored with a different payload")
)

// DefaultSegmentSizeBytes is the default size at which segments are rolled.
const DefaultSegmentSizeBytes = 64 << 20

// Limits of one group commit.
const (
	maxGroupBatches = 4096
	maxGroupBytes   = 4 << 20
	queueLength     = 1024
)

// Options configures a Log. The zero value of every field but Dir is usable.
type Options struct {
	// Dir is the directory of the segment files; it is created if missing.
	Dir string
	// SegmentSizeBytes is the size after which a new segment is started
	// (default DefaultSegmentSizeBytes). A batch larger than that gets a
	// segment of its own.
	SegmentSizeBytes int64
	// NoSync skips the fsync of each group commit: Append returns once the
	// data is written to the operating system. Close still fsyncs.
	NoSync bool
	// Logger receives warnings (torn tails) and errors (failed writes);
	// default: discard.
	Logger *slog.Logger
	// RetryInterval is how often a failed log probes whether it can write
	// again (default 1s).
	RetryInterval time.Duration
	// Restore, when set, makes Open start from the log's checkpoint
	// ([Log.Checkpoint]) where there is a valid one: Open hands Restore a
	// reader of the state the checkpoint holds, then replays only the
	// batches after it. Restore decodes that state and returns commit,
	// which Open calls once the whole checkpoint has checked out (its
	// checksum is at its end); when Restore fails, or the checkpoint does
	// not, commit is not called and Open replays every batch, as without
	// Restore. Without Restore the checkpoint is not read (unless replay
	// is nil: then only its ids are).
	Restore func(r io.Reader) (commit func(), err error)
}

// OpenReport describes what Open found on disk.
type OpenReport struct {
	// TruncatedBytes is the size of the torn or corrupt tail cut from the
	// last segment; 0 when the log was clean.
	TruncatedBytes int64
	// Reason says why the tail was cut, with file and offset; empty when clean.
	Reason string
	// MovedAside, when set, is the file that now holds the cut tail's
	// bytes: the tail's last record was whole but damaged (a bad
	// checksum: not an incomplete write, so possibly an acknowledged
	// batch). Open keeps them there, logs an error and starts without
	// them; `hir log check` fails until the file is removed.
	MovedAside string
	// Segments is the number of segment files replayed.
	Segments int
	// Batches, Events and Entities count what was replayed.
	Batches  int
	Events   int
	Entities int
	// Checkpoint describes the checkpoint Open started from (Seq 0: none;
	// Bytes, IDs and Elapsed describe its reading).
	Checkpoint CheckpointInfo
	// CheckpointSkipped says why a checkpoint in the directory was not
	// used (empty when there is none or it was used).
	CheckpointSkipped string
}

// AppendResult describes what Append stored.
type AppendResult struct {
	// Seq is the sequence number of the stored batch, or 0 when nothing was
	// written (an empty batch, or one whose events were all duplicates).
	Seq uint64
	// Entities and Events count the items stored.
	Entities int
	Events   int
	// Duplicates counts events dropped because their ID was already stored
	// with the same payload.
	Duplicates int
	// Conflicts counts events dropped by AppendReplicated because their ID
	// was already stored with a different payload (Append refuses those).
	Conflicts int
}

// ConflictError is the error of an Append whose batch holds an event whose
// id is already stored, or used earlier in the batch or in a batch queued
// beside it, with a different payload. The batch is not stored.
type ConflictError struct {
	Index int    // the event's index in the batch
	ID    string // its id
	// Fields name what differs ("src", "dst", "type", "ts", "weight"), as
	// far as the stored fingerprint tells: a part that differs is left out
	// with a chance of 1 in 64 (its 6 bits of hash agree), and nil means
	// none could be told.
	Fields []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("event %d of the batch: id %q is already stored with a different %s", e.Index, e.ID, e.What())
}

// What names what differs: the fields, or "payload" when they are not known.
func (e *ConflictError) What() string {
	if len(e.Fields) == 0 {
		return "payload"
	}
	return strings.Join(e.Fields, ", ")
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// Stats are counters of a Log since Open.
type Stats struct {
	// Segments is the number of segment files; Bytes their total size.
	Segments int
	Bytes    int64
	// LastSeq is the sequence number of the last stored batch.
	LastSeq uint64
	// Batches, Entities and Events count what was appended since Open;
	// Duplicates the events dropped as already stored.
	Batches    uint64
	Entities   uint64
	Events     uint64
	Duplicates uint64
	// Commits counts group commits (one write call each); Syncs counts fsyncs
	// of segment files.
	Commits uint64
	Syncs   uint64
	// IDs is the number of distinct event ids remembered for deduplication.
	IDs int
	// CheckpointSeq is the last batch the log's checkpoint covers, as
	// restored by Open or written since (0: none known).
	CheckpointSeq uint64
}

// Log is an open event log. Safe for concurrent use.
type Log struct {
	opts   Options
	dir    string
	logger *slog.Logger
	lock   *os.File

	// closeMu guards closed and the send side of queue.
	closeMu  sync.RWMutex
	closed   bool // closeMu must be held
	queue    chan *request
	ckpts    chan *checkpointReq
	done     chan struct{} // closed when the writer has exited
	closeErr error         // set by the writer before done is closed

	// Owned by the writer goroutine (and by Open before it starts).
	f       *os.File // last segment, open for appending
	segNum  uint64
	segSize int64 // bytes written to f, including the header
	seq     uint64
	seen    idSet
	wbuf    []byte
	failErr error // set while writes fail; see recoverFailed
	// goodNum and goodSize are the last segment and its size as of the last
	// successful commit: where a failed group is cut back to.
	goodNum  uint64
	goodSize int64

	// mu guards the fields below, which readers (Stats, Replay, Err) snapshot.
	mu     sync.Mutex
	stats  Stats       // mu must be held
	failed error       // mu must be held: a copy of failErr for Err
	segs   []segmentAt // mu must be held: every segment and its committed size
}

type segmentAt struct {
	num  uint64
	size int64
}

// request is one batch handed to the writer, already encoded by its caller.
type request struct {
	buf       []byte   // payload with a placeholder seq
	entEnd    int      // end of the entities (where the event count starts)
	evStart   int      // start of the first event
	evEnds    []int    // end offset of each event
	ids       []string // id of each event
	prints    []uint64 // payload fingerprint of each event (idSet.print)
	keepFirst bool     // drop conflicting events instead of refusing the batch
	nEntities int
	done      chan result // buffered: the writer never blocks on it
}

type result struct {
	res AppendResult
	err error
}

// Open opens the log in opts.Dir, creating it if needed, and replays every
// stored batch in order through replay (which may be nil). The batches passed
// to replay are freshly decoded and may be retained. An error from replay
// stops Open and is returned.
//
// A torn tail — damage at the end of the last segment that no valid batch
// follows, left by an interrupted write — is truncated, logged and
// described in the report. Any other damage, including damage in the last
// segment followed by a valid batch, fails Open with a [*CorruptError]
// (errors.Is ErrCorrupt) naming the file and offset, and changes nothing:
// see [Check] and [Repair].
// The directory is locked until Close; a second Open fails with ErrLocked.
func Open(ctx context.Context, opts Options, replay func(Batch) error) (*Log, OpenReport, error) {
	var rep OpenReport
	if opts.Dir == "" {
		return nil, rep, errors.New("open event log: Options.Dir is empty")
	}
	if opts.SegmentSizeBytes <= 0 {
		opts.SegmentSizeBytes = DefaultSegmentSizeBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = time.Second
	}
	l := &Log{
		opts:   opts,
		dir:    opts.Dir,
		logger: opts.Logger.With("component", "eventlog", "dir", opts.Dir),
		queue:  make(chan *request, queueLength),
		ckpts:  make(chan *checkpointReq),
		done:   make(chan struct{}),
		seen:   newIDSet(),
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, rep, fmt.Errorf("create log directory: %w", err)
	}
	lock, err := lockDir(filepath.Join(l.dir, "LOCK"))
	if err != nil {
		return nil, rep, fmt.Errorf("open event log: %w", err)
	}
	l.lock = lock
	if err := l.recover(ctx, &rep, replay); err != nil {
		if l.f != nil {
			l.f.Close()
		}
		l.lock.Close()
		return nil, rep, fmt.Errorf("open event log %s: %w", l.dir, err)
	}
	l.goodNum, l.goodSize = l.segNum, l.segSize
	go l.writer()
	return l, rep, nil
}

// recover replays the segments, cuts a torn tail and opens the last segment
// for appending.
func (l *Log) recover(ctx context.Context, rep *OpenReport, replay func(Batch) error) error {
	nums, err := listSegments(l.dir)
	if err != nil {
		return err
	}
	var ck *checkpointHead
	if l.opts.Restore != nil || replay == nil {
		start := time.Now()
		ck, err = l.restoreCheckpoint(nums, l.opts.Restore)
		switch {
		case err != nil:
			rep.CheckpointSkipped = err.Error()
			l.logger.Warn("event log: checkpoint not used; replaying the whole log", "err", err)
			l.seen = newIDSet()
		case ck != nil:
			rep.Checkpoint = CheckpointInfo{Seq: ck.seq, Bytes: ck.size, IDs: int(ck.ids), Elapsed: time.Since(start)}
			l.stats.CheckpointSeq = ck.seq
		}
	}
	apply := func(b Batch) error {
		if ck != nil && b.Seq <= ck.seq {
			return nil // in the checkpoint
		}
		if rep.Batches%256 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("replay: %w", err)
			}
		}
		for i := range b.Events {
			if id := b.Events[i].ID; id != "" {
				l.seen.add(id, l.seen.print(&b.Events[i]))
			}
		}
		rep.Batches++
		rep.Events += len(b.Events)
		rep.Entities += len(b.Entities)
		if replay != nil {
			if err := replay(b); err != nil {
				return fmt.Errorf("replay batch %d: %w", b.Seq, err)
			}
		}
		return nil
	}
	for i, num := range nums {
		path := filepath.Join(l.dir, segmentName(num))
		if ck != nil && num < ck.segNum {
			// Wholly in the checkpoint: neither read nor checked again.
			st, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("stat segment: %w", err)
			}
			l.segs = append(l.segs, segmentAt{num: num, size: st.Size()})
			continue
		}
		end, dmg, err := scanSegment(path, -1, &l.seq, apply)
		if err != nil {
			return err
		}
		rep.Segments++
		last := i == len(nums)-1
		if dmg != nil && !last {
			return &CorruptError{File: path, Offset: dmg.off, Reason: dmg.reason}
		}
		if dmg != nil {
			// Only an incomplete last write may be cut: damage followed by
			// a valid batch is corruption, and cutting would drop that batch.
			if err := checkTornTail(path, dmg, l.seq); err != nil {
				return err
			}
		}
		l.segs = append(l.segs, segmentAt{num: num, size: end})
		if dmg != nil && dmg.complete {
			if rep.MovedAside, err = moveAside(path, dmg.off); err != nil {
				return err
			}
		}
		if dmg != nil {
			if err := l.cutTail(path, end, dmg, rep); err != nil {
				return err
			}
		}
	}
	if ck != nil && l.seq < ck.seq {
		// The last batches the checkpoint holds were cut from the log's
		// end (a damaged last record): the checkpoint keeps them, and new
		// batches must follow them.
		l.logger.Warn("event log: the checkpoint holds batches the log lacks; new batches follow the checkpoint's",
			"checkpoint_seq", ck.seq, "log_seq", l.seq)
		l.seq = ck.seq
	}
	if len(nums) == 0 {
		return l.createSegment(1)
	}
	last := l.segs[len(l.segs)-1]
	f, err := os.OpenFile(filepath.Join(l.dir, segmentName(last.num)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open last segment: %w", err)
	}
	l.f, l.segNum, l.segSize = f, last.num, last.size
	l.updateStats()
	return nil
}

// checkTornTail returns a *CorruptError when a valid batch following
// lastSeq lies after the damage dmg of the segment at path.
func checkTornTail(path string, dmg *damage, lastSeq uint64) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read damaged segment: %w", err)
	}
	if next := nextValidRecord(data, dmg.off+1, lastSeq); next >= 0 {
		_, b, _ := validRecordAt(data, next, lastSeq)
		return &CorruptError{File: path, Offset: dmg.off, Reason: fmt.Sprintf(
			"%s, followed by valid batches (the first, seq %d, at offset %d): not a torn tail", dmg.reason, b.Seq, next)}
	}
	return nil
}

// cutTail truncates the last segment to end (rewriting the header if it was
// damaged) and records the loss in rep.
func (l *Log) cutTail(path string, end int64, dmg *damage, rep *OpenReport) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat torn segment: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open torn segment: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(end); err != nil {
		return fmt.Errorf("truncate torn segment: %w", err)
	}
	if end < headerSize {
		if _, err := f.WriteAt(fileHeader(), 0); err != nil {
			return fmt.Errorf("rewrite segment header: %w", err)
		}
		l.segs[len(l.segs)-1].size = headerSize
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync truncated segment: %w", err)
	}
	rep.TruncatedBytes = st.Size() - end
	rep.Reason = fmt.Sprintf("%s at offset %d: %s", filepath.Base(path), dmg.off, dmg.reason)
	if rep.MovedAside != "" {
		l.logger.Error("event log: the last record is whole but damaged (not an incomplete write): its bytes are moved aside and the log starts without it; inspect the file, then remove it (`hir log check` fails while it exists)",
			"file", path, "offset", dmg.off, "seq", l.seq+1, "bytes", rep.TruncatedBytes, "reason", dmg.reason, "moved_to", rep.MovedAside)
		return nil
	}
	l.logger.Warn("event log: truncated torn tail",
		"file", path, "offset", dmg.off, "truncated_bytes", rep.TruncatedBytes, "reason", dmg.reason)
	return nil
}

// movedAsidePrefix starts the name of the files moveAside writes in the log
// directory.
const movedAsidePrefix = "damaged-"

// moveAside copies the bytes of the segment at path from off to its end
// into a file of their own beside it, durably, and returns its path.
func moveAside(path string, off int64) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read damaged segment: %w", err)
	}
	dir := filepath.Dir(path)
	out := filepath.Join(dir, fmt.Sprintf("%s%s-%d", movedAsidePrefix, filepath.Base(path), off))
	f, err := os.CreateTemp(dir, ".tmp-damaged-*")
	if err != nil {
		return "", fmt.Errorf("move damaged tail aside: %w", err)
	}
	_, err = f.Write(data[off:])
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), out)
	}
	if err == nil {
		err = SyncDir(dir)
	}
	if err != nil {
		return "", errors.Join(fmt.Errorf("move damaged tail aside: %w", err), os.Remove(f.Name()))
	}
	return out, nil
}

// createSegment starts segment num and makes it the one appended to.
func (l *Log) createSegment(num uint64) error {
	path := filepath.Join(l.dir, segmentName(num))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	if _, err := f.Write(fileHeader()); err != nil {
		f.Close()
		return fmt.Errorf("write segment header: %w", err)
	}
	if !l.opts.NoSync {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("sync segment header: %w", err)
		}
		if err := SyncDir(l.dir); err != nil {
			f.Close()
			return fmt.Errorf("sync log directory: %w", err)
		}
	}
	l.f, l.segNum, l.segSize = f, num, headerSize
	l.mu.Lock()
	l.segs = append(l.segs, segmentAt{num: num, size: headerSize})
	l.mu.Unlock()
	l.updateStats()
	return nil
}

func (l *Log) updateStats() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.Segments = len(l.segs)
	l.stats.Bytes = 0
	for _, s := range l.segs {
		l.stats.Bytes += s.size
	}
	l.stats.LastSeq = l.seq
	l.stats.IDs = l.seen.len()
}

// Append stores b durably and returns what was stored. It blocks until the
// batch is written and fsynced together with the batches queued beside it.
//
// Events whose non-empty ID is already stored (or repeated in b or in a
// batch committed in the same group) are dropped and counted as duplicates;
// when nothing is left the batch is acknowledged without writing (Seq 0).
// Entities and events are validated first; an invalid batch is rejected whole
// with ErrInvalidBatch. b is not retained; b.Seq is ignored.
//
// If ctx is done before the batch reaches the writer, nothing is stored and
// ctx's error is returned. Once the batch is queued, Append waits for the
// writer's outcome whatever happens to ctx (a commit is bounded by one
// write and one fsync): a nil error means stored, an error means not
// stored, so a caller that applies what Append stored never misses a
// batch that a cancelled request left in the log.
//
// An event whose id is stored with a different payload (or repeated so in
// b or a batch beside it) makes the batch fail whole with a *ConflictError
// ([ErrConflict]).
func (l *Log) Append(ctx context.Context, b Batch) (AppendResult, error) {
	return l.append(ctx, b, false)
}

// AppendReplicated is Append for a batch that another replica has stored
// already: an event whose id is stored here with a different payload is
// dropped and counted in AppendResult.Conflicts instead of failing the
// batch, so that the first payload this log stored for an id stays.
func (l *Log) AppendReplicated(ctx context.Context, b Batch) (AppendResult, error) {
	return l.append(ctx, b, true)
}

func (l *Log) append(ctx context.Context, b Batch, keepFirst bool) (AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return AppendResult{}, err
	}
	if len(b.Entities) == 0 && len(b.Events) == 0 {
		return AppendResult{}, nil
	}
	req, err := encodeRequest(&b)
	if err != nil {
		return AppendResult{}, err
	}
	req.keepFirst = keepFirst
	for i := range b.Events {
		if b.Events[i].ID != "" {
			req.prints[i] = l.seen.print(&b.Events[i])
		}
	}

	l.closeMu.RLock()
	if l.closed {
		l.closeMu.RUnlock()
		return AppendResult{}, ErrClosed
	}
	select {
	case l.queue <- req:
		l.closeMu.RUnlock()
	case <-ctx.Done():
		l.closeMu.RUnlock()
		return AppendResult{}, ctx.Err()
	}

	r := <-req.done
	return r.res, r.err
}

// encodeRequest validates and encodes b in the caller's goroutine, so that
// the single writer only frames, deduplicates and writes.
func encodeRequest(b *Batch) (*request, error) {
	for i := range b.Entities {
		if err := b.Entities[i].Validate(); err != nil {
			return nil, fmt.Errorf("%w: entity %d: %w", ErrInvalidBatch, i, err)
		}
	}
	for i := range b.Events {
		if err := b.Events[i].Validate(); err != nil {
			return nil, fmt.Errorf("%w: event %d: %w", ErrInvalidBatch, i, err)
		}
	}
	req := &request{
		buf:       make([]byte, seqBytes, 64+48*len(b.Events)),
		evEnds:    make([]int, len(b.Events)),
		ids:       make([]string, len(b.Events)),
		prints:    make([]uint64, len(b.Events)),
		nEntities: len(b.Entities),
		done:      make(chan result, 1),
	}
	req.buf = binary.AppendUvarint(req.buf, uint64(len(b.Entities)))
	for i := range b.Entities {
		req.buf = appendEntity(req.buf, &b.Entities[i])
	}
	req.entEnd = len(req.buf)
	req.buf = binary.AppendUvarint(req.buf, uint64(len(b.Events)))
	req.evStart = len(req.buf)
	for i := range b.Events {
		req.buf = appendEvent(req.buf, &b.Events[i])
		req.evEnds[i] = len(req.buf)
		req.ids[i] = b.Events[i].ID
	}
	if len(req.buf) > MaxBatchBytes {
		return nil, fmt.Errorf("%w: %d bytes encoded, limit %d", ErrBatchTooLarge, len(req.buf), MaxBatchBytes)
	}
	return req, nil
}

// Close stops accepting batches, commits the queued ones, fsyncs and closes
// the files and releases the directory lock. A second Close returns ErrClosed.
func (l *Log) Close() error {
	l.closeMu.Lock()
	if l.closed {
		l.closeMu.Unlock()
		return ErrClosed
	}
	l.closed = true
	close(l.queue)
	l.closeMu.Unlock()
	<-l.done
	err := l.closeErr
	if cerr := l.lock.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("release lock: %w", cerr)
	}
	return err
}

// Err returns nil while the log accepts writes, and the error (wrapping
// ErrFailed and its cause) while writes fail. Safe for concurrent use.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Replay reads every batch committed so far, in order, and calls fn for each
// (the batches may be retained). It may run concurrently with Append; batches
// committed after Replay starts may or may not be seen. An error from fn stops
// the replay and is returned.
func (l *Log) Replay(ctx context.Context, fn func(Batch) error) error {
	l.mu.Lock()
	segs := append([]segmentAt(nil), l.segs...)
	l.mu.Unlock()
	var seq uint64
	n := 0
	for _, s := range segs {
		path := filepath.Join(l.dir, segmentName(s.num))
		_, dmg, err := scanSegment(path, s.size, &seq, func(b Batch) error {
			if n++; n%256 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			return fn(b)
		})
		if err != nil {
			return fmt.Errorf("replay %s: %w", path, err)
		}
		if dmg != nil {
			return fmt.Errorf("replay: %w", &CorruptError{File: path, Offset: dmg.off, Reason: dmg.reason})
		}
	}
	return nil
}

// writer is the single goroutine that commits queued batches in groups.
func (l *Log) writer() {
	defer close(l.done)
	group := make([]*request, 0, 64)
	for {
		var retry <-chan time.Time
		if l.failErr != nil {
			retry = time.After(l.opts.RetryInterval)
		}
		var req *request
		var ok bool
		select {
		case req, ok = <-l.queue:
		case c := <-l.ckpts:
			info, err := l.writeCheckpoint(c.state)
			c.done <- checkpointResult{info: info, err: err}
			continue
		case <-retry:
			l.recoverFailed()
			continue
		}
		if !ok {
			break
		}
		group = append(group[:0], req)
		size := len(req.buf)
		open := true
	drain:
		for len(group) < maxGroupBatches && size < maxGroupBytes {
			select {
			case r, ok := <-l.queue:
				if !ok {
					open = false
					break drain
				}
				group = append(group, r)
				size += len(r.buf)
			default:
				break drain
			}
		}
		l.commit(group)
		clear(group)
		if !open {
			break
		}
	}
	l.closeErr = l.shutdown()
}

// shutdown fsyncs and closes the last segment.
func (l *Log) shutdown() error {
	if l.failErr != nil {
		l.recoverFailed()
	}
	if l.f == nil {
		return l.failErr
	}
	var err error
	if l.failErr == nil {
		if err = l.f.Sync(); err != nil {
			err = fmt.Errorf("sync segment: %w", err)
		}
	}
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close segment: %w", cerr)
	}
	return err
}

// probeBytes is the size of the write with which a failed log checks that
// it can write again.
const probeBytes = 64 << 10

// recoverFailed tries to leave the failed state: it cuts the log back to
// the state of the last successful commit (removing segments created
// since, truncating the last one to its committed size), checks with a
// probe write and fsync that the disk takes data again, cuts the probe off
// and clears failErr. On failure failErr is updated and the log stays
// failed. Called by the writer only.
func (l *Log) recoverFailed() {
	err := l.cutBack()
	if err == nil {
		err = l.probe()
	}
	if err != nil {
		l.setFailed(fmt.Errorf("%w: %w", ErrFailed, err))
		return
	}
	l.logger.Info("event log: writes work again", "segment", segmentName(l.segNum), "size", l.segSize)
	l.setFailed(nil)
}

// cutBack restores the files to the last successful commit and reopens
// the last segment for appending.
func (l *Log) cutBack() error {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.mu.Lock()
	for len(l.segs) > 1 && l.segs[len(l.segs)-1].num > l.goodNum {
		l.segs = l.segs[:len(l.segs)-1]
	}
	l.mu.Unlock()
	nums, err := listSegments(l.dir)
	if err != nil {
		return err
	}
	for _, n := range nums {
		if n > l.goodNum {
			if err := os.Remove(filepath.Join(l.dir, segmentName(n))); err != nil {
				return fmt.Errorf("remove segment of a failed commit: %w", err)
			}
		}
	}
	f, err := os.OpenFile(filepath.Join(l.dir, segmentName(l.goodNum)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("reopen segment: %w", err)
	}
	if err := f.Truncate(l.goodSize); err != nil {
		f.Close()
		return fmt.Errorf("cut back segment: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync segment: %w", err)
	}
	l.f, l.segNum, l.segSize = f, l.goodNum, l.goodSize
	l.mu.Lock()
	l.segs[len(l.segs)-1].size = l.goodSize
	l.mu.Unlock()
	l.updateStats()
	return nil
}

// probe writes and fsyncs probeBytes of zeros after the last segment's
// end, then cuts them off again.
func (l *Log) probe() error {
	_, werr := l.f.Write(make([]byte, probeBytes))
	if werr == nil {
		werr = l.f.Sync()
	}
	if err := l.f.Truncate(l.segSize); err != nil {
		return fmt.Errorf("cut probe: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync after probe: %w", err)
	}
	if werr != nil {
		return fmt.Errorf("probe write: %w", werr)
	}
	return nil
}

// setFailed sets failErr and its copy for Err.
func (l *Log) setFailed(err error) {
	l.failErr = err
	l.mu.Lock()
	l.failed = err
	l.mu.Unlock()
}

// commit deduplicates, frames and writes a group of batches with one fsync,
// then acknowledges each of them.
func (l *Log) commit(group []*request) {
	if l.failErr != nil {
		l.recoverFailed()
	}
	if l.failErr != nil {
		for _, req := range group {
			req.done <- result{err: l.failErr}
		}
		return
	}
	results := make([]result, len(group))
	var added []idKey // ids inserted into seen by this group, undone on failure
	l.wbuf = l.wbuf[:0]
	seq := l.seq
	var st Stats
	var err error
	for i, req := range group {
		payload, kept, dups, conflicts, cerr := l.dedup(req, &added)
		if cerr != nil {
			results[i].err = cerr // not stored; the group's other batches are
			continue
		}
		results[i].res.Duplicates, results[i].res.Conflicts = dups, conflicts
		st.Duplicates += uint64(dups)
		if kept == 0 && req.nEntities == 0 {
			continue // nothing new: acknowledged without writing
		}
		seq++
		binary.LittleEndian.PutUint64(payload, seq)
		rec := recordHeaderSize + int64(len(payload))
		if used := l.segSize + int64(len(l.wbuf)); used > headerSize && used+rec > l.opts.SegmentSizeBytes {
			if err = l.roll(); err != nil {
				break
			}
		}
		l.wbuf = appendRecord(l.wbuf, payload)
		results[i].res = AppendResult{Seq: seq, Entities: req.nEntities, Events: kept, Duplicates: dups, Conflicts: conflicts}
		st.Batches++
		st.Entities += uint64(req.nEntities)
		st.Events += uint64(kept)
	}
	if err == nil {
		err = l.flush()
	}
	if err != nil {
		for _, k := range added {
			l.seen.remove(k)
		}
		l.setFailed(fmt.Errorf("%w: %w", ErrFailed, err))
		l.logger.Error("event log: commit failed; refusing writes until a probe write succeeds", "err", err)
		for _, req := range group {
			req.done <- result{err: l.failErr}
		}
		l.recoverFailed() // cut the partial group off now; a success needs a probe too
		return
	}
	l.seq = seq
	l.goodNum, l.goodSize = l.segNum, l.segSize
	l.mu.Lock()
	l.segs[len(l.segs)-1].size = l.segSize
	l.stats.Batches += st.Batches
	l.stats.Entities += st.Entities
	l.stats.Events += st.Events
	l.stats.Duplicates += st.Duplicates
	l.stats.Commits++
	l.mu.Unlock()
	l.updateStats()
	for i, req := range group {
		req.done <- results[i]
	}
}

// dedup drops the events of req whose id is already known with the same
// payload, records the new ids in seen (and in added), and returns the
// payload to write with the number of events kept and dropped. An id known
// with a different payload fails req with a *ConflictError, leaving seen as
// it was, unless req.keepFirst: then the event is dropped and counted as a
// conflict.
func (l *Log) dedup(req *request, added *[]idKey) (payload []byte, kept, dups, conflicts int, err error) {
	var drop []bool
	start := len(*added)
	for i, id := range req.ids {
		if id == "" {
			continue
		}
		k := l.seen.key(id)
		if p, ok := l.seen.get(k); ok {
			if p != req.prints[i] {
				if !req.keepFirst {
					for _, k := range (*added)[start:] {
						l.seen.remove(k)
					}
					*added = (*added)[:start]
					return nil, 0, 0, 0, &ConflictError{Index: i, ID: id, Fields: differing(p, req.prints[i])}
				}
				conflicts++
			} else {
				dups++
			}
			if drop == nil {
				drop = make([]bool, len(req.ids))
			}
			drop[i] = true
			continue
		}
		l.seen.insert(k, req.prints[i])
		*added = append(*added, k)
	}
	kept = len(req.ids) - dups - conflicts
	if drop == nil {
		return req.buf, kept, 0, 0, nil
	}
	p := make([]byte, 0, len(req.buf))
	p = append(p, req.buf[:req.entEnd]...)
	p = binary.AppendUvarint(p, uint64(kept))
	start = req.evStart
	for i, end := range req.evEnds {
		if !drop[i] {
			p = append(p, req.buf[start:end]...)
		}
		start = end
	}
	return p, kept, dups, conflicts, nil
}

// flush writes the buffered records to the current segment and fsyncs it.
func (l *Log) flush() error {
	if len(l.wbuf) == 0 {
		return nil
	}
	n, err := l.f.Write(l.wbuf)
	l.segSize += int64(n)
	if err != nil {
		return fmt.Errorf("write segment %s: %w", segmentName(l.segNum), err)
	}
	l.wbuf = l.wbuf[:0]
	if l.opts.NoSync {
		return nil
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync segment %s: %w", segmentName(l.segNum), err)
	}
	l.mu.Lock()
	l.stats.Syncs++
	l.mu.Unlock()
	return nil
}

// roll flushes and fsyncs the current segment and starts the next one.
func (l *Log) roll() error {
	if err := l.flush(); err != nil {
		return err
	}
	if l.opts.NoSync {
		// The sealed segment must be durable before the next one exists.
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("sync segment %s: %w", segmentName(l.segNum), err)
		}
	}
	l.mu.Lock()
	if l.opts.NoSync {
		l.stats.Syncs++
	}
	l.segs[len(l.segs)-1].size = l.segSize
	l.mu.Unlock()
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("close segment %s: %w", segmentName(l.segNum), err)
	}
	return l.createSegment(l.segNum + 1)
}

// idKey is a 128-bit keyed hash of an event id. Keys are pointer-free, so
// a large set costs the garbage collector nothing; with random seeds a
// collision needs about 2^64 ids.
type idKey [2]uint64

// idSet maps the key of each stored event id to its payload's fingerprint
// (24 bytes an id). Its seeds are random per log and kept in its
// checkpoint, so that the keys stay valid across restarts.
type idSet struct {
	s0, s1 uint64
	m      map[idKey]uint64
}

func newIDSet() idSet {
	return idSet{s0: rand.Uint64(), s1: rand.Uint64(), m: make(map[idKey]uint64)}
}

func seeded(seed uint64, s string) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(seed)
	_, _ = d.WriteString(s)
	return d.Sum64()
}

func (s *idSet) key(id string) idKey        { return idKey{seeded(s.s0, id), seeded(s.s1, id)} }
func (s *idSet) get(k idKey) (uint64, bool) { p, ok := s.m[k]; return p, ok }
func (s *idSet) insert(k idKey, p uint64)   { s.m[k] = p }
func (s *idSet) remove(k idKey)             { delete(s.m, k) }
func (s *idSet) add(id string, p uint64)    { s.insert(s.key(id), p) }
func (s *idSet) len() int                   { return len(s.m) }

// printFields are the parts of an event's payload a fingerprint tells
// apart, in the order of their bits.
var printFields = [...]string{"src", "dst", "type", "ts", "weight"}

// print is the fingerprint of ev's payload (all but its id): the low 34
// bits hash the whole payload; above them, 6 bits of each printFields
// part's own hash say which parts differ. Two different payloads get the
// same fingerprint with a chance of about 2^-40.
func (s *idSet) print(ev *graph.Event) uint64 {
	var parts [len(printFields)]uint64
	var d xxhash.Digest
	var b [8]byte
	ref := func(r graph.Ref) uint64 {
		d.ResetWithSeed(s.s1)
		_, _ = d.Write([]byte{byte(r.Type)})
		_, _ = d.WriteString(r.ID)
		return d.Sum64()
	}
	num := func(v uint64) uint64 {
		binary.LittleEndian.PutUint64(b[:], v)
		d.ResetWithSeed(s.s1)
		_, _ = d.Write(b[:])
		return d.Sum64()
	}
	parts[0], parts[1] = ref(ev.Src), ref(ev.Dst)
	parts[2] = num(uint64(ev.Type))
	parts[3] = num(uint64(ev.TS))
	parts[4] = num(uint64(math.Float32bits(ev.Weight)))
	d.ResetWithSeed(s.s1)
	var fp uint64
	for i, p := range parts {
		binary.LittleEndian.PutUint64(b[:], p)
		_, _ = d.Write(b[:])
		fp |= (p & 63) << (34 + 6*i)
	}
	return fp | d.Sum64()&(1<<34-1)
}

// differing names the printFields parts in which fingerprints a and b
// differ; nil when only the whole-payload hash does.
func differing(a, b uint64) []string {
	var out []string
	for i, f := range printFields {
		if (a>>(34+6*i))&63 != (b>>(34+6*i))&63 {
			out = append(out, f)
		}
	}
	return out
}
