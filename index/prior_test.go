package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// TestPriors checks that the re-rank adds PriorWeight*Prior to the dot
// product, that SetPriors changes only the priors of live docs and publishes
// a new snapshot, and that Upsert sets the prior from Doc.Prior.
func TestPriors(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 600, 5)
	v := s.queries(1, 3)[0]
	before := ix.Snapshot()
	base, err := before.Search(ctx, Query{Vector: v, K: 10, Exhaustive: true})
	if err != nil {
		t.Fatal(err)
	}
	// Give the doc ranked last among all docs a large prior.
	all, _ := before.Search(ctx, Query{Vector: v, K: 600, Exhaustive: true})
	last := all.Hits[len(all.Hits)-1].ID
	if err := ix.SetPriors(ctx, []uint32{last, 100000}, []float32{10, 1}); err != nil {
		t.Fatal(err)
	}
	after := ix.Snapshot()
	if p, _ := before.Prior(last); p != 0 {
		t.Errorf("old snapshot sees prior %v, want 0 (snapshots are immutable)", p)
	}
	if _, ok := after.Prior(100000); ok {
		t.Errorf("SetPriors made unknown doc 100000 live")
	}
	for _, tc := range []struct {
		name    string
		weight  float32
		wantTop bool // is `last` the first hit?
	}{
		{"weight 0 ignores priors", 0, false},
		{"weight 1 lifts the doc", 1, true},
		{"negative weight", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, exhaustive := range []bool{true, false} {
				res, err := after.Search(ctx, Query{Vector: v, K: 10, Exhaustive: exhaustive, PriorWeight: tc.weight,
					Include: roaring.BitmapOf(last), Options: SearchOptions{ExhaustiveMax: 1, MinCandidates: 20}})
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Hits[0].ID == last; got != tc.wantTop {
					t.Errorf("exhaustive=%v: top hit %d, want top == %d: %v", exhaustive, res.Hits[0].ID, last, tc.wantTop)
				}
				if tc.wantTop {
					e, _ := after.Embedding(last)
					if want := Dot(v, e) + 10*tc.weight; res.Hits[0].Score != want {
						t.Errorf("score %v, want dot+weight*prior = %v", res.Hits[0].Score, want)
					}
				}
			}
		})
	}
	if res, _ := after.Search(ctx, Query{Vector: v, K: 10, Exhaustive: true}); res.Hits[0].ID != base.Hits[0].ID || res.Hits[0].Score != base.Hits[0].Score {
		t.Errorf("weight 0 changed the top hit: %+v vs %+v", res.Hits[0], base.Hits[0])
	}
	// Upsert replaces the prior with the doc's own.
	d := s.docs[last]
	d.Prior = -3
	if err := ix.Upsert(ctx, d); err != nil {
		t.Fatal(err)
	}
	if p, _ := ix.Snapshot().Prior(last); p != -3 {
		t.Errorf("prior after Upsert = %v, want -3", p)
	}
	if err := ix.SetPriors(ctx, []uint32{1}, nil); err == nil {
		t.Errorf("SetPriors with mismatched lengths: no error")
	}
}

// TestReadVersion1 checks that a version-1 file (DOCS without priors) still
// loads, every prior reading 0.
func TestReadVersion1(t *testing.T) {
	ix, _ := testIndex(t, 300, 6)
	snap := ix.Snapshot()
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	v1 := downgradeToV1(t, buf.Bytes(), snap.q.dim)
	back, err := ReadSnapshot(bytes.NewReader(v1))
	if err != nil {
		t.Fatalf("ReadSnapshot(version 1) error = %v", err)
	}
	snapshotsEqual(t, snap, back)
	binary.LittleEndian.PutUint32(v1[8:12], 3)
	if _, err := ReadSnapshot(bytes.NewReader(v1)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("version 3: error %v, want ErrCorrupt", err)
	}
}

// downgradeToV1 rewrites a version-2 file as version 1: the prior of every
// doc is dropped from DOCS (all priors must be 0) and the checksum redone.
func downgradeToV1(t *testing.T, b []byte, dim int) []byte {
	t.Helper()
	out := append([]byte(nil), b[:12]...)
	binary.LittleEndian.PutUint32(out[8:12], 1)
	rest := b[12:]
	for len(rest) > 0 {
		tag := string(rest[:4])
		n := binary.LittleEndian.Uint64(rest[4:12])
		payload := rest[12 : 12+n]
		if tag == secDocs {
			var p []byte
			p = append(p, payload[:12]...) // seq, n
			r := payload[12:]
			for len(r) > 0 {
				head := 4 + 4*dim
				p = append(p, r[:head]...)
				if binary.LittleEndian.Uint32(r[head:]) != 0 {
					t.Fatalf("downgrade: doc with a prior")
				}
				r = r[head+4:]
				m := int(binary.LittleEndian.Uint32(r))
				p = append(p, r[:4+4*m]...)
				r = r[4+4*m:]
			}
			payload = p
		}
		var sec bytes.Buffer
		sec.WriteString(tag)
		sec.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(payload))))
		sec.Write(payload)
		sec.Write(binary.LittleEndian.AppendUint32(nil, crc32.Checksum(sec.Bytes(), crcTable)))
		out = append(out, sec.Bytes()...)
		rest = rest[12+n+4:]
	}
	return out
}
