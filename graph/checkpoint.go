package graph

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrBadCheckpoint marks a graph checkpoint that [ReadCheckpoint] cannot
// use: not one, of another version, truncated or inconsistent.
var ErrBadCheckpoint = errors.New("bad graph checkpoint")

// Checkpoint format constants.
const (
	checkpointMagic   = "HIRGRAPH"
	checkpointVersion = 1
	// maxCheckpointString bounds a string of a checkpoint (an id, a text,
	// an attribute), as the event log bounds a batch.
	maxCheckpointString = 64 << 20
	// recChunk is the number of edge records read per call.
	recChunk = 1 << 16
)

// WriteCheckpoint writes the whole store to w: every node's id and
// content, every adjacency list and the idempotency ids, in the binary
// form [ReadCheckpoint] reads (version 1, described in the package
// documentation's "Checkpoint" section). Writers wait while it runs and
// readers do not, so what it writes is the store as of one instant; a
// caller that pairs the checkpoint with a position in its own log must
// hold its writers back itself.
func (s *Store) WriteCheckpoint(w io.Writer) error {
	for i := range s.tables {
		s.tables[i].mu.RLock()
		defer s.tables[i].mu.RUnlock()
	}
	s.seenMu.Lock()
	defer s.seenMu.Unlock()

	bw := bufio.NewWriterSize(w, 1<<20)
	var buf []byte
	put := func() error {
		_, err := bw.Write(buf)
		buf = buf[:0]
		return err
	}
	// spill hands buf to bw once it holds 64 KB, keeping the appends cheap.
	spill := func() error {
		if len(buf) < 64<<10 {
			return nil
		}
		return put()
	}
	str := func(v string) { buf = binary.AppendUvarint(buf, uint64(len(v))); buf = append(buf, v...) }

	buf = append(buf, checkpointMagic...)
	buf = binary.LittleEndian.AppendUint32(buf, checkpointVersion)
	buf = binary.AppendUvarint(buf, uint64(NumNodeTypes-1))
	for nt := NodeType(1); nt < numNodeTypes; nt++ {
		buf = binary.AppendUvarint(buf, uint64(len(s.tables[nt].refs)))
	}
	n := s.numEvents.Load()
	buf = binary.AppendUvarint(buf, uint64(n))
	buf = binary.AppendVarint(buf, s.MinTS())
	buf = binary.AppendVarint(buf, s.MaxTS())
	buf = binary.AppendVarint(buf, s.until)
	// The ids come first, so that a reader can build their set while it
	// decodes the rest.
	buf = binary.AppendUvarint(buf, uint64(len(s.seen)))
	for id := range s.seen {
		str(id)
		if err := spill(); err != nil {
			return err
		}
	}
	if err := put(); err != nil {
		return err
	}
	var keys []string
	for nt := NodeType(1); nt < numNodeTypes; nt++ {
		t := &s.tables[nt]
		for i, id := range t.refs {
			str(id)
			e := t.ents[i]
			if e == nil {
				buf = append(buf, 0)
			} else {
				buf = append(buf, 1)
				str(e.Text)
				keys = keys[:0]
				for k := range e.Attrs {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				buf = binary.AppendUvarint(buf, uint64(len(keys)))
				for _, k := range keys {
					str(k)
					str(e.Attrs[k])
				}
				buf = binary.AppendUvarint(buf, uint64(len(e.Vector)))
				for _, v := range e.Vector {
					buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				}
			}
			if err := spill(); err != nil {
				return err
			}
		}
	}
	for nt := NodeType(1); nt < numNodeTypes; nt++ {
		t := &s.tables[nt]
		for _, l := range t.adj {
			buf = binary.AppendUvarint(buf, uint64(len(l)))
			if err := spill(); err != nil {
				return err
			}
		}
		for _, l := range t.adj {
			for _, r := range l {
				buf = binary.LittleEndian.AppendUint64(buf, r.key)
				buf = binary.LittleEndian.AppendUint32(buf, r.nbr)
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(r.w))
				if err := spill(); err != nil {
					return err
				}
			}
		}
	}
	if err := put(); err != nil {
		return err
	}
	return bw.Flush()
}

// checkpointReader decodes a checkpoint, keeping the first error.
type checkpointReader struct {
	r   *bufio.Reader
	err error
	b   []byte
}

func (c *checkpointReader) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s", ErrBadCheckpoint, fmt.Sprintf(format, args...))
	}
}

