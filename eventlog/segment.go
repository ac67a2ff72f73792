package eventlog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// On-disk constants; see FORMAT.md.
const (
	// magic starts every segment file.
	magic = "HIREVLOG"
	// formatVersion is the segment format version written by this package.
	formatVersion = 1
	// headerSize is the size of the segment file header.
	headerSize = 16
	// recordHeaderSize is the size of a record's length and checksum.
	recordHeaderSize = 8
	// segmentSuffix ends the name of every segment file.
	segmentSuffix = ".seg"
)

// MaxBatchBytes bounds the encoded size of one batch. Append rejects larger
// batches with ErrBatchTooLarge; a record claiming more is corrupt.
const MaxBatchBytes = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segmentName(num uint64) string { return fmt.Sprintf("%08d%s", num, segmentSuffix) }

// parseSegmentName returns the number of a segment file name, or false.
func parseSegmentName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(base) < 8 {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, 64)
	if err != nil || n == 0 {
		return 0, false
	}
	return n, true
}

// listSegments returns the segment numbers in dir, ascending.
func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	var nums []uint64
	for _, e := range ents {
		if n, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

func fileHeader() []byte {
	h := make([]byte, 0, headerSize)
	h = append(h, magic...)
	h = binary.LittleEndian.AppendUint32(h, formatVersion)
	return binary.LittleEndian.AppendUint32(h, 0) // flags, reserved
}

// appendRecord frames payload as a record and appends it to dst.
func appendRecord(dst, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
	return append(dst, payload...)
}

// damage describes where and why a segment stops being readable.
type damage struct {
	off    int64
	reason string
	// complete is set when the record at off is whole (its length fits
	// the file) but its checksum or payload is bad: not an incomplete
	// write, so never cut silently.
	complete bool
}

// scanSegment reads the segment at path up to limit bytes (limit < 0: the
// whole file) and calls fn for each batch in order. lastSeq is the sequence
// number of the previous batch; batches must follow it in increasing order.
//
// It returns the offset just after the last good record. When the file stops
// being readable before limit, it returns a non-nil *damage as well (the
// caller decides whether that is a torn tail or corruption). Errors from I/O,
// from fn, and sequence violations are returned as err.
func scanSegment(path string, limit int64, lastSeq *uint64, fn func(Batch) error) (int64, *damage, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, fmt.Errorf("open segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, nil, fmt.Errorf("stat segment: %w", err)
	}
	size := st.Size()
	if limit >= 0 && limit < size {
		size = limit
	}
	name := filepath.Base(path)

	r := bufio.NewReaderSize(io.LimitReader(f, size), 256<<10)
	hdr := make([]byte, headerSize)
	if size < headerSize {
		return 0, &damage{off: 0, reason: fmt.Sprintf("incomplete segment header (%d of %d bytes)", size, headerSize)}, nil
	}
	if _, err := io.ReadFull(r, hdr); err != nil {
		return 0, nil, fmt.Errorf("read segment header of %s: %w", name, err)
	}
	switch {
	case bytes.Equal(hdr, make([]byte, headerSize)):
		return 0, &damage{off: 0, reason: "zeroed segment header"}, nil
	case string(hdr[:len(magic)]) != magic:
		return 0, nil, errCorruptf(path, 0, "bad magic %q", hdr[:len(magic)])
	case binary.LittleEndian.Uint32(hdr[8:]) != formatVersion:
		return 0, nil, fmt.Errorf("%w: %s: version %d, want %d", ErrUnsupportedVersion, name,
			binary.LittleEndian.Uint32(hdr[8:]), formatVersion)
	}

	off := int64(headerSize)
	var rh [recordHeaderSize]byte
	var payload []byte
	for off < size {
		if size-off < recordHeaderSize {
			return off, &damage{off: off, reason: fmt.Sprintf("short record header (%d bytes)", size-off)}, nil
		}
		if _, err := io.ReadFull(r, rh[:]); err != nil {
			return off, nil, fmt.Errorf("read %s at offset %d: %w", name, off, err)
		}
		n := int64(binary.LittleEndian.Uint32(rh[0:]))
		sum := binary.LittleEndian.Uint32(rh[4:])
		var reason string
		switch {
		case n == 0 || n > MaxBatchBytes:
			reason = fmt.Sprintf("bad record length %d", n)
		case n > size-off-recordHeaderSize:
			reason = fmt.Sprintf("short record (%d of %d payload bytes)", size-off-recordHeaderSize, n)
		}
		if reason != "" {
			// An incomplete write, unless the rest of the file is a whole
			// payload with this checksum: then the length is what is damaged.
			rest, err := io.ReadAll(io.LimitReader(r, MaxBatchBytes+1))
			if err != nil {
				return off, nil, fmt.Errorf("read %s at offset %d: %w", name, off, err)
			}
			d := &damage{off: off, reason: reason, complete: wholePayload(rest, sum)}
			if d.complete {
				d.reason += fmt.Sprintf(", but the %d bytes after it are a whole payload with its checksum: a damaged length", len(rest))
			}
			return off, d, nil
		}
		if int64(cap(payload)) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return off, nil, fmt.Errorf("read %s at offset %d: %w", name, off, err)
		}
		if got := crc32.Checksum(payload, castagnoli); got != sum {
			return off, &damage{off: off, reason: fmt.Sprintf("checksum mismatch (crc32c %08x, want %08x)", got, sum), complete: true}, nil
		}
		b, err := DecodeBatch(payload)
		if err != nil {
			return off, &damage{off: off, reason: fmt.Sprintf("undecodable payload: %v", err), complete: true}, nil
		}
		if b.Seq <= *lastSeq {
			return off, nil, errCorruptf(path, off, "batch seq %d does not follow %d", b.Seq, *lastSeq)
		}
		*lastSeq = b.Seq
		if err := fn(b); err != nil {
			return off, nil, err
		}
		off += recordHeaderSize + n
	}
	return off, nil, nil
}

// wholePayload reports whether rest, the bytes after a record header whose
// length is unusable, is a payload whose checksum is sum.
func wholePayload(rest []byte, sum uint32) bool {
	return len(rest) > 0 && len(rest) <= MaxBatchBytes && crc32.Checksum(rest, castagnoli) == sum
}

// completeAt reports whether the damaged record at off of data (a whole
// segment) was written whole: its length fits data, or the rest of data is
// a payload with its checksum (a damaged length). A record that is not is
// an incomplete last write.
func completeAt(data []byte, off int64) bool {
	rest := int64(len(data)) - off - recordHeaderSize
	if rest < 0 {
		return false
	}
	n := int64(binary.LittleEndian.Uint32(data[off:]))
	if n > 0 && n <= MaxBatchBytes && n <= rest {
		return true
	}
	return wholePayload(data[off+recordHeaderSize:], binary.LittleEndian.Uint32(data[off+4:]))
}

// SyncDir fsyncs the directory dir, so that the files created, renamed
// or removed in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
