package index

import (
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
