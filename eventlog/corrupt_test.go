package eventlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeBatches appends n single-writer batches to a fresh log in dir and
// returns them with the file offset at which each record ends.
func writeBatches(t *testing.T, opts Options, n int) ([]Batch, []int64) {
	t.Helper()
	l, _, _ := openTest(t, opts)
	var batches []Batch
	var ends []int64
	for i := range n {
		b := testBatch(fmt.Sprint("b", i), 1, 3)
		b.Seq = mustAppend(t, l, b).Seq
		batches = append(batches, b)
		ends = append(ends, l.Stats().Bytes)
	}
	mustClose(t, l)
	return batches, ends
}

func TestCorruptTail(t *testing.T) {
	const n = 5
	tests := []struct {
		name   string
		damage func(t *testing.T, path string, ends []int64) // ends[i]: end of record i
		keep   int                                           // batches that survive
		reason string
		// aside: the damaged record is whole (not an incomplete write):
		// its bytes are moved aside with an error, not cut with a warning.
		aside bool
	}{
		{"truncated mid payload", func(t *testing.T, path string, ends []int64) {
			truncate(t, path, ends[n-1]-7)
		}, n - 1, "short record", false},
		{"truncated mid record header", func(t *testing.T, path string, ends []int64) {
			truncate(t, path, ends[n-2]+3)
		}, n - 1, "short record header", false},
		{"flipped payload byte", func(t *testing.T, path string, ends []int64) {
			flip(t, path, ends[n-2]+recordHeaderSize+10)
		}, n - 1, "checksum mismatch", true},
		{"length beyond the file", func(t *testing.T, path string, ends []int64) {
			writeAt(t, path, ends[n-2], binary.LittleEndian.AppendUint32(nil, 1<<20))
		}, n - 1, "a damaged length", true},
		{"appended garbage", func(t *testing.T, path string, ends []int64) {
			appendFile(t, path, []byte("\x13\x00\x00\x00garbage that is not a record"))
		}, n, "checksum mismatch", true},
		{"appended zeros", func(t *testing.T, path string, ends []int64) {
			appendFile(t, path, make([]byte, 4096))
		}, n, "bad record length 0", false},
		{"undecodable payload with a valid checksum", func(t *testing.T, path string, ends []int64) {
			appendFile(t, path, appendRecord(nil, []byte("not a batch")))
		}, n, "undecodable payload", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			batches, ends := writeBatches(t, Options{Dir: dir}, n)
			path := filepath.Join(dir, segmentName(1))
			tc.damage(t, path, ends)
			damaged := fileSize(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			logger, logs := logBuffer()
			l, rep, got := openTest(t, Options{Dir: dir, Logger: logger})
			if diff := cmp.Diff(batches[:tc.keep], got, batchOpts); diff != "" {
				t.Errorf("replay after damage mismatch (-want +got):\n%s", diff)
			}
			wantEnd := int64(headerSize)
			if tc.keep > 0 {
				wantEnd = ends[tc.keep-1]
			}
			if rep.TruncatedBytes != damaged-wantEnd || rep.TruncatedBytes == 0 {
				t.Errorf("OpenReport.TruncatedBytes = %d, want %d", rep.TruncatedBytes, damaged-wantEnd)
			}
			if !strings.Contains(rep.Reason, tc.reason) || !strings.Contains(rep.Reason, fmt.Sprintf("offset %d", wantEnd)) {
				t.Errorf("OpenReport.Reason = %q, want it to contain %q and offset %d", rep.Reason, tc.reason, wantEnd)
			}
			if size := fileSize(t, path); size != wantEnd {
				t.Errorf("segment is %d bytes after recovery, want %d", size, wantEnd)
			}
			level := "level=WARN"
			if tc.aside {
				level = "level=ERROR"
				if rep.MovedAside == "" {
					t.Errorf("OpenReport.MovedAside empty for a whole damaged record")
				} else if b, err := os.ReadFile(rep.MovedAside); err != nil || !bytes.Equal(b, before[wantEnd:]) {
					t.Errorf("moved-aside file %s holds %d bytes (%v), want the %d cut", rep.MovedAside, len(b), err, len(before)-int(wantEnd))
				}
			} else if rep.MovedAside != "" {
				t.Errorf("an incomplete write moved aside to %s, want it cut", rep.MovedAside)
			}
			if !strings.Contains(logs.String(), level) || !strings.Contains(logs.String(), tc.reason) {
				t.Errorf("no %s logged naming %q; log: %s", level, tc.reason, logs)
			}

			// Appending works and survives another reopen.
			more := testBatch("more", 1, 2)
			more.Seq = mustAppend(t, l, more).Seq
			mustClose(t, l)
			_, rep2, got2 := openTest(t, Options{Dir: dir})
			want := append(append([]Batch(nil), batches[:tc.keep]...), more)
			if diff := cmp.Diff(want, got2, batchOpts); diff != "" {
				t.Errorf("replay after recovery and append mismatch (-want +got):\n%s", diff)
			}
			if rep2.TruncatedBytes != 0 || rep2.Reason != "" {
				t.Errorf("second reopen report = %+v, want clean", rep2)
			}
		})
	}
}

