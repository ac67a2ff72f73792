package retrieval

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
)

// catalogueFile is the content of FileCatalogue: a token catalogue and
// what it was built from, which a load checks before it reads the
// catalogue instead of building it (a minute at a million ads).
type catalogueFile struct {
	// IndexSeq and IndexDocs identify the index snapshot the catalogue
	// labels (index.Snapshot.Seq and Len, as its file stores them).
	IndexSeq  uint64 `json:"index_seq"`
	IndexDocs int    `json:"index_docs"`
	// Digest is catalogueDigest of the store the labels were read from.
	Digest uint64            `json:"digest"`
	Tokens []index.TokenInfo `json:"tokens"`
}

// catalogueDigest hashes what a catalogue reads of store (buildCatalogue):
// every ad's text and the text of every entity an attribute names.
func catalogueDigest(store *graph.Store) uint64 {
	h := fnv.New64a()
	for _, t := range []graph.NodeType{graph.NodeAd, graph.NodeBrand, graph.NodeCategory, graph.NodeAdvertiser, graph.NodeCampaign, graph.NodeProduct} {
		for i := range store.NumNodes(t) {
			var text string
			if e := store.Entity(graph.NodeID{Type: t, Idx: uint32(i)}); e != nil {
				text = e.Text
			}
			hashField(h, text)
		}
		h.Write([]byte{0xff, 0xff, 0xff, 0xff, byte(t)})
	}
	return h.Sum64()
}

// saveCatalogue writes cat, built on snap from store, to dir's
// FileCatalogue, atomically.
func saveCatalogue(dir string, cat *index.Catalogue, snap *index.Snapshot, store *graph.Store) error {
	b, err := json.Marshal(catalogueFile{IndexSeq: snap.Seq(), IndexDocs: snap.Len(), Digest: catalogueDigest(store), Tokens: cat.Infos()})
	if err != nil {
		return fmt.Errorf("encode catalogue: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, FileCatalogue), b)
}

// loadCatalogue reads dir's FileCatalogue when it labels snap as store
// holds it now; nil otherwise (absent, unreadable, or built from another
// index or other text), and the caller builds it.
func loadCatalogue(dir string, snap *index.Snapshot, store *graph.Store, logger *slog.Logger) *index.Catalogue {
	b, err := os.ReadFile(filepath.Join(dir, FileCatalogue))
	if err != nil {
		return nil
	}
	var f catalogueFile
	if err := json.Unmarshal(b, &f); err != nil {
		logger.Warn("catalogue file unreadable: building the catalogue", "dir", dir, "err", err)
		return nil
	}
	if f.IndexSeq != snap.Seq() || f.IndexDocs != snap.Len() || f.Digest != catalogueDigest(store) {
		return nil
	}
	cat, err := index.NewCatalogue(f.Tokens)
	if err != nil {
		logger.Warn("catalogue file unusable: building the catalogue", "dir", dir, "err", err)
		return nil
	}
	return cat
}
