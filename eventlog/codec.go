package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/hir-ads/hir/graph"
)

// Batch is the unit of the log: the entities and events of one ingest request,
// stored and replayed atomically.
type Batch struct {
	// Seq is the batch sequence number assigned by the log (1, 2, 3, ...).
	// It is ignored by Append and set on replayed batches.
	Seq      uint64
	Entities []graph.Entity
	Events   []graph.Event
}

// ErrDecode is returned (wrapped) when a batch payload cannot be decoded.
var ErrDecode = errors.New("decode batch")

// seqBytes is the size of the fixed-width sequence number that starts every
// payload; being fixed-width, it can be patched after encoding.
const seqBytes = 8

// Smallest encodings, used to bound counts read from untrusted input before
// allocating: an entity is type + three empty lengths + two zero counts, an
// event is an empty id, two refs (type + empty id), type, ts and weight.
const (
	minEntityBytes = 1 + 1 + 1 + 1 + 1
	minEventBytes  = 1 + 2 + 2 + 1 + 1 + 4
)

// AppendBatch appends the binary encoding of b to dst and returns the
// extended slice. Attribute keys are written in sorted order, so the encoding
// is deterministic. The entities and events are not validated.
func AppendBatch(dst []byte, b *Batch) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, b.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(b.Entities)))
	for i := range b.Entities {
		dst = appendEntity(dst, &b.Entities[i])
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Events)))
	for i := range b.Events {
		dst = appendEvent(dst, &b.Events[i])
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendEntity(dst []byte, e *graph.Entity) []byte {
	dst = append(dst, byte(e.Type))
	dst = appendString(dst, e.ID)
	dst = appendString(dst, e.Text)
	dst = binary.AppendUvarint(dst, uint64(len(e.Attrs)))
	if len(e.Attrs) > 0 {
		keys := make([]string, 0, len(e.Attrs))
		for k := range e.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			dst = appendString(dst, k)
			dst = appendString(dst, e.Attrs[k])
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Vector)))
	for _, v := range e.Vector {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
	}
	return dst
}

func appendEvent(dst []byte, ev *graph.Event) []byte {
	dst = appendString(dst, ev.ID)
	dst = append(dst, byte(ev.Src.Type))
	dst = appendString(dst, ev.Src.ID)
	dst = append(dst, byte(ev.Dst.Type))
	dst = appendString(dst, ev.Dst.ID)
	dst = append(dst, byte(ev.Type))
	dst = binary.AppendVarint(dst, ev.TS)
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(ev.Weight))
}

// DecodeBatch decodes a payload written by AppendBatch. It never panics and
// allocates at most in proportion to len(p); on malformed input it returns an
// error wrapping ErrDecode. The returned batch does not alias p.
func DecodeBatch(p []byte) (Batch, error) {
	d := decoder{buf: p}
	b, err := d.batch()
	if err != nil {
		return Batch{}, fmt.Errorf("%w at byte %d: %w", ErrDecode, d.off, err)
	}
	return b, nil
}

var (
	errShort    = errors.New("unexpected end of payload")
	errVarint   = errors.New("malformed varint")
	errTooMany  = errors.New("count exceeds payload size")
	errTrailing = errors.New("trailing bytes after batch")
	errDupAttr  = errors.New("duplicate attribute key")
)

type decoder struct {
	buf []byte
	off int
}

func (d *decoder) remaining() int { return len(d.buf) - d.off }

func (d *decoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.buf[d.off:])
	if n <= 0 {
		if n == 0 {
			return 0, errShort
		}
		return 0, errVarint
	}
	d.off += n
	return v, nil
}

func (d *decoder) varint() (int64, error) {
	v, n := binary.Varint(d.buf[d.off:])
	if n <= 0 {
		if n == 0 {
			return 0, errShort
		}
		return 0, errVarint
	}
	d.off += n
	return v, nil
}

// count reads a count of items each at least minBytes long.
func (d *decoder) count(minBytes int) (int, error) {
	n, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(d.remaining()/minBytes) {
		return 0, errTooMany
	}
	return int(n), nil
}

