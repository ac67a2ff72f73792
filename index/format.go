package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/RoaringBitmap/roaring/v2"
)

// ErrCorrupt is returned when a snapshot file is truncated, has a bad
// magic, an unsupported version, a checksum mismatch or inconsistent
// content. The wrapping error names what is wrong.
var ErrCorrupt = errors.New("corrupt index snapshot")

// FormatVersion is the snapshot file format version written by WriteTo.
// ReadSnapshot also reads version 1 files (no doc priors; they read as 0),
// version 2 files (no new-user priors; they read as 0) and version 3 files
// (no product codebooks and no first-stage codes: the codes are computed
// from the embeddings when the file is read) and version 4 files (no
// whole-vector level).
const FormatVersion = 5

var (
	fileMagic = [8]byte{'H', 'I', 'R', 'I', 'D', 'X', '\r', '\n'}
	crcTable  = crc32.MakeTable(crc32.Castagnoli)
)

// Section tags, in file order (docs/format/index.md).
const (
	secQuantizer = "QNTZ"
	secDocs      = "DOCS"
	secAttrs     = "ATTR"
	secPostings  = "POST"
	secEnd       = "END."
)

// WriteTo writes the snapshot in the format of docs/format/index.md:
// magic, version, then checksummed sections. It implements io.WriterTo.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	var out bytes.Buffer
	out.Write(fileMagic[:])
	out.Write(binary.LittleEndian.AppendUint32(nil, FormatVersion))
	writeSection(&out, secQuantizer, s.encodeQuantizer())
	docs, err := s.encodeDocs()
	if err != nil {
		return 0, fmt.Errorf("encode docs: %w", err)
	}
	writeSection(&out, secDocs, docs)
	attrs, err := s.encodeAttrs()
	if err != nil {
		return 0, fmt.Errorf("encode attributes: %w", err)
	}
	writeSection(&out, secAttrs, attrs)
	post, err := s.encodePostings()
	if err != nil {
		return 0, fmt.Errorf("encode postings: %w", err)
	}
	writeSection(&out, secPostings, post)
	writeSection(&out, secEnd, nil)
	n, err := w.Write(out.Bytes())
	if err != nil {
		return int64(n), fmt.Errorf("write snapshot: %w", err)
	}
	return int64(n), nil
}

// SaveFile writes the snapshot to path atomically (temporary file in the
// same directory, fsync, rename).
func (s *Snapshot) SaveFile(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := s.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("save snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	return nil
}

// LoadFile reads a snapshot written by SaveFile.
func LoadFile(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	defer f.Close()
	s, err := ReadSnapshot(f)
	if err != nil {
		return nil, fmt.Errorf("load snapshot %s: %w", path, err)
	}
	return s, nil
}

func writeSection(out *bytes.Buffer, tag string, payload []byte) {
	hdr := make([]byte, 0, 12)
	hdr = append(hdr, tag...)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(payload)))
	crc := crc32.Update(crc32.Checksum(hdr, crcTable), crcTable, payload)
	out.Write(hdr)
	out.Write(payload)
	out.Write(binary.LittleEndian.AppendUint32(nil, crc))
}

// ReadSnapshot reads a snapshot written by WriteTo. Any defect gives an
// error wrapping ErrCorrupt that names the section and the problem.
func ReadSnapshot(r io.Reader) (*Snapshot, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return decodeSnapshot(data)
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("read snapshot: "+format+": %w", append(args, ErrCorrupt)...)
}

func decodeSnapshot(data []byte) (s *Snapshot, err error) {
	defer func() {
		// Third-party decoders (roaring) may panic on adversarial input
		// that happens to pass the checksum; never let it escape.
		if r := recover(); r != nil {
			s, err = nil, corrupt("decode panicked: %v", r)
		}
	}()
	if len(data) < 12 {
		return nil, corrupt("truncated header: %d bytes", len(data))
	}
	if !bytes.Equal(data[:8], fileMagic[:]) {
		return nil, corrupt("bad magic %q", data[:8])
	}
	version := binary.LittleEndian.Uint32(data[8:12])
	if version < 1 || version > FormatVersion {
		return nil, corrupt("unsupported format version %d (want 1 to %d)", version, FormatVersion)
	}
	rest := data[12:]
	secs := map[string][]byte{}
	for _, want := range []string{secQuantizer, secDocs, secAttrs, secPostings, secEnd} {
		if len(rest) < 12 {
			return nil, corrupt("truncated before section %s", want)
		}
		tag := string(rest[:4])
		if tag != want {
			return nil, corrupt("section %q where %s expected", tag, want)
		}
		n := binary.LittleEndian.Uint64(rest[4:12])
		if n > uint64(len(rest)-12) || uint64(len(rest)-12)-n < 4 {
			return nil, corrupt("section %s truncated: length %d, %d bytes left", tag, n, len(rest)-12)
		}
		payload := rest[12 : 12+n]
		got := crc32.Checksum(rest[:12+n], crcTable)
		if want := binary.LittleEndian.Uint32(rest[12+n:]); got != want {
			return nil, corrupt("section %s checksum mismatch (crc32c %08x, stored %08x)", tag, got, want)
		}
		secs[tag] = payload
		rest = rest[12+n+4:]
	}
	if len(rest) != 0 {
		return nil, corrupt("%d trailing bytes after END section", len(rest))
	}
	q, err := decodeQuantizer(secs[secQuantizer], version)
	if err != nil {
		return nil, err
	}
	s = emptySnapshot(q)
	tx := begin(s)
	tx.s.seq = 0
	if err := decodeAttrs(tx, secs[secAttrs]); err != nil {
		return nil, err
	}
	if err := decodeDocs(tx, secs[secDocs], version); err != nil {
		return nil, err
	}
	if err := decodePostings(tx, secs[secPostings]); err != nil {
		return nil, err
	}
	if version < 4 {
		tx.fillCodes()
	}
	return tx.commit(), nil
}

