package index

import "github.com/RoaringBitmap/roaring/v2"

// Intersect returns a new bitmap holding the ids present in every input. No
// inputs, or any nil or empty input, give an empty bitmap. The inputs are not
// modified and the result never aliases them.
func Intersect(bms ...*roaring.Bitmap) *roaring.Bitmap {
	if len(bms) == 0 {
		return roaring.New()
	}
	for _, b := range bms {
		if b == nil || b.IsEmpty() {
			return roaring.New()
		}
	}
	if len(bms) == 1 {
		return bms[0].Clone()
	}
	return roaring.FastAnd(bms...)
}

// Union returns a new bitmap holding the ids present in any input. No inputs
// give an empty bitmap; nil inputs count as empty. The inputs are not
// modified and the result never aliases them.
func Union(bms ...*roaring.Bitmap) *roaring.Bitmap {
	nonNil := make([]*roaring.Bitmap, 0, len(bms))
	for _, b := range bms {
		if b != nil && !b.IsEmpty() {
			nonNil = append(nonNil, b)
		}
	}
	switch len(nonNil) {
	case 0:
		return roaring.New()
	case 1:
		return nonNil[0].Clone()
	}
	return roaring.FastOr(nonNil...)
}

// Without returns a new bitmap holding the ids of full that are not in drop.
// A nil full gives an empty bitmap; a nil drop drops nothing.
func Without(full, drop *roaring.Bitmap) *roaring.Bitmap {
	if full == nil {
		return roaring.New()
	}
	if drop == nil || drop.IsEmpty() {
		return full.Clone()
	}
	return roaring.AndNot(full, drop)
}