func TestCorruptHeaderOfLastSegment(t *testing.T) {
	tests := []struct {
		name    string
		content []byte
		reason  string
	}{
		{"empty file", nil, "incomplete segment header"},
		{"partial header", []byte(magic[:5]), "incomplete segment header"},
		{"zeroed header", make([]byte, 100), "zeroed segment header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			batches, _ := writeBatches(t, Options{Dir: dir}, 2)
			path := filepath.Join(dir, segmentName(2)) // a crash right after rolling
			if err := os.WriteFile(path, tc.content, 0o644); err != nil {
				t.Fatal(err)
			}
			l, rep, got := openTest(t, Options{Dir: dir})
			if diff := cmp.Diff(batches, got, batchOpts); diff != "" {
				t.Errorf("replay mismatch (-want +got):\n%s", diff)
			}
			if rep.TruncatedBytes != int64(len(tc.content)) || !strings.Contains(rep.Reason, tc.reason) {
				t.Errorf("OpenReport = %+v, want %d bytes truncated because of %q", rep, len(tc.content), tc.reason)
			}
			more := testBatch("more", 0, 1)
			more.Seq = mustAppend(t, l, more).Seq
			mustClose(t, l)
			_, _, got = openTest(t, Options{Dir: dir})
			if diff := cmp.Diff(append(batches, more), got, batchOpts); diff != "" {
				t.Errorf("replay after recovery mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCorruptEarlierSegment(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(t *testing.T, path string)
		wantErr error
		want    string
	}{
		{"flipped byte", func(t *testing.T, path string) { flip(t, path, headerSize+recordHeaderSize+3) }, ErrCorrupt,
			fmt.Sprintf("%s at offset %d: checksum mismatch", segmentName(1), headerSize)},
		{"truncated", func(t *testing.T, path string) { truncate(t, path, fileSize(t, path)-1) }, ErrCorrupt, "short record"},
		{"bad magic", func(t *testing.T, path string) { writeAt(t, path, 0, []byte("NOTALOG!")) }, ErrCorrupt, "bad magic"},
		{"future version", func(t *testing.T, path string) { writeAt(t, path, 8, []byte{9, 0, 0, 0}) }, ErrUnsupportedVersion, "version 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeBatches(t, Options{Dir: dir, SegmentSizeBytes: 512}, 12)
			if files := segmentFiles(t, dir); len(files) < 3 {
				t.Fatalf("%d segments, want >= 3", len(files))
			}
			tc.damage(t, filepath.Join(dir, segmentName(1)))
			_, _, err := Open(context.Background(), Options{Dir: dir}, nil)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want %v mentioning %q", err, tc.wantErr, tc.want)
			}
		})
	}
}

func TestSequenceOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	writeBatches(t, Options{Dir: dir}, 2)
	// A well-formed record whose seq repeats an earlier one is corruption,
	// not a torn tail, even at the end of the last segment.
	b := testBatch("dup", 0, 1)
	b.Seq = 1
	appendFile(t, filepath.Join(dir, segmentName(1)), appendRecord(nil, AppendBatch(nil, &b)))
	if _, _, err := Open(context.Background(), Options{Dir: dir}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func writeAt(t *testing.T, path string, off int64, p []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, path, off, []byte{b[off] ^ 0x40})
}

func appendFile(t *testing.T, path string, p []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(p); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptMiddle damages a segment in the middle, with valid batches
// after the damage: Open must refuse with a *CorruptError naming the file
// and offset and leave the files untouched; Check must report the damage;
// Repair must keep every valid batch but the damaged ones.
func TestCorruptMiddle(t *testing.T) {
	const n = 8
	tests := []struct {
		name     string
		segSize  int64 // 0: one segment
		seg      func(nsegs int) uint64
		damage   func(t *testing.T, path string, ends []int64) int64 // returns the damage offset
		lost     []int                                               // batches (0-based) the repair drops
		reason   string
		firstSeq uint64 // first lost seq reported by Check; 0: unknown
	}{
		{"bit flip in the middle of the last segment", 0, nil, func(t *testing.T, path string, ends []int64) int64 {
			flip(t, path, ends[2]+recordHeaderSize+12)
			return ends[2]
		}, []int{3}, "checksum mismatch", 4},
		{"bit flip in the first record of the last segment", 0, nil, func(t *testing.T, path string, ends []int64) int64 {
			flip(t, path, headerSize+recordHeaderSize+9)
			return headerSize
		}, []int{0}, "checksum mismatch", 1},
		{"damaged record length in the middle", 0, nil, func(t *testing.T, path string, ends []int64) int64 {
			writeAt(t, path, ends[4], binary.LittleEndian.AppendUint32(nil, 1<<30))
			return ends[4]
		}, []int{5}, "bad record length", 6},
		{"zeroed block across records", 0, nil, func(t *testing.T, path string, ends []int64) int64 {
			writeAt(t, path, ends[1]+5, make([]byte, ends[3]-ends[1]))
			return ends[1]
		}, []int{2, 3, 4}, "checksum mismatch", 3},
		{"zeroed header of the last segment", 0, nil, func(t *testing.T, path string, ends []int64) int64 {
			writeAt(t, path, 0, make([]byte, headerSize))
			return 0
		}, nil, "zeroed segment header", 0},
		{"bit flip in an older segment", 600, func(int) uint64 { return 1 }, func(t *testing.T, path string, ends []int64) int64 {
			flip(t, path, headerSize+recordHeaderSize+20)
			return headerSize
		}, []int{0}, "checksum mismatch", 1},
		{"bit flip in the middle of the last of several segments", 600, func(nsegs int) uint64 { return uint64(nsegs) },
			nil, nil, "checksum mismatch", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			batches, ends := writeBatches(t, Options{Dir: dir, SegmentSizeBytes: tc.segSize}, n)
			files := segmentFiles(t, dir)
			num := uint64(1)
			if tc.seg != nil {
				num = tc.seg(len(files))
			}
			if tc.segSize > 0 && len(files) < 3 {
				t.Fatalf("%d segments, want >= 3", len(files))
			}
			path := filepath.Join(dir, segmentName(num))
			damage, lost := tc.damage, tc.lost
			if damage == nil {
				// The last segment holds the last batches: damage its first
				// record when it holds another one after it.
				var seqs []uint64
				var zero uint64
				if _, _, err := scanSegment(path, -1, &zero, func(b Batch) error {
					seqs = append(seqs, b.Seq)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if len(seqs) < 2 {
					t.Fatalf("last segment holds %d batches; the test needs two", len(seqs))
				}
				firstInSeg := int(seqs[0]) - 1
				damage = func(t *testing.T, path string, _ []int64) int64 {
					flip(t, path, headerSize+recordHeaderSize+9)
					return headerSize
				}
				lost = []int{firstInSeg}
			}
			off := damage(t, path, ends)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			_, _, err = Open(context.Background(), Options{Dir: dir}, nil)
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want a *CorruptError", err)
			}
			if ce.File != path || ce.Offset != off || !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("CorruptError = %+v, want file %s offset %d reason %q", ce, path, off, tc.reason)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", off)) {
				t.Errorf("Open error %q does not name the file and offset", err)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Errorf("Open changed the damaged segment (%d -> %d bytes)", len(before), len(after))
			}

			rep, err := Check(context.Background(), dir)
			if err != nil {
				t.Fatalf("Check = %v", err)
			}
			if !rep.Corrupt() || len(rep.Damage) != 1 {
				t.Fatalf("Check damage = %+v, want one corrupt region", rep.Damage)
			}
			if d := rep.Damage[0]; d.File != path || d.Offset != off || d.TornTail || d.BatchesAfter == 0 ||
				(tc.firstSeq != 0 && (d.FirstLostSeq != tc.firstSeq || d.LastLostSeq != tc.firstSeq+uint64(len(lost))-1)) {
				t.Errorf("Check damage = %+v, want %s at %d, not torn, lost seqs from %d (%d)", d, path, off, tc.firstSeq, len(lost))
			}
			if rep.Batches != n-len(lost) {
				t.Errorf("Check found %d valid batches, want %d", rep.Batches, n-len(lost))
			}

			if _, err := Repair(context.Background(), dir); err != nil {
				t.Fatalf("Repair = %v", err)
			}
			rep2, err := Check(context.Background(), dir)
			if err != nil || len(rep2.Damage) != 0 {
				t.Fatalf("Check after repair = %+v, %v; want clean", rep2.Damage, err)
			}
			var want []Batch
			for i, b := range batches {
				if !slices.Contains(lost, i) {
					want = append(want, b)
				}
			}
			l, orep, got := openTest(t, Options{Dir: dir})
			if diff := cmp.Diff(want, got, batchOpts); diff != "" {
				t.Errorf("replay after repair mismatch (-want +got):\n%s", diff)
			}
			if orep.TruncatedBytes != 0 {
				t.Errorf("Open after repair truncated %d bytes", orep.TruncatedBytes)
			}
			more := testBatch("more", 0, 2)
			more.Seq = mustAppend(t, l, more).Seq
			if more.Seq != batches[n-1].Seq+1 {
				t.Errorf("next seq after repair = %d, want %d", more.Seq, batches[n-1].Seq+1)
			}
			mustClose(t, l)
		})
	}
}

// TestCorruptLargeSegment reproduces the report: a bit flip at 10% of a
// large last segment must not cut the 90% after it.
func TestCorruptLargeSegment(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := openTest(t, Options{Dir: dir, NoSync: true})
	for i := range 2000 {
		mustAppend(t, l, testBatch(fmt.Sprint("big", i), 0, 20))
	}
	mustClose(t, l)
	path := filepath.Join(dir, segmentName(1))
	size := fileSize(t, path)
	flip(t, path, size/10)
	_, _, err := Open(context.Background(), Options{Dir: dir}, nil)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Offset > size/10 || ce.Offset < size/10-MaxBatchBytes {
		t.Fatalf("Open = %v, want a *CorruptError near offset %d", err, size/10)
	}
	if got := fileSize(t, path); got != size {
		t.Fatalf("segment is %d bytes after the refused Open, want %d", got, size)
	}
	rep, err := Repair(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Batches != 1999 || rep.Events != 1999*20 {
		t.Errorf("Repair kept %d batches, %d events; want 1999, %d", rep.Batches, rep.Events, 1999*20)
	}
}

// FuzzSegment opens arbitrary bytes after a good segment header (seeded
// with real records) as the last segment: Open either replays or refuses
// with ErrCorrupt, never panics; Check then Repair leave a log that Check
// finds clean and Open replays without cutting anything.
func FuzzSegment(f *testing.F) {
	var seed []byte
	for i := range 3 {
		b := testBatch(fmt.Sprint("s", i), 1, 2)
		b.Seq = uint64(i + 1)
		seed = appendRecord(seed, AppendBatch(nil, &b))
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-5])
	mid := append([]byte(nil), seed...)
	mid[len(mid)/3] ^= 0x10
	f.Add(mid)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), append(fileHeader(), body...), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		l, _, err := Open(ctx, Options{Dir: dir, NoSync: true}, nil)
		if err == nil {
			l.Close()
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want nil or ErrCorrupt", err)
		}
		if _, err := Check(ctx, dir); err != nil {
			t.Fatalf("Check = %v", err)
		}
		rep, err := Repair(ctx, dir)
		if err != nil {
			t.Fatalf("Repair = %v", err)
		}
		after, err := Check(ctx, dir)
		if err != nil || len(after.Damage) != 0 || after.Batches != rep.Batches {
			t.Fatalf("Check after Repair = %+v, %v; want clean with %d batches", after, err, rep.Batches)
		}
		l, orep, err := Open(ctx, Options{Dir: dir, NoSync: true}, nil)
		if err != nil || orep.TruncatedBytes != 0 || orep.Batches != rep.Batches {
			t.Fatalf("Open after Repair = %+v, %v; want %d batches, nothing cut", orep, err, rep.Batches)
		}
		l.Close()
	})
}