// enc is a little-endian append encoder.
type enc struct{ b []byte }

func (e *enc) u32(v uint32)  { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64)  { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) f32(v float32) { e.u32(math.Float32bits(v)) }
func (e *enc) str(v string)  { e.u32(uint32(len(v))); e.b = append(e.b, v...) }
func (e *enc) vecs(vs []float32) {
	for _, v := range vs {
		e.f32(v)
	}
}
func (e *enc) bitmap(b *roaring.Bitmap) error {
	if b == nil {
		e.u32(0)
		return nil
	}
	buf, err := b.ToBytes()
	if err != nil {
		return err
	}
	e.u32(uint32(len(buf)))
	e.b = append(e.b, buf...)
	return nil
}

// dec is a bounds-checked little-endian decoder; the first error sticks.
type dec struct {
	sec string
	b   []byte
	err error
}

func (d *dec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = corrupt("section %s: "+format, append([]any{d.sec}, args...)...)
	}
}

func (d *dec) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("truncated: need %d bytes, have %d", n, len(d.b))
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *dec) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *dec) f32() float32 { return math.Float32frombits(d.u32()) }
func (d *dec) str() string  { return string(d.take(uint64(d.u32()))) }

// count reads a u32 count of items of at least minSize bytes each and
// refuses counts the remaining bytes cannot hold.
func (d *dec) count(what string, minSize int) int {
	n := d.u32()
	if d.err == nil && uint64(n)*uint64(minSize) > uint64(len(d.b)) {
		d.fail("%s count %d exceeds the section", what, n)
		return 0
	}
	return int(n)
}

func (d *dec) vec(dim int) []float32 {
	b := d.take(uint64(dim) * 4)
	if b == nil {
		return nil
	}
	out := make([]float32, dim)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func (d *dec) bitmap() *roaring.Bitmap {
	n := d.u32()
	buf := d.take(uint64(n))
	if d.err != nil || n == 0 {
		return nil
	}
	b := roaring.New()
	if _, err := b.FromBuffer(bytes.Clone(buf)); err != nil {
		d.fail("decode bitmap: %v", err)
		return nil
	}
	return b
}

func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d unread bytes", len(d.b))
	}
	return d.err
}

func (s *Snapshot) encodeQuantizer() []byte {
	q := s.q
	o := q.opts
	var e enc
	e.u32(uint32(q.dim))
	e.u32(uint32(len(q.flat)))
	for _, flat := range q.flat {
		e.u32(uint32(len(flat) / q.dim))
		e.vecs(flat)
	}
	e.f32(o.Margin)
	e.u32(uint32(o.MaxPerLevel))
	e.u32(uint32(o.MaxTokens))
	e.f32(o.Query.Margin)
	e.u32(uint32(o.Query.MaxPerLevel))
	e.u32(uint32(o.Query.MaxTokens))
	e.u32(uint32(o.ResidualLevels))
	e.u32(uint32(o.ResidualCodes))
	e.u64(o.Seed)
	e.u32(uint32(len(q.res)))
	for _, flat := range q.res {
		e.vecs(flat)
	}
	if q.pq == nil {
		e.u32(0)
	} else {
		e.u32(uint32(q.pq.subspaces()))
		e.u32(uint32(q.pq.k))
		for _, flat := range q.pq.cents {
			e.vecs(flat)
		}
	}
	e.u32(uint32(o.WholeCodes))
	if q.whole == nil {
		e.u32(0)
	} else {
		e.u32(1)
		e.vecs(q.whole)
	}
	return e.b
}

