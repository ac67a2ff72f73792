package index

// pvec is a persistent vector: fixed-size chunks shared between snapshots
// and copied on write. Slot i holds width consecutive elements.
type pvec[T any] struct {
	width  int
	chunks [][]T
}

const (
	pvecShift = 10
	pvecChunk = 1 << pvecShift
)

// at returns the width elements of slot i, or nil when the slot has never
// been written. The result must not be modified.
func (v *pvec[T]) at(i int) []T {
	c := i >> pvecShift
	if c >= len(v.chunks) || v.chunks[c] == nil {
		return nil
	}
	o := (i & (pvecChunk - 1)) * v.width
	return v.chunks[c][o : o+v.width]
}

// get returns slot i of a width-1 vector, or the zero value.
func (v *pvec[T]) get(i int) T {
	s := v.at(i)
	if s == nil {
		var zero T
		return zero
	}
	return s[0]
}

// pvecTxn edits a private copy of a pvec, copying each chunk at most once.
type pvecTxn[T any] struct {
	v     *pvec[T]
	owned map[int]bool
}

// edit starts a transaction on a shallow copy of v; v itself is untouched.
func edit[T any](v *pvec[T]) *pvecTxn[T] {
	nv := &pvec[T]{width: v.width, chunks: append([][]T(nil), v.chunks...)}
	return &pvecTxn[T]{v: nv, owned: make(map[int]bool)}
}

// slot returns the writable elements of slot i, growing the vector and
// copying the chunk on first write in this transaction.
func (t *pvecTxn[T]) slot(i int) []T {
	c := i >> pvecShift
	for c >= len(t.v.chunks) {
		t.v.chunks = append(t.v.chunks, nil)
	}
	if !t.owned[c] {
		nc := make([]T, pvecChunk*t.v.width)
		copy(nc, t.v.chunks[c])
		t.v.chunks[c] = nc
		t.owned[c] = true
	}
	o := (i & (pvecChunk - 1)) * t.v.width
	return t.v.chunks[c][o : o+t.v.width]
}

func (t *pvecTxn[T]) set(i int, x T) { t.slot(i)[0] = x }
