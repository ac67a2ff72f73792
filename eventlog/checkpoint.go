package eventlog

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Checkpoint file constants; see FORMAT.md.
const (
	// CheckpointFile is the name of the checkpoint in the log directory.
	CheckpointFile    = "checkpoint"
	checkpointMagic   = "HIRCKPT1"
	checkpointEnd     = "HIRCKEND"
	checkpointVersion = 1
	// checkpointHeadSize is the fixed part before the ids: magic, version,
	// flags, seq, segment number and size, the two seeds and the id count.
	checkpointHeadSize = 8 + 4 + 4 + 8 + 8 + 8 + 8 + 8 + 8
	// checkpointTailSize is the checksum and end magic.
	checkpointTailSize = 4 + 8
	checkpointIDSize   = 24
)

// ErrBadCheckpoint marks a checkpoint file Open cannot use (Open then
// replays the whole log and says so in OpenReport.CheckpointSkipped).
var ErrBadCheckpoint = errors.New("bad event log checkpoint")

// CheckpointInfo describes a checkpoint written by [Log.Checkpoint] or
// restored by [Open].
type CheckpointInfo struct {
	// Seq is the last batch the checkpoint covers: Open replays only the
	// batches after it.
	Seq uint64
	// Bytes is the size of the checkpoint file; IDs the event ids it holds.
	Bytes int64
	IDs   int
	// Elapsed is how long writing or restoring it took.
	Elapsed time.Duration
}

// checkpointReq asks the writer goroutine for a checkpoint.
type checkpointReq struct {
	state func(io.Writer) error
	done  chan checkpointResult // buffered
}

type checkpointResult struct {
	info CheckpointInfo
	err  error
}

// Checkpoint writes the log's checkpoint: the position of the last
// committed batch, the ids the log deduplicates by, and the caller's own
// state as state writes it, in one file of the log directory
// ([CheckpointFile]) that replaces the previous one atomically (a
// temporary file, fsynced, renamed, the directory fsynced). A later
// [Open] with [Options.Restore] hands that state back and replays only
// the batches after it.
//
// What state writes must be the result of applying every batch committed
// so far and no other: the caller holds back its own appends (and the
// application of their batches) until Checkpoint returns. Appends from
// others wait while it runs. A crash at any point leaves the previous
// checkpoint or the new one, each valid with the log.
func (l *Log) Checkpoint(ctx context.Context, state func(io.Writer) error) (CheckpointInfo, error) {
	req := &checkpointReq{state: state, done: make(chan checkpointResult, 1)}
	l.closeMu.RLock()
	if l.closed {
		l.closeMu.RUnlock()
		return CheckpointInfo{}, ErrClosed
	}
	select {
	case l.ckpts <- req:
		l.closeMu.RUnlock()
	case <-ctx.Done():
		l.closeMu.RUnlock()
		return CheckpointInfo{}, ctx.Err()
	}
	r := <-req.done
	return r.info, r.err
}

// writeCheckpoint serves a checkpoint request. Called by the writer only.
func (l *Log) writeCheckpoint(state func(io.Writer) error) (CheckpointInfo, error) {
	start := time.Now()
	if l.failErr != nil {
		return CheckpointInfo{}, l.failErr
	}
	// The position the checkpoint names must be durable before it is.
	if err := l.f.Sync(); err != nil {
		return CheckpointInfo{}, fmt.Errorf("checkpoint: sync segment: %w", err)
	}
	tmp := filepath.Join(l.dir, CheckpointFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return CheckpointInfo{}, fmt.Errorf("checkpoint: %w", err)
	}
	var size int64
	err = l.writeCheckpointTo(f, state)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		var st os.FileInfo
		if st, err = f.Stat(); err == nil {
			size = st.Size()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(l.dir, CheckpointFile))
	}
	if err == nil {
		err = SyncDir(l.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return CheckpointInfo{}, fmt.Errorf("checkpoint: %w", err)
	}
	info := CheckpointInfo{Seq: l.seq, Bytes: size, IDs: l.seen.len(), Elapsed: time.Since(start)}
	l.mu.Lock()
	l.stats.CheckpointSeq = l.seq
	l.mu.Unlock()
	l.logger.Info("checkpoint written", "seq", info.Seq, "bytes", info.Bytes, "ids", info.IDs, "elapsed", info.Elapsed)
	return info, nil
}