// decodeQuantizer reads the quantizer section of a file of version.
func decodeQuantizer(b []byte, version uint32) (*Quantizer, error) {
	d := &dec{sec: secQuantizer, b: b}
	dim := int(d.u32())
	if d.err == nil && (dim <= 0 || dim > 1<<16) {
		d.fail("bad dimension %d", dim)
	}
	var o QuantizerOptions
	nLevels := d.count("level", 4)
	for range nLevels {
		k := d.count("prototype", 4*dim)
		protos := make([][]float32, k)
		for i := range protos {
			protos[i] = d.vec(dim)
		}
		o.Levels = append(o.Levels, protos)
	}
	o.Margin = d.f32()
	o.MaxPerLevel = int(d.u32())
	o.MaxTokens = int(d.u32())
	o.Query.Margin = d.f32()
	o.Query.MaxPerLevel = int(d.u32())
	o.Query.MaxTokens = int(d.u32())
	o.ResidualLevels = int(d.u32())
	if o.ResidualLevels == 0 {
		o.ResidualLevels = -1
	}
	o.ResidualCodes = int(d.u32())
	o.Seed = d.u64()
	nRes := d.count("residual codebook", 4*dim)
	for range nRes {
		cb := make([][]float32, o.ResidualCodes)
		for i := range cb {
			cb[i] = d.vec(dim)
		}
		o.Residual = append(o.Residual, cb)
	}
	if version >= 4 {
		if m := d.count("product subspace", 4); m > 0 {
			k := int(d.u32())
			if d.err == nil && (m > dim || k < 1 || k > productK) {
				d.fail("product code of %d subspaces and %d codewords for %d dimensions", m, k, dim)
			}
			bounds := subspaceBounds(dim, max(m, 1))
			for s := 0; s < m && d.err == nil; s++ {
				w := bounds[s+1] - bounds[s]
				cb := make([][]float32, k)
				for i := range cb {
					cb[i] = d.vec(w)
				}
				o.Product = append(o.Product, cb)
			}
		} else {
			o.ProductSubspaces = -1
		}
	}
	if version >= 5 {
		o.WholeCodes = int(d.u32())
		if fitted := d.u32(); fitted == 1 {
			if d.err == nil && uint64(o.WholeCodes)*uint64(4*dim) > uint64(len(d.b)) {
				d.fail("whole-vector codebook of %d codes exceeds the section", o.WholeCodes)
			}
			for i := 0; i < o.WholeCodes && d.err == nil; i++ {
				o.Whole = append(o.Whole, d.vec(dim))
			}
		} else if d.err == nil && fitted != 0 {
			d.fail("bad whole-vector codebook flag %d", fitted)
		}
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	q, err := NewQuantizer(o)
	if err != nil {
		return nil, corrupt("section %s: %v", secQuantizer, err)
	}
	return q, nil
}

func (s *Snapshot) encodeDocs() ([]byte, error) {
	var e enc
	e.u64(s.seq)
	e.u32(uint32(len(s.resShare)))
	e.vecs(s.resShare)
	e.u32(uint32(s.pq.width))
	e.u32(uint32(s.live.GetCardinality()))
	it := s.live.Iterator()
	for it.HasNext() {
		id := it.Next()
		e.u32(id)
		e.vecs(s.emb.at(int(id)))
		p, u, _ := s.Priors(id)
		e.f32(p)
		e.f32(u)
		m := s.meta.get(int(id))
		e.u32(uint32(len(m)))
		for _, x := range m {
			e.u32(x)
		}
		c := s.code.at(int(id))
		e.u32(c[0])
		e.u32(c[1])
		e.b = append(e.b, s.pq.at(int(id))...)
	}
	return e.b, nil
}

// decodeDocs reads the docs section of a file of version: each doc
// carries min(version-1, 2) priors (Doc.Prior, then Doc.NewUserPrior) and,
// from version 4, its first-stage code.
func decodeDocs(tx *txn, b []byte, version uint32) error {
	d := &dec{sec: secDocs, b: b}
	tx.s.seq = d.u64()
	dim := tx.s.q.dim
	nPriors := min(int(version)-1, 2)
	width, codes := 0, version >= 4
	if codes {
		if ns := d.count("residual share", 4); ns > 0 {
			if d.err == nil && ns != dim {
				d.fail("%d residual shares for %d dimensions", ns, dim)
			}
			tx.s.resShare = d.vec(ns)
			for i, x := range tx.s.resShare {
				if !(x >= 0) || math.IsInf(float64(x), 0) {
					d.fail("residual share %d is %v", i, x)
					break
				}
			}
		}
		if width = int(d.u32()); d.err == nil && width != tx.pq.v.width {
			d.fail("product codes of %d bytes, the quantizer's are %d", width, tx.pq.v.width)
		}
	}
	minDoc := 8 + 4*dim + 4*nPriors
	if codes {
		minDoc += 8 + width
	}
	n := d.count("doc", minDoc)
	maxPath := uint64(tx.s.q.LevelSize(len(tx.s.q.flat) - 1))
	for range tx.s.q.res {
		maxPath *= uint64(tx.s.q.opts.ResidualCodes)
	}
	k := 0
	if p := tx.s.q.pq; p != nil {
		k = p.k
	}
	last := int64(-1)
	nSlots := tx.s.levelOff[len(tx.s.levelOff)-1]
	for range n {
		id := d.u32()
		if d.err == nil && int64(id) <= last {
			d.fail("doc ids not increasing at %d", id)
		}
		last = int64(id)
		v := d.vec(dim)
		var priors [2]float32
		for i := range priors[:nPriors] {
			if priors[i] = d.f32(); priors[i] != priors[i] || math.IsInf(float64(priors[i]), 0) {
				d.fail("doc %d: prior %v not finite", id, priors[i])
			}
		}
		m := make([]uint32, d.count("doc meta", 4))
		for i := range m {
			m[i] = d.u32()
		}
		if d.err != nil {
			break
		}
		if len(m) == 0 || int(m[0]) > len(m)-1 {
			d.fail("doc %d: bad token count", id)
			break
		}
		for _, t := range m[1 : 1+m[0]] {
			if slot, ok := tx.s.slotOf(Token(t)); !ok || slot >= nSlots {
				d.fail("doc %d: token %v out of range", id, Token(t))
			}
		}
		for _, a := range m[1+m[0]:] {
			if int(a) >= tx.s.nAttrs {
				d.fail("doc %d: attribute id %d out of range", id, a)
			}
		}
		if codes {
			path, norm := d.u32(), d.f32()
			pq := d.take(uint64(width))
			if d.err == nil && (uint64(path) >= maxPath || !(norm >= 0) || math.IsInf(float64(norm), 0)) {
				d.fail("doc %d: bad first-stage code (path %d, norm %v)", id, path, norm)
			}
			for _, c := range pq {
				if int(c) >= k {
					d.fail("doc %d: product code %d out of range", id, c)
				}
			}
			if d.err != nil {
				break
			}
			tx.putCode(id, path, pq, norm)
		}
		copy(tx.emb.slot(int(id)), v)
		tx.setPriors(id, priors[0], priors[1])
		tx.meta.set(int(id), m)
		tx.s.live.Add(id)
	}
	return d.end()
}

func (s *Snapshot) encodeAttrs() ([]byte, error) {
	var e enc
	e.u32(uint32(s.nAttrs))
	for id := range s.nAttrs {
		n := s.names.get(id)
		e.str(n.key)
		e.str(n.value)
		if err := e.bitmap(s.attrBits.get(id)); err != nil {
			return nil, err
		}
	}
	return e.b, nil
}

func decodeAttrs(tx *txn, b []byte) error {
	d := &dec{sec: secAttrs, b: b}
	n := d.count("attribute", 12)
	for id := range n {
		key, value := d.str(), d.str()
		bm := d.bitmap()
		if d.err != nil {
			break
		}
		if _, dup := tx.s.dict.ids[attrKey(key, value)]; dup {
			d.fail("duplicate attribute %s=%s", key, value)
			break
		}
		tx.s.dict.ids[attrKey(key, value)] = uint32(id)
		tx.names.set(id, attrName{key, value})
		if bm != nil {
			tx.attrBits.set(id, bm)
		}
		tx.s.nAttrs++
	}
	return d.end()
}

func (s *Snapshot) encodePostings() ([]byte, error) {
	var e enc
	var slots []int
	for slot := range s.levelOff[len(s.levelOff)-1] {
		if b := s.post.get(slot); b != nil && !b.IsEmpty() {
			slots = append(slots, slot)
		}
	}
	e.u32(uint32(len(slots)))
	for _, slot := range slots {
		e.u32(uint32(s.tokenOf(slot)))
		if err := e.bitmap(s.post.get(slot)); err != nil {
			return nil, err
		}
	}
	return e.b, nil
}

func decodePostings(tx *txn, b []byte) error {
	d := &dec{sec: secPostings, b: b}
	n := d.count("posting", 8)
	for range n {
		t := Token(d.u32())
		bm := d.bitmap()
		if d.err != nil {
			break
		}
		slot, ok := tx.s.slotOf(t)
		if !ok {
			d.fail("token %v out of range", t)
			break
		}
		if bm != nil {
			if roaring.AndNot(bm, tx.s.live).GetCardinality() != 0 {
				d.fail("posting %v holds ids that are not live", t)
				break
			}
			tx.post.set(slot, bm)
		}
	}
	return d.end()
}
