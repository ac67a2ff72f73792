package eventlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// CorruptError is the typed form of [ErrCorrupt] (errors.Is(err, ErrCorrupt)
// holds for it): it names the damaged segment file and the offset at which
// the damage starts. Use errors.As to read the fields.
type CorruptError struct {
	// File is the path of the damaged segment.
	File string
	// Offset is the byte offset of the first damaged record (0: the header).
	Offset int64
	// Reason says what is wrong there.
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: %s at offset %d: %s", ErrCorrupt, e.File, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// minRecordBytes is the size of the smallest possible record: a record
// header and a payload of a seq and two empty counts.
const minRecordBytes = recordHeaderSize + seqBytes + 2

// validRecordAt reports whether data[off:] starts with a well-formed record
// (length in range, checksum matching, decodable payload) whose batch
// follows lastSeq and is numbered no further ahead than the remaining bytes
// allow. It returns the record's size and its batch.
func validRecordAt(data []byte, off int64, lastSeq uint64) (int64, Batch, bool) {
	rest := int64(len(data)) - off
	if rest < minRecordBytes {
		return 0, Batch{}, false
	}
	n := int64(binary.LittleEndian.Uint32(data[off:]))
	if n < seqBytes+2 || n > MaxBatchBytes || n > rest-recordHeaderSize {
		return 0, Batch{}, false
	}
	payload := data[off+recordHeaderSize : off+recordHeaderSize+n]
	// Cheap filter before the checksum: the batch must follow lastSeq, and
	// at most one batch fits per minRecordBytes of what is left.
	seq := binary.LittleEndian.Uint64(payload)
	if seq <= lastSeq || seq-lastSeq > uint64(rest/minRecordBytes)+1 {
		return 0, Batch{}, false
	}
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(data[off+4:]) {
		return 0, Batch{}, false
	}
	b, err := DecodeBatch(payload)
	if err != nil {
		return 0, Batch{}, false
	}
	return recordHeaderSize + n, b, true
}

// nextValidRecord returns the offset of the first valid record (see
// validRecordAt) in data after from, or -1.
func nextValidRecord(data []byte, from int64, lastSeq uint64) int64 {
	for p := max(from, headerSize); p+minRecordBytes <= int64(len(data)); p++ {
		if _, _, ok := validRecordAt(data, p, lastSeq); ok {
			return p
		}
	}
	return -1
}

// Damage describes one damaged region of a segment found by [Check] or
// [Repair].
type Damage struct {
	// File is the path of the segment.
	File string
	// Offset and Bytes delimit the unreadable region.
	Offset int64
	Bytes  int64
	// Reason says what is wrong at Offset.
	Reason string
	// TornTail is set when the region ends the last segment and is an
	// incomplete last write, which Open cuts off by itself.
	TornTail bool
	// AtEnd is set when the region ends the log but its record was written
	// whole (a bad checksum: corruption, not an incomplete write). Open
	// moves its bytes aside into a file of the log directory, logs an error
	// and starts without it.
	AtEnd bool
	// FirstLostSeq and LastLostSeq bound the sequence numbers of the
	// batches lost in the region, known from the batches on either side;
	// both 0 when unknown (a torn tail, or no batch follows).
	FirstLostSeq, LastLostSeq uint64
	// BatchesAfter counts the valid batches of the segment after the region.
	BatchesAfter int
}

// CheckReport is what [Check] and [Repair] found.
type CheckReport struct {
	// Segments is the number of segment files read.
	Segments int
	// Batches and Events count the valid batches and their events.
	Batches int
	Events  int
	// LastSeq is the sequence number of the last valid batch.
	LastSeq uint64
	// Damage lists the damaged regions, in log order; empty when clean.
	Damage []Damage
	// MovedAside lists the files in which Open keeps the damaged tails it
	// moved aside; they stay until an operator removes them.
	MovedAside []string
}

// Corrupt reports whether the log has damage beyond a torn tail, or
// moved-aside tails.
func (r *CheckReport) Corrupt() bool {
	if len(r.MovedAside) > 0 {
		return true
	}
	for _, d := range r.Damage {
		if !d.TornTail {
			return true
		}
	}
	return false
}

// Refused reports whether Open refuses the log: damage that does not end
// it.
func (r *CheckReport) Refused() bool {
	for _, d := range r.Damage {
		if !d.TornTail && !d.AtEnd {
			return true
		}
	}
	return false
}

// segmentLayout is the result of reading one segment record by record,
// resynchronising after damage.
type segmentLayout struct {
	keep   [][2]int64 // [start, end) of each valid record, in order
	damage []Damage
	events int
}

// layoutSegment reads data (a whole segment file at path) record by record.
// After an unreadable record it resynchronises on the next valid record
// (nextValidRecord). lastSeq is advanced past the kept batches. A bad magic
// or zeroed header is damage of the header, after which records are still
// looked for; an unknown version is an error.
func layoutSegment(ctx context.Context, path string, data []byte, lastSeq *uint64) (segmentLayout, error) {
	var lay segmentLayout
	size := int64(len(data))
	off := int64(headerSize)
	switch {
	case size < headerSize:
		lay.damage = append(lay.damage, Damage{File: path, Offset: 0, Bytes: size, TornTail: true,
			Reason: fmt.Sprintf("incomplete segment header (%d of %d bytes)", size, headerSize)})
		return lay, nil
	case string(data[:len(magic)]) != magic:
		lay.damage = append(lay.damage, Damage{File: path, Offset: 0, Bytes: headerSize, Reason: "bad segment header"})
	case binary.LittleEndian.Uint32(data[8:]) != formatVersion:
		return lay, fmt.Errorf("%w: %s: version %d, want %d", ErrUnsupportedVersion, path,
			binary.LittleEndian.Uint32(data[8:]), formatVersion)
	}
	for n := 0; off < size; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return lay, err
			}
		}
		if rec, b, ok := validRecordAt(data, off, *lastSeq); ok {
			lay.keep = append(lay.keep, [2]int64{off, off + rec})
			lay.events += len(b.Events)
			if d := lastDamageEndingAt(lay.damage, off); d != nil && d.FirstLostSeq == 0 && b.Seq > *lastSeq+1 {
				d.FirstLostSeq, d.LastLostSeq = *lastSeq+1, b.Seq-1
			}
			*lastSeq = b.Seq
			off += rec
			continue
		}
		d := Damage{File: path, Offset: off, Reason: recordProblem(data, off, *lastSeq)}
		next := nextValidRecord(data, off+1, *lastSeq)
		if next < 0 {
			d.Bytes, d.TornTail = size-off, !completeAt(data, off)
			lay.damage = append(lay.damage, d)
			break
		}
		d.Bytes = next - off
		lay.damage = append(lay.damage, d)
		off = next
	}
	// A damaged header directly followed by a damaged region is one region.
	if len(lay.damage) > 1 && lay.damage[0].Offset == 0 && lay.damage[1].Offset == headerSize {
		lay.damage[1].Offset, lay.damage[1].Bytes = 0, lay.damage[1].Bytes+headerSize
		lay.damage[1].Reason = lay.damage[0].Reason + "; " + lay.damage[1].Reason
		lay.damage = lay.damage[1:]
	}
	for i := range lay.damage {
		d := &lay.damage[i]
		for _, k := range lay.keep {
			if k[0] >= d.Offset+d.Bytes {
				d.BatchesAfter++
			}
		}
	}
	return lay, nil
}

