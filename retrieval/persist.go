package retrieval

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
)

// Files written next to a checkpoint (DIR/models/vN) so that a restart
// loads the snapshot of that version instead of re-embedding every entity.
const (
	// FileEmbeddings holds the per-type embedding matrices
	// ([EmbeddingsFormatVersion]; layout in [WriteEmbeddingsFile]).
	FileEmbeddings = "embeddings.bin"
	// FileIndex holds the ad index snapshot, quantizer and residual
	// codebook included (index.Snapshot.SaveFile, docs/format/index.md).
	FileIndex = "index.bin"
	// FileCatalogue holds the token catalogue built on that index, with
	// what it was built from (catalogueFile).
	FileCatalogue = "catalogue.json"
)

// EmbeddingsFormatVersion is the version of the embeddings file written by
// [WriteEmbeddingsFile].
const EmbeddingsFormatVersion = 1

var (
	// ErrCorruptEmbeddings is returned (wrapped) for an embeddings file
	// that is truncated, has a bad magic, an unsupported version, a checksum
	// mismatch or inconsistent content.
	ErrCorruptEmbeddings = errors.New("corrupt embeddings file")
	// ErrStaleFiles is returned (wrapped) when persisted snapshot files do
	// not belong to the model or the graph at hand (another version, another
	// dimension, or node indexes that name other entities).
	ErrStaleFiles = errors.New("persisted snapshot files do not match the model or graph")
)

// errGraphBehind is returned (wrapped, with ErrStaleFiles) when the files
// name more nodes than the graph holds.
var errGraphBehind = errors.New("graph holds fewer nodes than the files")

