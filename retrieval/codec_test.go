package retrieval

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hir-ads/hir/graph"
)

// smallEmbeddings is a valid file of two types for codec tests.
func smallEmbeddings() *EmbeddingsFile {
	mk := func(idx []uint32, dim int) *Matrix {
		vecs := make([][]float32, len(idx))
		for i := range vecs {
			vecs[i] = make([]float32, dim)
			for j := range vecs[i] {
				vecs[i][j] = float32(i*dim+j) / 10
			}
		}
		m, _ := NewMatrix(dim, idx, vecs)
		return m
	}
	return &EmbeddingsFile{Version: "v3", AsOf: 1_700_000_000_000, Dim: 3,
		Matrices:     map[graph.NodeType]*Matrix{graph.NodeUser: mk([]uint32{0, 1, 2, 5}, 3), graph.NodeAd: mk([]uint32{0, 1}, 3)},
		Fingerprints: map[graph.NodeType]uint64{graph.NodeUser: 42, graph.NodeAd: 7}}
}

func TestEmbeddingsCodec(t *testing.T) {
	f := smallEmbeddings()
	b, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEmbeddings(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, got, cmpopts.IgnoreUnexported(Matrix{})); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if v, ok := got.Matrices[graph.NodeUser].Vector(5); !ok || v[0] != 0.9 {
		t.Errorf("decoded matrix row index: Vector(5) = %v, %v", v, ok)
	}
	t.Run("every truncation is refused", func(t *testing.T) {
		for n := range len(b) {
			if _, err := DecodeEmbeddings(b[:n]); !errors.Is(err, ErrCorruptEmbeddings) {
				t.Fatalf("%d of %d bytes: err = %v, want ErrCorruptEmbeddings", n, len(b), err)
			}
		}
	})
	t.Run("every bit flip is refused", func(t *testing.T) {
		for i := range len(b) * 8 {
			c := append([]byte(nil), b...)
			c[i/8] ^= 1 << (i % 8)
			if _, err := DecodeEmbeddings(c); !errors.Is(err, ErrCorruptEmbeddings) {
				t.Fatalf("bit %d flipped: err = %v, want ErrCorruptEmbeddings", i, err)
			}
		}
	})
	t.Run("atomic file write", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, FileEmbeddings)
		if err := WriteEmbeddingsFile(path, f); err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Errorf("directory holds %d entries after the write, want only the file", len(ents))
		}
		if _, err := ReadEmbeddingsFile(path); err != nil {
			t.Error(err)
		}
		if _, err := ReadEmbeddingsFile(filepath.Join(dir, "absent")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("absent file: err = %v, want os.ErrNotExist", err)
		}
	})
}

func FuzzDecodeEmbeddings(f *testing.F) {
	b, err := smallEmbeddings().Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:40])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := DecodeEmbeddings(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptEmbeddings) {
				t.Fatalf("error %v does not wrap ErrCorruptEmbeddings", err)
			}
			return
		}
		out, err := ef.Encode()
		if err != nil {
			t.Fatalf("decoded file does not re-encode: %v", err)
		}
		if string(out) != string(data) {
			t.Fatalf("re-encoding differs from the input")
		}
	})
}
