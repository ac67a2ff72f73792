package retrieval

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
)

// The keyword index kept on disk (Options.TextIndexDir) is a function of
// the store: every ad with a title, under its textDoc. A clean Close
// records, beside the index, a hash of every ad's textDoc as the index
// holds it (textHashesFile); the next NewEngine reads the record, removes
// it before it changes anything, and re-indexes only the ads whose hash
// differs from the store's. A process that stops without Close (kill -9,
// a crash) leaves no record, and the next start rebuilds the index whole.

// textHashesSuffix names the record of a closed keyword index: the index's
// directory plus this suffix.
const textHashesSuffix = ".hashes"

// textHashesMagic opens a record; a u32 count of ads, their u64 hashes by
// ad index (0: not in the index) and a CRC-32C of all before it follow.
var textHashesMagic = [8]byte{'H', 'I', 'R', 'T', 'X', 'H', '1', '\n'}

// textHash is the hash of ad ent's keyword-index text, 0 when the index
// does not hold the ad (no title).
func textHash(ent *graph.Entity) uint64 {
	d, ok := adText(ent)
	if !ok {
		return 0
	}
	h := fnv.New64a()
	for _, f := range []string{d.Title, d.Description, d.Category, d.Brand} {
		hashField(h, f)
	}
	return h.Sum64() | 1
}

// hashField writes f to h with its length first, so that the fields of a
// sequence cannot run into one another.
func hashField(h hash.Hash64, f string) {
	h.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(f))))
	h.Write([]byte(f))
}

// adText returns ad ent's keyword-index text, false when the index does not
// hold it: an ad without a title.
func adText(ent *graph.Entity) (index.TextDoc, bool) {
	if ent == nil || ent.Text == "" {
		return index.TextDoc{}, false
	}
	return index.TextDoc{Title: ent.Text, Description: ent.Attrs["description"],
		Category: ent.Attrs[index.AttrCategory], Brand: ent.Attrs[index.AttrBrand]}, true
}

// textHashes returns the text hash of every ad of store, by ad index.
func textHashes(store *graph.Store) []uint64 {
	n := store.NumNodes(graph.NodeAd)
	out := make([]uint64, n)
	for i := range n {
		out[i] = textHash(store.Entity(graph.NodeID{Type: graph.NodeAd, Idx: uint32(i)}))
	}
	return out
}

// encodeTextHashes encodes a record of hashes.
func encodeTextHashes(hashes []uint64) []byte {
	b := make([]byte, 0, 16+8*len(hashes))
	b = append(b, textHashesMagic[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hashes)))
	for _, h := range hashes {
		b = binary.LittleEndian.AppendUint64(b, h)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// errBadTextHashes is returned for a record that is not one.
var errBadTextHashes = errors.New("bad keyword index record")

// decodeTextHashes decodes a record of encodeTextHashes.
func decodeTextHashes(b []byte) ([]uint64, error) {
	if len(b) < 16 || string(b[:8]) != string(textHashesMagic[:]) {
		return nil, fmt.Errorf("%w: no header", errBadTextHashes)
	}
	n := binary.LittleEndian.Uint32(b[8:12])
	if uint64(len(b)) != 16+8*uint64(n) {
		return nil, fmt.Errorf("%w: %d bytes for %d ads", errBadTextHashes, len(b), n)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", errBadTextHashes)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(body[12+8*i:])
	}
	return out, nil
}

// takeTextHashes reads and removes the record of the keyword index in dir:
// nil when there is none or it is unreadable (the index is then rebuilt).
// The record is removed durably before the index is changed, so that a
// crash from here on leaves none.
func takeTextHashes(dir string) ([]uint64, error) {
	path := filepath.Clean(dir) + textHashesSuffix
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read keyword index record: %w", err)
	}
	hashes, decErr := decodeTextHashes(b)
	if err := os.Remove(path); err != nil {
		return nil, fmt.Errorf("remove keyword index record: %w", err)
	}
	if err := eventlog.SyncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("remove keyword index record: %w", err)
	}
	if decErr != nil {
		return nil, nil
	}
	return hashes, nil
}

// putTextHashes records hashes for the keyword index in dir, atomically.
func putTextHashes(dir string, hashes []uint64) error {
	path := filepath.Clean(dir) + textHashesSuffix
	if err := writeFileAtomic(path, encodeTextHashes(hashes)); err != nil {
		return fmt.Errorf("record keyword index: %w", err)
	}
	if err := eventlog.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("record keyword index: %w", err)
	}
	return nil
}

// syncText brings the reopened keyword index, whose ads' hashes were
// recorded as old, up to the store: the ads whose text changed, appeared
// or went are indexed or deleted. It returns how many it touched.
func (e *Engine) syncText(ctx context.Context, old []uint64) (int, error) {
	now := textHashes(e.store)
	docs := map[uint32]index.TextDoc{}
	var gone []uint32
	touched := 0
	flush := func() error {
		if len(docs) > 0 {
			if err := e.text.Index(ctx, docs); err != nil {
				return err
			}
			clear(docs)
		}
		if len(gone) > 0 {
			if err := e.text.Delete(ctx, gone...); err != nil {
				return err
			}
			gone = gone[:0]
		}
		return nil
	}
	for i := range max(len(now), len(old)) {
		var h, was uint64
		if i < len(now) {
			h = now[i]
		}
		if i < len(old) {
			was = old[i]
		}
		if h == was {
			continue
		}
		touched++
		if h == 0 {
			gone = append(gone, uint32(i))
		} else {
			d, _ := adText(e.store.Entity(graph.NodeID{Type: graph.NodeAd, Idx: uint32(i)}))
			docs[uint32(i)] = d
		}
		if len(docs)+len(gone) >= 4096 {
			if err := flush(); err != nil {
				return 0, fmt.Errorf("sync ad text: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return 0, fmt.Errorf("sync ad text: %w", err)
	}
	return touched, nil
}
