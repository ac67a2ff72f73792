package serving

import (
	"errors"
	"testing"
)

func TestReRankWeight(t *testing.T) {
	tests := []struct {
		in, want float32
		err      bool
	}{
		{0, 3, false},     // default
		{-1, 0, false},    // off
		{2.5, 2.5, false}, // as given
		{10, 10, false},   // at the limit
		{10.5, 0, true},   // above it
	}
	for _, tc := range tests {
		w := tc.in
		err := reRankWeight(&w, 3, 10, "test weight")
		if tc.err {
			if !errors.Is(err, ErrBadOptions) {
				t.Errorf("reRankWeight(%v) error = %v, want ErrBadOptions", tc.in, err)
			}
			continue
		}
		if err != nil || w != tc.want {
			t.Errorf("reRankWeight(%v) = %v, %v; want %v", tc.in, w, err, tc.want)
		}
	}
	o := Options{CoEngageWeight: MaxCoEngageWeight + 1}
	if err := o.applyDefaults(); !errors.Is(err, ErrBadOptions) {
		t.Errorf("co-engagement weight above the limit: %v, want ErrBadOptions", err)
	}
}