func (d *decoder) byte() (byte, error) {
	if d.remaining() < 1 {
		return 0, errShort
	}
	c := d.buf[d.off]
	d.off++
	return c, nil
}

func (d *decoder) uint32() (uint32, error) {
	if d.remaining() < 4 {
		return 0, errShort
	}
	v := binary.LittleEndian.Uint32(d.buf[d.off:])
	d.off += 4
	return v, nil
}

func (d *decoder) string() (string, error) {
	n, err := d.uvarint()
	if err != nil {
		return "", err
	}
	if n > uint64(d.remaining()) {
		return "", errShort
	}
	s := string(d.buf[d.off : d.off+int(n)])
	d.off += int(n)
	return s, nil
}

func (d *decoder) batch() (Batch, error) {
	var b Batch
	if d.remaining() < seqBytes {
		return b, errShort
	}
	b.Seq = binary.LittleEndian.Uint64(d.buf)
	d.off = seqBytes
	n, err := d.count(minEntityBytes)
	if err != nil {
		return Batch{}, fmt.Errorf("entity count: %w", err)
	}
	if n > 0 {
		b.Entities = make([]graph.Entity, n)
		for i := range b.Entities {
			if err := d.entity(&b.Entities[i]); err != nil {
				return Batch{}, fmt.Errorf("entity %d: %w", i, err)
			}
		}
	}
	if n, err = d.count(minEventBytes); err != nil {
		return Batch{}, fmt.Errorf("event count: %w", err)
	}
	if n > 0 {
		b.Events = make([]graph.Event, n)
		for i := range b.Events {
			if err := d.event(&b.Events[i]); err != nil {
				return Batch{}, fmt.Errorf("event %d: %w", i, err)
			}
		}
	}
	if d.remaining() != 0 {
		return Batch{}, errTrailing
	}
	return b, nil
}

func (d *decoder) entity(e *graph.Entity) error {
	t, err := d.byte()
	if err != nil {
		return err
	}
	e.Type = graph.NodeType(t)
	if e.ID, err = d.string(); err != nil {
		return err
	}
	if e.Text, err = d.string(); err != nil {
		return err
	}
	n, err := d.count(2)
	if err != nil {
		return fmt.Errorf("attribute count: %w", err)
	}
	if n > 0 {
		e.Attrs = make(map[string]string, n)
		for range n {
			k, err := d.string()
			if err != nil {
				return err
			}
			v, err := d.string()
			if err != nil {
				return err
			}
			if _, dup := e.Attrs[k]; dup {
				return fmt.Errorf("%w %q", errDupAttr, k)
			}
			e.Attrs[k] = v
		}
	}
	if n, err = d.count(4); err != nil {
		return fmt.Errorf("vector length: %w", err)
	}
	if n > 0 {
		e.Vector = make([]float32, n)
		for i := range e.Vector {
			bits, _ := d.uint32() // cannot fail: count checked the size
			e.Vector[i] = math.Float32frombits(bits)
		}
	}
	return nil
}

func (d *decoder) ref(r *graph.Ref) error {
	t, err := d.byte()
	if err != nil {
		return err
	}
	r.Type = graph.NodeType(t)
	r.ID, err = d.string()
	return err
}

func (d *decoder) event(ev *graph.Event) error {
	var err error
	if ev.ID, err = d.string(); err != nil {
		return err
	}
	if err := d.ref(&ev.Src); err != nil {
		return fmt.Errorf("src: %w", err)
	}
	if err := d.ref(&ev.Dst); err != nil {
		return fmt.Errorf("dst: %w", err)
	}
	t, err := d.byte()
	if err != nil {
		return err
	}
	ev.Type = graph.EdgeType(t)
	if ev.TS, err = d.varint(); err != nil {
		return fmt.Errorf("ts: %w", err)
	}
	bits, err := d.uint32()
	if err != nil {
		return fmt.Errorf("weight: %w", err)
	}
	ev.Weight = math.Float32frombits(bits)
	return nil
}