var (
	embMagic   = [8]byte{'H', 'I', 'R', 'E', 'M', 'B', '\r', '\n'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// EmbeddingsFile is the content of an embeddings file: the matrices of a
// snapshot, the model version and graph time they were taken at, and per
// node type a fingerprint of the entities the rows name (see
// [RefsFingerprint]), which ties the file to the graph's node numbering.
type EmbeddingsFile struct {
	Version      string
	AsOf         int64
	Dim          int
	Matrices     map[graph.NodeType]*Matrix
	Fingerprints map[graph.NodeType]uint64
}

// RefsFingerprint is the FNV-1a 64 hash of the external ids of the nodes
// of type t at indexes idx, in order; 0 and false when an index is beyond
// the store's nodes.
func RefsFingerprint(store *graph.Store, t graph.NodeType, idx []uint32) (uint64, bool) {
	h := fnv.New64a()
	n := store.NumNodes(t)
	for _, i := range idx {
		if int(i) >= n {
			return 0, false
		}
		h.Write([]byte(store.Ref(graph.NodeID{Type: t, Idx: i}).ID))
		h.Write([]byte{0})
	}
	return h.Sum64(), true
}

// Encode returns the file bytes. Layout, little-endian:
//
//	magic "HIREMB\r\n" | u32 format version | u32 dim | i64 as-of (unix ms)
//	| u32 len + model version | u32 number of types
//	| per type, ascending: u32 node type | u32 rows n | u64 fingerprint
//	  | n × u32 node index (strictly increasing) | n×dim × f32 row-major
//	| u32 CRC-32C (Castagnoli) of every preceding byte
func (f *EmbeddingsFile) Encode() ([]byte, error) {
	size := 32 + len(f.Version)
	for _, m := range f.Matrices {
		size += 16 + 4*len(m.Idx) + 4*len(m.Data)
	}
	b := make([]byte, 0, size)
	le := binary.LittleEndian
	b = append(b, embMagic[:]...)
	b = le.AppendUint32(b, EmbeddingsFormatVersion)
	b = le.AppendUint32(b, uint32(f.Dim))
	b = le.AppendUint64(b, uint64(f.AsOf))
	b = le.AppendUint32(b, uint32(len(f.Version)))
	b = append(b, f.Version...)
	types := slices.Sorted(maps.Keys(f.Matrices))
	b = le.AppendUint32(b, uint32(len(types)))
	for _, t := range types {
		m := f.Matrices[t]
		if m.Dim != f.Dim || len(m.Data) != len(m.Idx)*f.Dim {
			return nil, fmt.Errorf("encode embeddings: %s matrix is %d rows × dim %d with %d values, want dim %d",
				t, len(m.Idx), m.Dim, len(m.Data), f.Dim)
		}
		b = le.AppendUint32(b, uint32(t))
		b = le.AppendUint32(b, uint32(len(m.Idx)))
		b = le.AppendUint64(b, f.Fingerprints[t])
		for i, x := range m.Idx {
			if i > 0 && x <= m.Idx[i-1] {
				return nil, fmt.Errorf("encode embeddings: %s node indexes not increasing at row %d", t, i)
			}
			b = le.AppendUint32(b, x)
		}
		for _, v := range m.Data {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	}
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

func corruptEmb(format string, args ...any) error {
	return fmt.Errorf("decode embeddings: "+format+": %w", append(args, ErrCorruptEmbeddings)...)
}

// DecodeEmbeddings parses the bytes of an embeddings file. Any defect gives
// an error wrapping [ErrCorruptEmbeddings] that names it.
func DecodeEmbeddings(data []byte) (*EmbeddingsFile, error) {
	const hdr = 8 + 4 + 4 + 8 + 4
	if len(data) < hdr+4+4 {
		return nil, corruptEmb("truncated: %d bytes", len(data))
	}
	if !bytes.Equal(data[:8], embMagic[:]) {
		return nil, corruptEmb("bad magic %q", data[:8])
	}
	le := binary.LittleEndian
	if v := le.Uint32(data[8:12]); v != EmbeddingsFormatVersion {
		return nil, corruptEmb("unsupported format version %d (want %d)", v, EmbeddingsFormatVersion)
	}
	body := data[:len(data)-4]
	if got, want := crc32.Checksum(body, castagnoli), le.Uint32(data[len(data)-4:]); got != want {
		return nil, corruptEmb("checksum mismatch (crc32c %08x, stored %08x): truncated or damaged", got, want)
	}
	f := &EmbeddingsFile{Dim: int(le.Uint32(data[12:16])), AsOf: int64(le.Uint64(data[16:24])),
		Matrices: map[graph.NodeType]*Matrix{}, Fingerprints: map[graph.NodeType]uint64{}}
	if f.Dim <= 0 || f.Dim > 1<<16 {
		return nil, corruptEmb("bad dimension %d", f.Dim)
	}
	rest := body[24:]
	take := func(n uint64) []byte {
		if n > uint64(len(rest)) {
			return nil
		}
		out := rest[:n]
		rest = rest[n:]
		return out
	}
	u32 := func() (uint32, bool) {
		b := take(4)
		if b == nil {
			return 0, false
		}
		return le.Uint32(b), true
	}
	vlen, _ := u32()
	ver := take(uint64(vlen))
	if ver == nil {
		return nil, corruptEmb("truncated model version (%d bytes)", vlen)
	}
	f.Version = string(ver)
	nTypes, ok := u32()
	if !ok || nTypes >= uint32(graph.NumNodeTypes) {
		return nil, corruptEmb("bad number of node types %d", nTypes)
	}
	last := graph.NodeType(0)
	for range nTypes {
		tv, _ := u32()
		n, ok := u32()
		fp := take(8)
		if !ok || fp == nil {
			return nil, corruptEmb("truncated type header")
		}
		t := graph.NodeType(tv)
		if tv == 0 || int(tv) >= graph.NumNodeTypes || t <= last {
			return nil, corruptEmb("node type %d invalid or out of order", tv)
		}
		last = t
		rowBytes := uint64(4) + 4*uint64(f.Dim)
		if uint64(n) > uint64(len(rest))/rowBytes {
			return nil, corruptEmb("%s: %d rows do not fit in %d bytes", t, n, len(rest))
		}
		m := &Matrix{Dim: f.Dim, Idx: make([]uint32, n), Data: make([]float32, int(n)*f.Dim), row: make(map[uint32]int, n)}
		ib := take(4 * uint64(n))
		for i := range m.Idx {
			m.Idx[i] = le.Uint32(ib[4*i:])
			if i > 0 && m.Idx[i] <= m.Idx[i-1] {
				return nil, corruptEmb("%s: node indexes not increasing at row %d", t, i)
			}
			m.row[m.Idx[i]] = i
		}
		db := take(4 * uint64(len(m.Data)))
		for i := range m.Data {
			v := math.Float32frombits(le.Uint32(db[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, corruptEmb("%s: non-finite value at row %d", t, i/f.Dim)
			}
			m.Data[i] = v
		}
		f.Matrices[t] = m
		f.Fingerprints[t] = le.Uint64(fp)
	}
	if len(rest) != 0 {
		return nil, corruptEmb("%d trailing bytes", len(rest))
	}
	return f, nil
}

// WriteEmbeddingsFile writes f to path atomically (temporary file in the
// same directory, fsync, rename).
func WriteEmbeddingsFile(path string, f *EmbeddingsFile) error {
	b, err := f.Encode()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

// ReadEmbeddingsFile reads and decodes the embeddings file at path.
func ReadEmbeddingsFile(path string) (*EmbeddingsFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read embeddings: %w", err)
	}
	f, err := DecodeEmbeddings(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	// Readable like the checkpoint's other files.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Save persists what is expensive to rebuild of s into dir
// (normally its checkpoint directory): the ad index snapshot as it is now
// ([FileIndex]) and the embedding matrices ([FileEmbeddings]), fingerprinted
// against store. Each file is written atomically; the index first, so that
// an embeddings file never names ads a readable index lacks without the
// loader noticing (it upserts missing ads).
func Save(s *Served, store *graph.Store, dir string) error {
	if s.live != nil && s.live.Index != nil {
		path := filepath.Join(dir, FileIndex)
		if err := s.live.Index.Snapshot().SaveFile(path); err != nil {
			return fmt.Errorf("save snapshot files: %w", err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			return fmt.Errorf("save snapshot files: %w", err)
		}
	}
	gen := s.gen
	f := &EmbeddingsFile{Version: gen.Version, AsOf: gen.AsOf, Dim: gen.Dim(), Matrices: gen.Embeddings,
		Fingerprints: map[graph.NodeType]uint64{}}
	for t, m := range gen.Embeddings {
		fp, ok := RefsFingerprint(store, t, m.Idx)
		if !ok {
			return fmt.Errorf("save snapshot files: %s rows beyond the graph's nodes", t)
		}
		f.Fingerprints[t] = fp
	}
	if err := WriteEmbeddingsFile(filepath.Join(dir, FileEmbeddings), f); err != nil {
		return fmt.Errorf("save snapshot files: %w", err)
	}
	if gen.Catalogue != nil && s.live != nil && s.live.Index != nil {
		if err := saveCatalogue(dir, gen.Catalogue, s.live.Index.Snapshot(), store); err != nil {
			return fmt.Errorf("save snapshot files: %w", err)
		}
	}
	return nil
}

// LoadStats reports what [Load] read and what it had to compute.
type LoadStats struct {
	// Loaded is the number of embeddings read from the file.
	Loaded int
	// Embedded is the number of nodes added to the graph after the files
	// were written, embedded at load.
	Embedded int
	// Upserted is the number of ads upserted into the loaded index: ads
	// missing from it, or whose attributes changed since (re-embedded).
	Upserted int
	// IndexRebuilt is set when the index file was absent or unreadable and
	// the index was rebuilt from the loaded ad embeddings.
	IndexRebuilt bool
	// CatalogueLoaded is set when the token catalogue was read from its
	// file instead of built (loadCatalogue).
	CatalogueLoaded bool
	Elapsed         time.Duration
}

// Changed reports whether the loaded snapshot differs from the files.
func (s LoadStats) Changed() bool { return s.Embedded > 0 || s.Upserted > 0 || s.IndexRebuilt }

// Load builds the generation of model m from the files persisted in
// dir by [Save] instead of re-embedding every node: the
// matrices and index are read, then caught up with the graph — nodes
// added since are embedded as of asOf, and ads missing from the index or
// whose attributes changed are (re-)embedded and upserted — and the token
// catalogue is rebuilt from the index. Existing nodes keep their persisted
// embeddings (as the running server kept them) until the next training
// round. It writes nothing. A missing embeddings file gives an error
// wrapping fs.ErrNotExist, a damaged one [ErrCorruptEmbeddings], files of
// another model or graph [ErrStaleFiles]; an unreadable index file is
// logged and the index rebuilt from the ad embeddings.
func Load(ctx context.Context, m *model.Model, store *graph.Store, dir string, asOf int64, opts BuildOptions) (*Served, LoadStats, error) {
	opts.applyDefaults()
	start := time.Now()
	var st LoadStats
	f, err := ReadEmbeddingsFile(filepath.Join(dir, FileEmbeddings))
	if err != nil {
		return nil, st, fmt.Errorf("load snapshot: %w", err)
	}
	dim := m.Config().ServedDim()
	if f.Version != m.Version() || f.Dim != dim {
		return nil, st, fmt.Errorf("load snapshot: %w: file of %s dim %d, model %s dim %d",
			ErrStaleFiles, f.Version, f.Dim, m.Version(), dim)
	}
	for t, mat := range f.Matrices {
		fp, ok := RefsFingerprint(store, t, mat.Idx)
		if !ok {
			return nil, st, fmt.Errorf("load snapshot: %w: %w: %s rows beyond the graph's %d nodes",
				ErrStaleFiles, errGraphBehind, t, store.NumNodes(t))
		}
		if fp != f.Fingerprints[t] {
			return nil, st, fmt.Errorf("load snapshot: %w: %s rows name other entities than the graph's", ErrStaleFiles, t)
		}
		st.Loaded += mat.Len()
	}
	gen := &generation{Model: m, Version: m.Version(), TrainedAt: time.Now(), AsOf: f.AsOf,
		Embeddings: make(map[graph.NodeType]*Matrix), Metrics: map[string]float64{}}
	fresh := map[graph.NodeID][]float32{}
	for t := graph.NodeType(1); int(t) < graph.NumNodeTypes; t++ {
		old := f.Matrices[t]
		var missing []graph.NodeID
		for i := range store.NumNodes(t) {
			if old == nil {
				missing = append(missing, graph.NodeID{Type: t, Idx: uint32(i)})
			} else if _, ok := old.row[uint32(i)]; !ok {
				missing = append(missing, graph.NodeID{Type: t, Idx: uint32(i)})
			}
		}
		if len(missing) == 0 {
			if old != nil {
				gen.Embeddings[t] = old
			}
			continue
		}
		vecs, err := embedBatches(ctx, m, store, missing, asOf, opts)
		if err != nil {
			return nil, st, fmt.Errorf("load snapshot: embed new %s nodes: %w", t, err)
		}
		st.Embedded += len(missing)
		for i, id := range missing {
			fresh[id] = vecs[i]
		}
		gen.Embeddings[t] = mergeRows(dim, old, missing, vecs)
	}
	ix, err := loadIndex(ctx, dir, gen, opts)
	if err != nil {
		return nil, st, err
	}
	if ix == nil { // no usable index file: rebuild it from the ad embeddings
		st.IndexRebuilt = true
		if ix, err = buildIndex(ctx, gen, store, opts); err != nil {
			return nil, st, err
		}
	}
	s := &Served{gen: gen, live: &liveState{Index: ix}}
	n, err := catchUpIndex(ctx, s, store, asOf, fresh, opts)
	if err != nil {
		return nil, st, err
	}
	st.Upserted = n
	catStart := time.Now()
	if !st.Changed() {
		s.gen.Catalogue = loadCatalogue(dir, s.live.Index.Snapshot(), store, opts.Logger)
		st.CatalogueLoaded = s.gen.Catalogue != nil
	}
	if s.gen.Catalogue == nil {
		if err := buildCatalogue(ctx, s, store); err != nil {
			return nil, st, err
		}
	}
	catElapsed := time.Since(catStart)
	st.Elapsed = time.Since(start)
	gen.Metrics["index_ads"] = float64(s.IndexSize())
	gen.Metrics["load_seconds"] = st.Elapsed.Seconds()
	opts.Logger.Info("generation loaded from files", "version", gen.Version, "dir", dir, "embeddings", st.Loaded,
		"embedded_new", st.Embedded, "upserted_ads", st.Upserted, "index_rebuilt", st.IndexRebuilt, "catalogue_loaded", st.CatalogueLoaded, "catalogue", catElapsed, "elapsed", st.Elapsed)
	return s, st, nil
}

// loadIndex reads dir's index file into a live index; nil (and a warning)
// when it is absent or unusable.
func loadIndex(ctx context.Context, dir string, gen *generation, opts BuildOptions) (*index.Index, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	path := filepath.Join(dir, FileIndex)
	s, err := index.LoadFile(path)
	if err == nil && s.Quantizer().Dim() != gen.Dim() {
		err = fmt.Errorf("%w: index dimension %d, model %d", ErrStaleFiles, s.Quantizer().Dim(), gen.Dim())
	}
	if err == nil {
		live := s.Live()
		if ads := gen.Embeddings[graph.NodeAd]; !live.IsEmpty() && (ads == nil || int(live.Maximum()) >= ads.Len()) {
			err = fmt.Errorf("%w: the index holds ads beyond the embeddings file", ErrStaleFiles)
		}
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			opts.Logger.Warn("persisted index unusable: rebuilding it from the ad embeddings", "path", path, "err", err)
		}
		return nil, nil
	}
	return index.NewFromSnapshot(s, index.Options{Logger: opts.Logger, Search: opts.Search}), nil
}

// catchUpIndex upserts the ads s's index lacks or holds with other
// attributes than the graph gives now. New ads use their fresh embedding
// (or the generation's); ads without one, and changed ones, are
// (re-)embedded as of asOf, as a live ingestion would have.
// The docs carry no prior: [Engine.Publish] sets every live doc's.
func catchUpIndex(ctx context.Context, s *Served, store *graph.Store, asOf int64, fresh map[graph.NodeID][]float32, opts BuildOptions) (int, error) {
	is := s.live.Index.Snapshot()
	var docs []index.Doc
	var changed []graph.NodeID
	var changedAttrs []map[string][]string
	for i := range store.NumNodes(graph.NodeAd) {
		if i%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return 0, fmt.Errorf("load snapshot: %w", err)
			}
		}
		id := graph.NodeID{Type: graph.NodeAd, Idx: uint32(i)}
		attrs := adAttrs(store, id, asOf)
		have, ok := is.Attrs(id.Idx)
		switch {
		case !ok:
			vec := fresh[id]
			if vec == nil {
				vec, _ = s.gen.Embeddings[graph.NodeAd].Vector(id.Idx)
			}
			if vec == nil { // created after the generation was built
				changed = append(changed, id)
				changedAttrs = append(changedAttrs, attrs)
				continue
			}
			docs = append(docs, index.Doc{ID: id.Idx, Embedding: vec, Attrs: attrs})
		case !sameAttrs(have, attrs):
			changed = append(changed, id)
			changedAttrs = append(changedAttrs, attrs)
		}
	}
	if len(changed) > 0 {
		vecs, err := embedBatches(ctx, s.gen.Model, store, changed, asOf, opts)
		if err != nil {
			return 0, fmt.Errorf("load snapshot: re-embed changed ads: %w", err)
		}
		for i, id := range changed {
			docs = append(docs, index.Doc{ID: id.Idx, Embedding: vecs[i], Attrs: changedAttrs[i]})
		}
	}
	if len(docs) == 0 {
		return 0, nil
	}
	if err := s.live.Index.Upsert(ctx, docs...); err != nil {
		return 0, fmt.Errorf("load snapshot: upsert ads: %w", err)
	}
	return len(docs), nil
}

// sameAttrs compares attribute maps, values as sets.
func sameAttrs(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || len(va) != len(vb) {
			return false
		}
		for _, v := range vb {
			if !slices.Contains(va, v) {
				return false
			}
		}
	}
	return true
}

// mergeRows returns old's rows plus rows idx/vecs (none of them in old), in
// node index order.
func mergeRows(dim int, old *Matrix, ids []graph.NodeID, vecs [][]float32) *Matrix {
	n := len(ids)
	if old != nil {
		n += old.Len()
	}
	out := &Matrix{Dim: dim, Idx: make([]uint32, 0, n), Data: make([]float32, 0, n*dim), row: make(map[uint32]int, n)}
	i, j := 0, 0
	for i < oldLen(old) || j < len(ids) {
		if j == len(ids) || (i < oldLen(old) && old.Idx[i] < ids[j].Idx) {
			out.Idx = append(out.Idx, old.Idx[i])
			out.Data = append(out.Data, old.Data[i*dim:(i+1)*dim]...)
			i++
		} else {
			out.Idx = append(out.Idx, ids[j].Idx)
			out.Data = append(out.Data, vecs[j]...)
			j++
		}
		out.row[out.Idx[len(out.Idx)-1]] = len(out.Idx) - 1
	}
	return out
}

func oldLen(m *Matrix) int {
	if m == nil {
		return 0
	}
	return m.Len()
}

// Open returns the generation of model m, whose checkpoint directory
// is dir: loaded from its persisted files when they are there and usable
// ([Load]), otherwise built by [Build] as of asOf (a
// warning names why, unless the files are simply absent). When
// opts.PersistDir is set, a built snapshot, or a loaded one that had to be
// caught up, is persisted there; a failure to persist is only logged.
// Files that name more nodes than the graph holds (a graph replayed from a
// shortened log) are never overwritten.
func Open(ctx context.Context, m *model.Model, store *graph.Store, dir string, asOf int64, opts BuildOptions) (*Served, error) {
	opts.applyDefaults()
	s, st, err := Load(ctx, m, store, dir, asOf, opts)
	switch {
	case err == nil:
		switch {
		case opts.PersistDir == "":
		case st.Changed():
			persist(s, store, opts.PersistDir, opts.Logger)
		case !st.CatalogueLoaded: // files of an older build, or texts changed since: only the catalogue is new
			if err := saveCatalogue(opts.PersistDir, s.gen.Catalogue, s.live.Index.Snapshot(), store); err != nil {
				opts.Logger.Warn("persist the token catalogue: the next start-up will build it", "dir", opts.PersistDir, "err", err)
			}
		}
		return s, nil
	case ctx.Err() != nil:
		return nil, err
	case errors.Is(err, fs.ErrNotExist):
		opts.Logger.Info("no persisted snapshot files: embedding every entity", "version", m.Version(), "dir", dir)
	case errors.Is(err, errGraphBehind):
		// The files may be good and the graph short (a damaged or repaired
		// log): never replace them with a snapshot of less.
		opts.Logger.Warn("persisted snapshot files name more nodes than the graph holds: embedding every entity, leaving the files as they are",
			"version", m.Version(), "dir", dir, "err", err)
		opts.PersistDir = ""
	default:
		opts.Logger.Warn("persisted snapshot files unusable: embedding every entity", "version", m.Version(), "dir", dir, "err", err)
	}
	return Build(ctx, m, store, asOf, opts)
}

// persist saves s's files into dir, logging the outcome.
func persist(s *Served, store *graph.Store, dir string, logger *slog.Logger) {
	start := time.Now()
	if err := Save(s, store, dir); err != nil {
		logger.Warn("persist snapshot files: the next start-up will re-embed", "dir", dir, "err", err)
		return
	}
	logger.Info("generation files persisted", "version", s.gen.Version, "dir", dir, "elapsed", time.Since(start))
}
