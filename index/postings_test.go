package index

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/go-cmp/cmp"
)

func TestSetAlgebra(t *testing.T) {
	bm := roaring.BitmapOf
	a, b, c := bm(1, 2, 3, 70000), bm(2, 3, 4), bm(9, 10)
	empty := roaring.New()
	tests := []struct {
		name string
		fn   func() *roaring.Bitmap
		want []uint32
	}{
		{"intersect/no inputs", func() *roaring.Bitmap { return Intersect() }, nil},
		{"intersect/one input", func() *roaring.Bitmap { return Intersect(a) }, []uint32{1, 2, 3, 70000}},
		{"intersect/with empty", func() *roaring.Bitmap { return Intersect(a, empty) }, nil},
		{"intersect/with nil", func() *roaring.Bitmap { return Intersect(a, nil) }, nil},
		{"intersect/disjoint", func() *roaring.Bitmap { return Intersect(a, c) }, nil},
		{"intersect/overlap", func() *roaring.Bitmap { return Intersect(a, b) }, []uint32{2, 3}},
		{"union/no inputs", func() *roaring.Bitmap { return Union() }, nil},
		{"union/one input", func() *roaring.Bitmap { return Union(b) }, []uint32{2, 3, 4}},
		{"union/with empty and nil", func() *roaring.Bitmap { return Union(b, empty, nil) }, []uint32{2, 3, 4}},
		{"union/disjoint", func() *roaring.Bitmap { return Union(b, c) }, []uint32{2, 3, 4, 9, 10}},
		{"without/nil full", func() *roaring.Bitmap { return Without(nil, a) }, nil},
		{"without/nil drop", func() *roaring.Bitmap { return Without(a, nil) }, []uint32{1, 2, 3, 70000}},
		{"without/overlap", func() *roaring.Bitmap { return Without(a, b) }, []uint32{1, 70000}},
		{"without/disjoint", func() *roaring.Bitmap { return Without(b, c) }, []uint32{2, 3, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.fn()
			if diff := cmp.Diff(tc.want, got.ToArray(), cmpEmpty); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
		})
	}
	// Results never alias inputs.
	u := Union(a)
	u.Add(5)
	if a.Contains(5) {
		t.Errorf("Union(a) aliases a")
	}
	i := Intersect(a)
	i.Add(6)
	if a.Contains(6) {
		t.Errorf("Intersect(a) aliases a")
	}
}

var cmpEmpty = cmp.Transformer("nilEmpty", func(s []uint32) []uint32 {
	if len(s) == 0 {
		return nil
	}
	return s
})

// manyBitmaps returns n bitmaps of per ids each in [0, span), drawn at
// random (scattered) or as runs of consecutive ids.
func manyBitmaps(r *rand.Rand, n, per int, span uint32, runs bool) []*roaring.Bitmap {
	bms := make([]*roaring.Bitmap, n)
	for i := range bms {
		b := roaring.New()
		base := r.Uint32N(span)
		for j := range per {
			if runs {
				b.Add((base + uint32(j)) % span)
			} else {
				b.Add(r.Uint32N(span))
			}
		}
		bms[i] = b
	}
	return bms
}

// TestUnionMany checks Union of many inputs, where it ORs the small ones
// densely, against a pairwise OR, with large inputs (bitmap and run
// containers), nil and empty ones mixed in, and ids spread too wide for
// the dense array.
func TestUnionMany(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	large := roaring.New()
	large.AddRange(100_000, 180_000) // run container after RunOptimize
	large.RunOptimize()
	dense := roaring.New()
	for i := uint32(0); i < 200_000; i += 3 {
		dense.Add(i) // bitmap containers
	}
	tests := []struct {
		name string
		bms  []*roaring.Bitmap
	}{
		{"scattered", manyBitmaps(r, 1000, 10, 1_000_000, false)},
		{"runs", manyBitmaps(r, 1000, 10, 1_000_000, true)},
		{"just enough inputs", manyBitmaps(r, denseUnionMin, 3, 70_000, false)},
		{"one short of dense", manyBitmaps(r, denseUnionMin-1, 3, 70_000, false)},
		{"with large, nil and empty", append(manyBitmaps(r, 100, 20, 300_000, false), large, nil, roaring.New(), dense)},
		{"too sparse for dense", append(manyBitmaps(r, 40, 1, 1000, false), roaring.BitmapOf(1<<31))},
		{"largest id", append(manyBitmaps(r, 40, 2, 1<<20, false), roaring.BitmapOf(math.MaxUint32))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := roaring.New()
			for _, b := range tc.bms {
				if b != nil {
					want.Or(b)
				}
			}
			got := Union(tc.bms...)
			if !got.Equals(want) {
				t.Fatalf("Union of %d inputs: %d ids, want %d", len(tc.bms), got.GetCardinality(), want.GetCardinality())
			}
			var extra uint32
			for want.Contains(extra) {
				extra++
			}
			got.Add(extra)
			for i, b := range tc.bms {
				if b != nil && b.Contains(extra) {
					t.Fatalf("the result aliases input %d", i)
				}
			}
		})
	}
}

// BenchmarkUnion measures Union of an attribute filter's value bitmaps: a
// thousand values of ten ads each among a million ads, the ads of one
// value scattered or consecutive, against roaring.FastOr of the same
// inputs.
func BenchmarkUnion(b *testing.B) {
	for _, runs := range []bool{false, true} {
		bms := manyBitmaps(rand.New(rand.NewPCG(1, 2)), 1009, 10, 1_000_000, runs)
		name := "scattered"
		if runs {
			name = "runs"
		}
		b.Run(name+"/Union", func(b *testing.B) {
			for b.Loop() {
				_ = Union(bms...)
			}
		})
		b.Run(name+"/FastOr", func(b *testing.B) {
			for b.Loop() {
				_ = roaring.FastOr(bms...)
			}
		})
	}
}