func (c *checkpointReader) read(err error) {
	if c.err != nil || err == nil {
		return
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		c.fail("truncated")
		return
	}
	c.err = err
}

func (c *checkpointReader) uvarint() uint64 {
	if c.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(c.r)
	c.read(err)
	return v
}

func (c *checkpointReader) varint() int64 {
	if c.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(c.r)
	c.read(err)
	return v
}

// bytes returns the next n bytes, valid until the next call.
func (c *checkpointReader) bytes(n int) []byte {
	if c.err != nil {
		return nil
	}
	if cap(c.b) < n {
		c.b = make([]byte, n)
	}
	c.b = c.b[:n]
	_, err := io.ReadFull(c.r, c.b)
	c.read(err)
	return c.b
}

func (c *checkpointReader) str() string {
	n := c.uvarint()
	if n > maxCheckpointString {
		c.fail("string of %d bytes", n)
	}
	if c.err != nil || n == 0 {
		return ""
	}
	if n > 64<<10 { // grown as read: n is not trusted yet
		var sb strings.Builder
		_, err := io.CopyN(&sb, c.r, int64(n))
		c.read(err)
		return sb.String()
	}
	return string(c.bytes(int(n)))
}

// ReadCheckpoint reads a store that [Store.WriteCheckpoint] wrote, with
// opts as [NewStore] takes them. Every adjacency record is checked (its
// neighbour exists, its types are known, each list is in time order), so
// a damaged checkpoint fails with [ErrBadCheckpoint] rather than giving a
// store that fails later. Each type's adjacency lists share one array, as
// after [Store.Compact].
func ReadCheckpoint(r io.Reader, opts Options) (*Store, error) {
	s := NewStore(opts)
	c := &checkpointReader{r: bufio.NewReaderSize(r, 1<<20)}
	if h := c.bytes(len(checkpointMagic) + 4); c.err == nil {
		if string(h[:len(checkpointMagic)]) != checkpointMagic {
			return nil, fmt.Errorf("%w: bad magic", ErrBadCheckpoint)
		}
		if v := binary.LittleEndian.Uint32(h[len(checkpointMagic):]); v != checkpointVersion {
			return nil, fmt.Errorf("%w: version %d, want %d", ErrBadCheckpoint, v, checkpointVersion)
		}
	}
	if nt := c.uvarint(); c.err == nil && nt != uint64(NumNodeTypes-1) {
		c.fail("%d node types, want %d", nt, NumNodeTypes-1)
	}
	var counts [NumNodeTypes]int
	for nt := NodeType(1); nt < numNodeTypes && c.err == nil; nt++ {
		n := c.uvarint()
		if n > uint64(MaxNodesPerType) {
			c.fail("%d %s nodes", n, nt)
		}
		counts[nt] = int(n)
	}
	numEvents := c.uvarint()
	minTS, maxTS, until := c.varint(), c.varint(), c.varint()
	nSeen := c.uvarint()
	if c.err == nil && nSeen > numEvents {
		c.fail("%d event ids for %d events", nSeen, numEvents)
	}
	seen := make([]string, 0, min(nSeen, 1<<20)) // grown as read: nSeen is not trusted yet
	for i := uint64(0); i < nSeen && c.err == nil; i++ {
		seen = append(seen, c.str())
	}
	// The id set is built beside the decoding of the rest.
	seenDone := make(chan struct{})
	readOK := c.err == nil
	go func() {
		defer close(seenDone)
		if !readOK {
			return
		}
		s.seen = make(map[string]struct{}, len(seen))
		for _, id := range seen {
			s.seen[id] = struct{}{}
		}
	}()
	for nt := NodeType(1); nt < numNodeTypes && c.err == nil; nt++ {
		t := &s.tables[nt]
		t.ids = make(map[string]uint32, min(counts[nt], 1<<20))
		for i := 0; i < counts[nt] && c.err == nil; i++ { // grown as read
			id := c.str()
			if err := (Ref{Type: nt, ID: id}).Validate(); err != nil && c.err == nil {
				c.fail("%v", err)
			}
			if _, dup := t.ids[id]; dup && c.err == nil {
				c.fail("%s %s twice", nt, clipID(id))
			}
			t.ids[id] = uint32(i)
			t.refs = append(t.refs, id)
			t.ents = append(t.ents, c.entity(nt, id))
		}
	}
	var outs uint64
	for nt := NodeType(1); nt < numNodeTypes && c.err == nil; nt++ {
		t := &s.tables[nt]
		lens := make([]uint64, 0, min(counts[nt], 1<<16)) // grown as read: counts are not trusted yet
		var total uint64
		for range counts[nt] {
			lens = append(lens, c.uvarint())
			total += lens[len(lens)-1]
			if c.err != nil {
				break
			}
			if total > 2*numEvents {
				c.fail("%s adjacency holds more than twice the %d events", nt, numEvents)
				break
			}
		}
		recs := c.records(total, &counts)
		t.adj = make([][]edgeRec, counts[nt])
		off := uint64(0)
		for i, n := range lens {
			if c.err != nil {
				break
			}
			l := recs[off : off+n : off+n]
			off += n
			for j, r := range l {
				if j > 0 && r.key < l[j-1].key {
					c.fail("%s %s: adjacency out of time order", nt, clipID(t.refs[i]))
					break
				}
				if r.out() {
					outs++
				}
			}
			if n > 0 {
				t.adj[i] = l
			}
		}
	}
	if c.err == nil && outs != numEvents {
		c.fail("%d out edges for %d events", outs, numEvents)
	}
	<-seenDone
	if c.err == nil && len(s.seen) != len(seen) {
		c.fail("an event id twice")
	}
	if c.err != nil {
		return nil, c.err
	}
	s.numEvents.Store(int64(numEvents))
	if numEvents > 0 {
		s.minTS.Store(minTS)
		s.maxTS.Store(maxTS)
	}
	s.until = until
	return s, nil
}

