package eventlog

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hir-ads/hir/graph"
)

func mathFloat32bits(f float32) uint32 { return math.Float32bits(f) }

func TestBatchRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		b    Batch
	}{
		{"empty", Batch{Seq: 1}},
		{"entities only", Batch{Seq: 2, Entities: []graph.Entity{testEntity(1), {Type: graph.NodeUser, ID: "u"}}}},
		{"events only", Batch{Seq: 3, Events: []graph.Event{testEvent("a", 1), testEvent("", 2)}}},
		{"mixed", func() Batch { b := testBatch("m", 3, 5); b.Seq = math.MaxUint64; return b }()},
		{"extremes", Batch{Seq: 7, Events: []graph.Event{{
			ID: "é\x00", Src: graph.Ref{Type: 255, ID: ""}, Dst: graph.Ref{Type: graph.NodePixel, ID: "p"},
			Type: 255, TS: math.MinInt64, Weight: float32(math.Inf(-1)),
		}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := AppendBatch(nil, &tc.b)
			got, err := DecodeBatch(enc)
			if err != nil {
				t.Fatalf("DecodeBatch(AppendBatch(%+v)) error = %v", tc.b, err)
			}
			if diff := cmp.Diff(tc.b, got, batchOpts); diff != "" {
				t.Errorf("DecodeBatch(AppendBatch(b)) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeBatchErrors(t *testing.T) {
	valid := AppendBatch(nil, func() *Batch { b := testBatch("e", 2, 2); return &b }())
	tests := []struct {
		name string
		p    []byte
	}{
		{"nil", nil},
		{"short seq", []byte{1, 2, 3}},
		{"truncated", valid[:len(valid)-1]},
		{"trailing byte", append(append([]byte(nil), valid...), 0)},
		{"huge entity count", binary.AppendUvarint(make([]byte, 8), 1<<40)},
		{"overlong varint", append(make([]byte, 8), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{"duplicate attr", AppendBatch(nil, &Batch{})[:8:8]},
	}
	// Hand-build an entity with a repeated attribute key.
	dup := binary.AppendUvarint(make([]byte, 8), 1)
	dup = append(dup, byte(graph.NodeAd), 1, 'a', 0, 2, 1, 'k', 1, 'v', 1, 'k', 1, 'w', 0)
	dup = binary.AppendUvarint(dup, 0)
	tests[len(tests)-1].p = dup
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if b, err := DecodeBatch(tc.p); !errors.Is(err, ErrDecode) {
				t.Errorf("DecodeBatch(%x) = %+v, %v; want ErrDecode", tc.p, b, err)
			}
		})
	}
}

// fuzzBatch builds a batch from arbitrary bytes.
func fuzzBatch(data []byte) Batch {
	r := fuzzReader{data: data}
	b := Batch{Seq: r.u64()}
	for range r.n(4) {
		e := graph.Entity{Type: graph.NodeType(r.byte()), ID: r.str(), Text: r.str()}
		if k := r.n(3); k > 0 {
			e.Attrs = map[string]string{}
			for range k {
				e.Attrs[r.str()] = r.str()
			}
		}
		for range r.n(5) {
			e.Vector = append(e.Vector, math.Float32frombits(uint32(r.u64())))
		}
		b.Entities = append(b.Entities, e)
	}
	for range r.n(6) {
		b.Events = append(b.Events, graph.Event{
			ID:     r.str(),
			Src:    graph.Ref{Type: graph.NodeType(r.byte()), ID: r.str()},
			Dst:    graph.Ref{Type: graph.NodeType(r.byte()), ID: r.str()},
			Type:   graph.EdgeType(r.byte()),
			TS:     int64(r.u64()),
			Weight: math.Float32frombits(uint32(r.u64())),
		})
	}
	return b
}

type fuzzReader struct{ data []byte }

func (r *fuzzReader) byte() byte {
	if len(r.data) == 0 {
		return 0
	}
	c := r.data[0]
	r.data = r.data[1:]
	return c
}
func (r *fuzzReader) n(max int) int { return int(r.byte()) % (max + 1) }
func (r *fuzzReader) u64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(r.byte())
	}
	return v
}
func (r *fuzzReader) str() string {
	n := min(int(r.byte())%24, len(r.data))
	s := string(r.data[:n])
	r.data = r.data[n:]
	return s
}

func FuzzBatchRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x01\x02\x02\x03ad1\x05hello\x01\x01k\x01v\x02"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x09\x00\x03\x04ev-1\x01\x02u1\x02\x03ad9\x02"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzBatch(data)
		enc := AppendBatch(nil, &b)
		got, err := DecodeBatch(enc)
		if err != nil {
			t.Fatalf("DecodeBatch(AppendBatch(%+v)) error = %v", b, err)
		}
		if diff := cmp.Diff(b, got, batchOpts); diff != "" {
			t.Fatalf("round trip mismatch (-want +got):\n%s", diff)
		}
		if again := AppendBatch(nil, &got); string(again) != string(enc) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, enc)
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	for _, b := range []Batch{{}, testBatch("s", 1, 1), testBatch("t", 2, 3)} {
		f.Add(AppendBatch(nil, &b))
	}
	f.Add([]byte("\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := DecodeBatch(p)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("DecodeBatch error %v does not wrap ErrDecode", err)
			}
			return
		}
		again, err := DecodeBatch(AppendBatch(nil, &b))
		if err != nil {
			t.Fatalf("DecodeBatch(AppendBatch(DecodeBatch(p))) error = %v", err)
		}
		if diff := cmp.Diff(b, again, batchOpts); diff != "" {
			t.Fatalf("re-decode mismatch (-want +got):\n%s", diff)
		}
	})
}
