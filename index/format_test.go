package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// snapshotsEqual compares the observable state of two snapshots.
func snapshotsEqual(t *testing.T, a, b *Snapshot) {
	t.Helper()
	if !a.live.Equals(b.live) {
		t.Fatalf("live differs: %v vs %v", a.live.GetCardinality(), b.live.GetCardinality())
	}
	if a.Seq() != b.Seq() {
		t.Errorf("Seq = %d, want %d", b.Seq(), a.Seq())
	}
	if diff := cmp.Diff(a.TokenSizes(), b.TokenSizes()); diff != "" {
		t.Fatalf("token sizes differ:\n%s", diff)
	}
	for tok := range a.TokenSizes() {
		if !a.Postings(tok).Equals(b.Postings(tok)) {
			t.Fatalf("posting %v differs", tok)
		}
	}
	it := a.live.Iterator()
	for it.HasNext() {
		id := it.Next()
		ea, _ := a.Embedding(id)
		eb, _ := b.Embedding(id)
		ta, _ := a.Tokens(id)
		tb, _ := b.Tokens(id)
		aa, _ := a.Attrs(id)
		ab, _ := b.Attrs(id)
		pa, ua, _ := a.Priors(id)
		pb, ub, _ := b.Priors(id)
		if !cmp.Equal(ea, eb) || !cmp.Equal(ta, tb) || !cmp.Equal(aa, ab) || pa != pb || ua != ub {
			t.Fatalf("doc %d differs", id)
		}
	}
	if diff := cmp.Diff(a.q.Residual(), b.q.Residual()); diff != "" {
		t.Fatalf("residual codebooks differ:\n%s", diff)
	}
	if b.product() == nil { // an older version's file: no product codes
		return
	}
	if diff := cmp.Diff(a.q.pq.cents, b.q.pq.cents); diff != "" {
		t.Fatalf("product codebooks differ:\n%s", diff)
	}
	if !cmp.Equal(a.resShare, b.resShare) {
		t.Fatal("residual shares differ")
	}
	for it := a.live.Iterator(); it.HasNext(); {
		id := int(it.Next())
		if !cmp.Equal(a.code.at(id), b.code.at(id)) || !cmp.Equal(a.pq.at(id), b.pq.at(id)) {
			t.Fatalf("doc %d: first-stage codes differ", id)
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 1200, 4)
	if err := ix.Delete(ctx, 3, 4, 500); err != nil {
		t.Fatal(err)
	}
	if err := ix.SetPriors(ctx, []uint32{1, 2, 700}, []float32{0.5, -2, 3.25}, []float32{0, 1.5, -0.75}, nil); err != nil {
		t.Fatal(err)
	}
	snap := ix.Snapshot()
	path := filepath.Join(t.TempDir(), "index.snap")
	if err := snap.SaveFile(path); err != nil {
		t.Fatalf("SaveFile() error = %v", err)
	}
	back, err := LoadFile(path)
	if err != nil {
		t.Fatalf("LoadFile() error = %v", err)
	}
	snapshotsEqual(t, snap, back)
	// The loaded snapshot serves the same answers and accepts writes.
	v := s.queries(1, 1)[0]
	f := Eq(AttrStatus, "active")
	r1, _ := snap.Search(ctx, Query{Vector: v, K: 10, Filter: f})
	r2, _ := back.Search(ctx, Query{Vector: v, K: 10, Filter: f})
	if diff := cmp.Diff(r1, r2, cmpopts.IgnoreFields(Result{}, "CandidatesTime", "RerankTime")); diff != "" {
		t.Errorf("Search after load differs:\n%s", diff)
	}
	ix2 := NewFromSnapshot(back, Options{})
	if err := ix2.Upsert(ctx, s.docs[3]); err != nil || !ix2.Snapshot().Contains(3) {
		t.Errorf("Upsert on loaded index: err %v", err)
	}
	if b, _ := ix2.Snapshot().Allowed(Eq(AttrCategory, s.docs[3].Attrs[AttrCategory][0])); !b.Contains(3) {
		t.Errorf("loaded index did not reuse the attribute dictionary for doc 3")
	}
}

func TestCorruptSnapshotRefused(t *testing.T) {
	ix, _ := testIndex(t, 300, 8)
	var buf bytes.Buffer
	if _, err := ix.Snapshot().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated header"},
		{"bad magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), "bad magic"},
		{"future version", mut(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 9); return b }), "unsupported format version 9"},
		{"truncated in docs", good[:len(good)/2], "truncated"},
		{"truncated end", good[:len(good)-1], "truncated"},
		{"flipped byte", mut(func(b []byte) []byte { b[len(b)/3] ^= 0x40; return b }), "checksum mismatch"},
		{"trailing junk", append(bytes.Clone(good), 1, 2, 3), "trailing bytes"},
		{"bad section tag", mut(func(b []byte) []byte { b[12] = 'Z'; return b }), "where QNTZ expected"},
		{"residual share not finite", mut(func(b []byte) []byte {
			return patchSection(b, secDocs, func(p []byte) { binary.LittleEndian.PutUint32(p[12:], 0x7fc00000) }) // NaN
		}), "residual share 0 is NaN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadSnapshot(bytes.NewReader(tc.data))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ReadSnapshot() error = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadSnapshot() error = %q, want it to mention %q", err, tc.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "bad.snap")
	if err := os.WriteFile(path, good[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadFile(truncated) error = %v, want ErrCorrupt naming the path", err)
	}
}

// FuzzSnapshotRoundTrip builds a small index from the fuzz input, round
// trips it, then corrupts one byte: the result must be refused with
// ErrCorrupt (or, for a no-op change, load identically) and never panic.
func FuzzSnapshotRoundTrip(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint32(10), byte(1))
	f.Add([]byte("abcdefghijklmnop"), uint32(999), byte(0x80))
	f.Add([]byte{}, uint32(0), byte(0))
	f.Fuzz(func(t *testing.T, docBytes []byte, pos uint32, flip byte) {
		ctx := context.Background()
		ix, err := New(Options{Quantizer: tinyQuantizer(t)})
		if err != nil {
			t.Fatal(err)
		}
		src := &byteSource{b: docBytes}
		for len(src.b) > 0 {
			id := uint32(src.next() * 300)
			if src.next()%4 == 0 {
				_ = ix.Delete(ctx, id)
				continue
			}
			d := Doc{ID: id, Embedding: []float32{float32(src.next()) / 255, float32(src.next()) / 255},
				Attrs: map[string][]string{AttrCategory: {fuzzValues[AttrCategory][src.next()%4]}}}
			if err := ix.Upsert(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		snap := ix.Snapshot()
		var buf bytes.Buffer
		if _, err := snap.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := ReadSnapshot(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("ReadSnapshot(good) error = %v", err)
		}
		snapshotsEqual(t, snap, back)
		data := buf.Bytes()
		i := int(pos % uint32(len(data)))
		data[i] ^= flip
		bad, err := ReadSnapshot(bytes.NewReader(data))
		switch {
		case flip == 0 && err != nil:
			t.Fatalf("ReadSnapshot(unchanged) error = %v", err)
		case flip != 0 && !errors.Is(err, ErrCorrupt):
			t.Fatalf("ReadSnapshot(byte %d ^= %#x) error = %v, want ErrCorrupt", i, flip, err)
		case flip == 0:
			snapshotsEqual(t, snap, bad)
		}
		// Truncation at the same position is refused too.
		if _, err := ReadSnapshot(bytes.NewReader(buf.Bytes()[:i])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ReadSnapshot(truncated at %d) error = %v, want ErrCorrupt", i, err)
		}
	})
}

// FuzzReadSnapshot loads arbitrary bytes as an index snapshot: the result
// is a snapshot or ErrCorrupt, never a panic or an unbounded allocation.
func FuzzReadSnapshot(f *testing.F) {
	ix, err := New(Options{Quantizer: tinyQuantizer(f)})
	if err != nil {
		f.Fatal(err)
	}
	if err := ix.Upsert(context.Background(), Doc{ID: 3, Embedding: []float32{0.5, 1},
		Attrs: map[string][]string{AttrCategory: {"shoes"}}}); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := ix.Snapshot().WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:len(buf.Bytes())/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ReadSnapshot(bytes.NewReader(data)); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ReadSnapshot error = %v, want nil or ErrCorrupt", err)
		}
	})
}

// patchSection applies f to the payload of section tag of the snapshot file
// b, in place, and redoes the section's checksum.
func patchSection(b []byte, tag string, f func(payload []byte)) []byte {
	rest := b[12:]
	for string(rest[:4]) != tag {
		rest = rest[12+binary.LittleEndian.Uint64(rest[4:12])+4:]
	}
	n := binary.LittleEndian.Uint64(rest[4:12])
	f(rest[12 : 12+n])
	binary.LittleEndian.PutUint32(rest[12+n:], crc32.Checksum(rest[:12+n], crcTable))
	return b
}