// lastDamageEndingAt returns the damaged region that ends at off, or nil.
func lastDamageEndingAt(ds []Damage, off int64) *Damage {
	if k := len(ds); k > 0 && ds[k-1].Offset+ds[k-1].Bytes == off {
		return &ds[k-1]
	}
	return nil
}

// recordProblem says why data[off:] is not a valid record.
func recordProblem(data []byte, off int64, lastSeq uint64) string {
	rest := int64(len(data)) - off
	if rest < recordHeaderSize {
		return fmt.Sprintf("short record header (%d bytes)", rest)
	}
	n := int64(binary.LittleEndian.Uint32(data[off:]))
	switch {
	case n == 0 || n > MaxBatchBytes:
		return fmt.Sprintf("bad record length %d", n)
	case n > rest-recordHeaderSize:
		return fmt.Sprintf("short record (%d of %d payload bytes)", rest-recordHeaderSize, n)
	}
	payload := data[off+recordHeaderSize : off+recordHeaderSize+n]
	if got, want := crc32.Checksum(payload, castagnoli), binary.LittleEndian.Uint32(data[off+4:]); got != want {
		return fmt.Sprintf("checksum mismatch (crc32c %08x, want %08x)", got, want)
	}
	b, err := DecodeBatch(payload)
	if err != nil {
		return fmt.Sprintf("undecodable payload: %v", err)
	}
	return fmt.Sprintf("batch seq %d does not follow %d", b.Seq, lastSeq)
}

