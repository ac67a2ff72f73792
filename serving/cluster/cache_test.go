package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hir-ads/hir/graph"
)

func TestCacheRoundTrip(t *testing.T) {
	prefix := testPrefix(t)
	cache := newTestClient(t, prefix, "a").NewCache(CacheOptions{})
	other := newTestClient(t, prefix, "b").NewCache(CacheOptions{}) // another replica
	ad := graph.Ref{Type: graph.NodeAd, ID: "ad-1"}
	tests := []struct {
		name string
		ref  graph.Ref
		vec  []float32
	}{
		{name: "ordinary", ref: graph.Ref{Type: graph.NodeUser, ID: "u1"}, vec: []float32{0.25, -1.5, 3e-8, 1e30}},
		{name: "specials", ref: graph.Ref{Type: graph.NodeUser, ID: "u:2 with spaces"},
			vec: []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32}},
		{name: "empty", ref: ad, vec: []float32{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := cache.Set(t.Context(), "v1", tc.ref, tc.vec); err != nil {
				t.Fatalf("Set: %v", err)
			}
			got, ok, err := other.Get(t.Context(), "v1", tc.ref)
			if err != nil || !ok {
				t.Fatalf("Get = %v, %v, %v; want a hit", got, ok, err)
			}
			if diff := cmp.Diff(tc.vec, got); diff != "" {
				t.Errorf("Get (-set +got):\n%s", diff)
			}
			// Another model version does not see it.
			if got, ok, err := other.Get(t.Context(), "v2", tc.ref); err != nil || ok {
				t.Errorf("Get(v2) = %v, %v, %v; want a miss", got, ok, err)
			}
		})
	}
}

func TestCacheMGetMSet(t *testing.T) {
	prefix := testPrefix(t)
	cache := newTestClient(t, prefix, "a").NewCache(CacheOptions{})
	refs := make([]graph.Ref, 6)
	vecs := make([][]float32, len(refs))
	for i := range refs {
		refs[i] = graph.Ref{Type: graph.NodeAd, ID: fmt.Sprint("ad", i)}
		vecs[i] = []float32{float32(i), float32(i) / 7, -float32(i)}
	}
	// Store the even ones.
	var setRefs []graph.Ref
	var setVecs [][]float32
	want := make([][]float32, len(refs))
	for i := 0; i < len(refs); i += 2 {
		setRefs, setVecs = append(setRefs, refs[i]), append(setVecs, vecs[i])
		want[i] = vecs[i]
	}
	if err := cache.MSet(t.Context(), "v1", setRefs, setVecs); err != nil {
		t.Fatalf("MSet: %v", err)
	}
	got, err := cache.MGet(t.Context(), "v1", refs)
	if err != nil {
		t.Fatalf("MGet: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MGet (-want +got):\n%s", diff)
	}
	if got, err := cache.MGet(t.Context(), "v1", nil); err != nil || len(got) != 0 {
		t.Errorf("MGet(no refs) = %v, %v; want empty", got, err)
	}
	if err := cache.MSet(t.Context(), "v1", refs, vecs[:2]); !errors.Is(err, ErrInvalid) {
		t.Errorf("MSet(6 refs, 2 vecs) = %v, want ErrInvalid", err)
	}
}

func TestCacheTTL(t *testing.T) {
	prefix := testPrefix(t)
	const ttl = 200 * time.Millisecond
	c := newTestClient(t, prefix, "a")
	cache := c.NewCache(CacheOptions{TTL: ttl})
	refs := []graph.Ref{{Type: graph.NodeUser, ID: "u1"}, {Type: graph.NodeUser, ID: "u2"}}
	if err := cache.Set(t.Context(), "v1", refs[0], []float32{1}); err != nil {
		t.Fatal(err)
	}
	if err := cache.MSet(t.Context(), "v1", refs[1:], [][]float32{{2}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		pttl, err := c.rdb.PTTL(t.Context(), cache.key("v1", r)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if pttl <= 0 || pttl > ttl {
			t.Errorf("PTTL(%s) = %v, want in (0, %v]", r, pttl, ttl)
		}
	}
	time.Sleep(ttl + 50*time.Millisecond)
	got, err := cache.MGet(t.Context(), "v1", refs)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != nil || got[1] != nil {
		t.Errorf("MGet after the TTL = %v, want misses", got)
	}
}

func TestCacheCorrupt(t *testing.T) {
	prefix := testPrefix(t)
	c := newTestClient(t, prefix, "a")
	cache := c.NewCache(CacheOptions{})
	ref := graph.Ref{Type: graph.NodeUser, ID: "u1"}
	if err := c.rdb.Set(t.Context(), cache.key("v1", ref), "abcde", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cache.Get(t.Context(), "v1", ref); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Get(5-byte value) = %v, want ErrCorrupt", err)
	}
	if _, err := cache.MGet(t.Context(), "v1", []graph.Ref{ref}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("MGet(5-byte value) = %v, want ErrCorrupt", err)
	}
}

func TestVectorEncoding(t *testing.T) {
	// The layout is fixed: little-endian IEEE 754 binary32.
	got := AppendVector([]byte{0xff}, []float32{1, -2})
	want := []byte{0xff, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}
	if !cmp.Equal(got, want) {
		t.Errorf("AppendVector = % x, want % x", got, want)
	}
}

func FuzzVectorRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0x80, 0x3f})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, p []byte) {
		vec, err := DecodeVector(p)
		if len(p)%4 != 0 {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeVector(%d bytes) = %v, want ErrCorrupt", len(p), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("DecodeVector(%d bytes): %v", len(p), err)
		}
		if back := AppendVector(nil, vec); !bytes.Equal(back, p) {
			t.Fatalf("AppendVector(DecodeVector(% x)) = % x", p, back)
		}
	})
}

func BenchmarkCacheMGet(b *testing.B) {
	prefix := testPrefix(b)
	cache := newTestClient(b, prefix, "a").NewCache(CacheOptions{})
	for _, n := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			refs := make([]graph.Ref, n)
			vecs := make([][]float32, n)
			for i := range refs {
				refs[i] = graph.Ref{Type: graph.NodeAd, ID: fmt.Sprint("ad", i)}
				vecs[i] = make([]float32, 64)
			}
			if err := cache.MSet(b.Context(), "v1", refs, vecs); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cache.MGet(b.Context(), "v1", refs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/vector")
		})
	}
}