// clipID quotes id for an error message, cut to its first 32 bytes.
func clipID(id string) string {
	if len(id) > 32 {
		return strconv.Quote(id[:32]) + "..."
	}
	return strconv.Quote(id)
}

// entity reads the content of node id of type nt, or nil for none.
func (c *checkpointReader) entity(nt NodeType, id string) *Entity {
	flag := c.bytes(1)
	if c.err != nil {
		return nil
	}
	switch flag[0] {
	case 0:
		return nil
	case 1:
	default:
		c.fail("%s %s: entity flag %d", nt, clipID(id), flag[0])
		return nil
	}
	e := &Entity{Type: nt, ID: id, Text: c.str()}
	if n := c.uvarint(); n > 0 && c.err == nil {
		if n > maxCheckpointString {
			c.fail("%s %s: %d attributes", nt, clipID(id), n)
			return nil
		}
		e.Attrs = make(map[string]string, min(n, 1024))
		for range n {
			k := c.str()
			e.Attrs[k] = c.str()
			if c.err != nil {
				return nil
			}
		}
	}
	if n := c.uvarint(); n > 0 && c.err == nil {
		if n > maxCheckpointString/4 {
			c.fail("%s %s: vector of %d", nt, clipID(id), n)
			return nil
		}
		b := c.bytes(int(n) * 4)
		if c.err != nil {
			return nil
		}
		e.Vector = make([]float32, n)
		for i := range e.Vector {
			e.Vector[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	if err := e.Validate(); err != nil && c.err == nil {
		c.fail("%v", err)
	}
	return e
}

// records reads n edge records, checking each one's types and neighbour
// against counts.
func (c *checkpointReader) records(n uint64, counts *[NumNodeTypes]int) []edgeRec {
	if c.err != nil {
		return nil
	}
	recs := make([]edgeRec, 0, min(n, recChunk)) // grown as read: n is not trusted yet
	for uint64(len(recs)) < n && c.err == nil {
		k := int(min(n-uint64(len(recs)), recChunk))
		b := c.bytes(16 * k)
		if c.err != nil {
			return nil
		}
		for i := range k {
			r := edgeRec{key: binary.LittleEndian.Uint64(b[16*i:]), nbr: binary.LittleEndian.Uint32(b[16*i+8:]),
				w: math.Float32frombits(binary.LittleEndian.Uint32(b[16*i+12:]))}
			nt := r.nbrID().Type
			if !nt.Valid() || !r.edgeType().Valid() {
				c.fail("edge record with node type %d, edge type %d", nt, r.edgeType())
				return nil
			}
			if int64(r.nbr) >= int64(counts[nt]) {
				c.fail("edge record to %s %d of %d", nt, r.nbr, counts[nt])
				return nil
			}
			if math.IsNaN(float64(r.w)) || math.IsInf(float64(r.w), 0) {
				c.fail("edge record with weight %v", r.w)
				return nil
			}
			recs = append(recs, r)
		}
	}
	return recs
}