// Check reads every segment of the log in dir without changing anything
// and reports every damaged region, resynchronising on the next valid batch
// after each. The directory is locked while it runs ([ErrLocked] if a
// server has the log open). A clean log gives an empty Damage list.
func Check(ctx context.Context, dir string) (CheckReport, error) {
	return walkLog(ctx, dir, false)
}

// Repair rewrites each damaged segment of the log in dir with its valid
// batches only — every valid batch after a damaged region is kept — and
// reports what it dropped (as [Check] would have). Each segment is
// rewritten atomically (a temporary file fsynced, then renamed). The
// sequence numbers of the lost batches are left as a gap. The directory is
// locked while it runs.
func Repair(ctx context.Context, dir string) (CheckReport, error) {
	return walkLog(ctx, dir, true)
}

func walkLog(ctx context.Context, dir string, repair bool) (CheckReport, error) {
	var rep CheckReport
	if _, err := os.Stat(dir); err != nil {
		return rep, fmt.Errorf("open event log: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, "LOCK"))
	if err != nil {
		return rep, fmt.Errorf("open event log: %w", err)
	}
	defer lock.Close()
	nums, err := listSegments(dir)
	if err != nil {
		return rep, err
	}
	var seq uint64
	for _, num := range nums {
		path := filepath.Join(dir, segmentName(num))
		data, err := os.ReadFile(path)
		if err != nil {
			return rep, fmt.Errorf("read segment: %w", err)
		}
		lay, err := layoutSegment(ctx, path, data, &seq)
		if err != nil {
			return rep, err
		}
		rep.Segments++
		rep.Batches += len(lay.keep)
		rep.Events += lay.events
		rep.Damage = append(rep.Damage, lay.damage...)
		if repair && len(lay.damage) > 0 {
			// The checkpoint may hold a batch the rewrite drops; the next
			// Open replays the repaired log whole instead.
			if err := os.Remove(filepath.Join(dir, CheckpointFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return rep, fmt.Errorf("remove checkpoint: %w", err)
			}
			if err := rewriteSegment(path, data, lay.keep); err != nil {
				return rep, err
			}
		}
	}
	rep.LastSeq = seq
	// Only a region at the very end of the log is a torn tail, or cut
	// (moved aside) by Open.
	for i := range rep.Damage {
		d := &rep.Damage[i]
		end := i == len(rep.Damage)-1 && d.File == filepath.Join(dir, segmentName(nums[len(nums)-1])) && d.BatchesAfter == 0
		d.AtEnd = end && !d.TornTail
		if !end {
			d.TornTail = false
		}
	}
	aside, err := filepath.Glob(filepath.Join(dir, movedAsidePrefix+"*"))
	if err != nil {
		return rep, fmt.Errorf("list moved-aside tails: %w", err)
	}
	rep.MovedAside = aside
	if repair && len(rep.Damage) > 0 {
		if err := SyncDir(dir); err != nil {
			return rep, fmt.Errorf("sync log directory: %w", err)
		}
	}
	return rep, nil
}

// rewriteSegment replaces the segment at path with a header and the records
// of data at keep.
func rewriteSegment(path string, data []byte, keep [][2]int64) error {
	out := fileHeader()
	for _, k := range keep {
		out = append(out, data[k[0]:k[1]]...)
	}
	tmp := path + ".repair"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("rewrite segment: %w", err)
	}
	_, err = f.Write(out)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rewrite segment %s: %w", path, err)
	}
	return nil
}

// errCorruptf builds a *CorruptError.
func errCorruptf(path string, off int64, format string, args ...any) error {
	return &CorruptError{File: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
}
