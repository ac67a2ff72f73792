package explore

import (
	"errors"
	"strconv"
)

// ErrBadCursor is returned by ParseCursor for a cursor it did not make.
var ErrBadCursor = errors.New("explore: invalid cursor")

// FormatCursor encodes page position pos (an offset or an id to resume at)
// as an opaque cursor.
func FormatCursor(pos uint64) string { return strconv.FormatUint(pos, 10) }

// ParseCursor decodes a cursor made by FormatCursor; "" is position 0.
func ParseCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > 20 || s[0] == '+' {
		return 0, ErrBadCursor
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, ErrBadCursor
	}
	return n, nil
}

// Page returns the bounds [lo, hi) of the page of at most limit items that
// starts at offset in a list of n items, and whether more items follow it.
// An offset past the end gives an empty page.
func Page(n int, offset uint64, limit int) (lo, hi int, more bool) {
	if offset >= uint64(n) || limit <= 0 {
		return n, n, false
	}
	lo = int(offset)
	hi = min(n, lo+limit)
	return lo, hi, hi < n
}

// Spread returns at most k indices of [0, n), evenly spaced and ascending:
// all of them when n <= k, else floor(i*n/k) for i in [0, k).
func Spread(n, k int) []int {
	if n <= 0 || k <= 0 {
		return nil
	}
	if n <= k {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, k)
	for i := range out {
		out[i] = int(int64(i) * int64(n) / int64(k))
	}
	return out
}