// writeCheckpointTo writes the checkpoint to f.
func (l *Log) writeCheckpointTo(f io.Writer, state func(io.Writer) error) error {
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	h := make([]byte, 0, checkpointHeadSize)
	h = append(h, checkpointMagic...)
	h = binary.LittleEndian.AppendUint32(h, checkpointVersion)
	h = binary.LittleEndian.AppendUint32(h, 0)
	h = binary.LittleEndian.AppendUint64(h, l.seq)
	h = binary.LittleEndian.AppendUint64(h, l.segNum)
	h = binary.LittleEndian.AppendUint64(h, uint64(l.segSize))
	h = binary.LittleEndian.AppendUint64(h, l.seen.s0)
	h = binary.LittleEndian.AppendUint64(h, l.seen.s1)
	h = binary.LittleEndian.AppendUint64(h, uint64(l.seen.len()))
	if _, err := bw.Write(h); err != nil {
		return err
	}
	var rec [checkpointIDSize]byte
	for k, p := range l.seen.m {
		binary.LittleEndian.PutUint64(rec[0:], k[0])
		binary.LittleEndian.PutUint64(rec[8:], k[1])
		binary.LittleEndian.PutUint64(rec[16:], p)
		if _, err := bw.Write(rec[:]); err != nil {
			return err
		}
	}
	if err := state(bw); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	t := binary.LittleEndian.AppendUint32(nil, crc.Sum32())
	t = append(t, checkpointEnd...)
	_, err := f.Write(t)
	return err
}

// checkpointHead is the fixed part of a checkpoint.
type checkpointHead struct {
	seq, segNum uint64
	segSize     int64
	seeds       [2]uint64
	ids         uint64
	size        int64 // of the whole file
}

// restoreCheckpoint reads the checkpoint of the log directory, if there is
// one that fits the segments nums: it restores the id set and hands the
// caller's state to restore, whose commit it calls only once the whole
// file has checked out. It returns nil, nil without a checkpoint, and an
// error wrapping ErrBadCheckpoint for one it cannot use (nothing is
// restored then).
func (l *Log) restoreCheckpoint(nums []uint64, restore func(io.Reader) (func(), error)) (*checkpointHead, error) {
	path := filepath.Join(l.dir, CheckpointFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadCheckpoint, path, fmt.Sprintf(format, args...))
	}
	size := st.Size()
	if size < checkpointHeadSize+checkpointTailSize {
		return nil, bad("%d bytes", size)
	}
	crc := crc32.New(castagnoli)
	r := bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, size-checkpointTailSize), crc), 1<<20)
	hb := make([]byte, checkpointHeadSize)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, bad("read header: %v", err)
	}
	if string(hb[:8]) != checkpointMagic {
		return nil, bad("bad magic")
	}
	if v := binary.LittleEndian.Uint32(hb[8:]); v != checkpointVersion {
		return nil, bad("version %d, want %d", v, checkpointVersion)
	}
	u := func(off int) uint64 { return binary.LittleEndian.Uint64(hb[off:]) }
	h := &checkpointHead{seq: u(16), segNum: u(24), segSize: int64(u(32)), seeds: [2]uint64{u(40), u(48)}, ids: u(56), size: size}
	stateBytes := size - checkpointHeadSize - checkpointTailSize - int64(h.ids)*checkpointIDSize
	if h.ids > uint64(size)/checkpointIDSize || stateBytes < 0 {
		return nil, bad("%d ids in %d bytes", h.ids, size)
	}
	// The checkpoint must fit the log: its segment is there and holds the
	// batch it names.
	if !slices.Contains(nums, h.segNum) {
		return nil, bad("segment %s is not in the log", segmentName(h.segNum))
	}
	if sst, err := os.Stat(filepath.Join(l.dir, segmentName(h.segNum))); err != nil || sst.Size() < h.segSize {
		return nil, bad("segment %s is shorter than the checkpoint's %d bytes", segmentName(h.segNum), h.segSize)
	}

	// The ids are read whole (their count is bounded by the file's size
	// above), and their set is built beside the caller's restore.
	ids := make([]byte, h.ids*checkpointIDSize)
	if _, err := io.ReadFull(r, ids); err != nil {
		return nil, bad("read ids: %v", err)
	}
	seen := idSet{s0: h.seeds[0], s1: h.seeds[1], m: make(map[idKey]uint64, h.ids)}
	seenDone := make(chan struct{})
	go func() {
		defer close(seenDone)
		for rec := range slices.Chunk(ids, checkpointIDSize) {
			seen.m[idKey{binary.LittleEndian.Uint64(rec[0:]), binary.LittleEndian.Uint64(rec[8:])}] = binary.LittleEndian.Uint64(rec[16:])
		}
	}()
	defer func() { <-seenDone }()
	var commit func()
	if restore != nil {
		sr := io.LimitReader(r, stateBytes)
		commit, err = restore(sr)
		if err != nil {
			return nil, bad("restore state: %v", err)
		}
		if _, err := io.Copy(io.Discard, sr); err != nil {
			return nil, bad("read state: %v", err)
		}
	} else if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, bad("read state: %v", err)
	}
	var tail [checkpointTailSize]byte
	if _, err := f.ReadAt(tail[:], size-checkpointTailSize); err != nil {
		return nil, bad("read trailer: %v", err)
	}
	if string(tail[4:]) != checkpointEnd {
		return nil, bad("bad end magic")
	}
	if got, want := crc.Sum32(), binary.LittleEndian.Uint32(tail[:]); got != want {
		return nil, bad("checksum mismatch (crc32c %08x, want %08x)", got, want)
	}
	<-seenDone
	if uint64(len(seen.m)) != h.ids {
		return nil, bad("an id twice")
	}
	l.seen = seen
	if commit != nil {
		commit()
	}
	return h, nil
}
