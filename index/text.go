package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/search/query"
)

// ErrBadTextQuery is returned for a keyword query bleve cannot parse.
var ErrBadTextQuery = errors.New("bad text query")

// ErrNotTextIndex is returned by RemoveTextIndex for a directory that holds
// files but no text index.
var ErrNotTextIndex = errors.New("not a text index directory")

// TextDoc is the text of one doc for the keyword index.
type TextDoc struct {
	Title       string `json:"title"`
	Description string `json:"description"`
	Category    string `json:"category"`
	Brand       string `json:"brand"`
}

// TextIndex is a bleve full-text index of doc text ("en" analyzer) for
// keyword and hybrid queries. Safe for concurrent use (bleve's guarantee).
type TextIndex struct {
	idx bleve.Index
}

// NewTextIndex opens or creates a text index under dir; an empty dir gives
// an in-memory index.
func NewTextIndex(dir string) (*TextIndex, error) {
	m := bleve.NewIndexMapping()
	m.DefaultAnalyzer = en.AnalyzerName
	var (
		idx bleve.Index
		err error
	)
	switch {
	case dir == "":
		idx, err = bleve.NewMemOnly(m)
	default:
		idx, err = bleve.Open(dir)
		if errors.Is(err, bleve.ErrorIndexPathDoesNotExist) {
			idx, err = bleve.New(dir, m)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open text index: %w", err)
	}
	return &TextIndex{idx: idx}, nil
}

// RemoveTextIndex removes the text index in dir, so that NewTextIndex
// creates an empty one there. A missing or empty dir is fine; a dir that
// holds files but no bleve index is refused with ErrNotTextIndex and left
// as it is.
func RemoveTextIndex(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove text index: %w", err)
	}
	if len(ents) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, bleveMetaFile)); err != nil {
		return fmt.Errorf("remove text index: %w: %s holds files but no %s", ErrNotTextIndex, dir, bleveMetaFile)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove text index: %w", err)
	}
	return nil
}

// bleveMetaFile is the file every bleve index directory holds.
const bleveMetaFile = "index_meta.json"

// Index adds or replaces the text of docs, in one batch.
func (t *TextIndex) Index(ctx context.Context, docs map[uint32]TextDoc) error {
	b := t.idx.NewBatch()
	for id, d := range docs {
		if err := b.Index(strconv.FormatUint(uint64(id), 10), d); err != nil {
			return fmt.Errorf("index text of doc %d: %w", id, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("index text: %w", err)
	}
	if err := t.idx.Batch(b); err != nil {
		return fmt.Errorf("index text: %w", err)
	}
	return nil
}

// Delete removes docs from the text index.
func (t *TextIndex) Delete(ctx context.Context, ids ...uint32) error {
	b := t.idx.NewBatch()
	for _, id := range ids {
		b.Delete(strconv.FormatUint(uint64(id), 10))
	}
	if err := t.idx.Batch(b); err != nil {
		return fmt.Errorf("delete text: %w", err)
	}
	return nil
}

// Search returns the ids of up to limit docs matching the keyword query
// (bleve query-string syntax: words, "phrases", +must, -not, field:value).
func (t *TextIndex) Search(ctx context.Context, q string, limit int) (*roaring.Bitmap, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("search text: %w", err)
	}
	qs := query.NewQueryStringQuery(q)
	if _, err := qs.Parse(); err != nil {
		return nil, fmt.Errorf("search text: %w: %s", ErrBadTextQuery, clipText(err.Error()))
	}
	req := bleve.NewSearchRequestOptions(qs, limit, 0, false)
	res, err := t.idx.SearchInContext(ctx, req)
	if err == nil {
		err = ctx.Err() // bleve may return partial results at the deadline
	}
	if err != nil {
		return nil, fmt.Errorf("search text: %w", err)
	}
	out := roaring.New()
	for _, h := range res.Hits {
		id, err := strconv.ParseUint(h.ID, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("search text: bad doc id %q: %w", h.ID, err)
		}
		out.Add(uint32(id))
	}
	return out, nil
}

// clipText returns s cut to 64 bytes (on a rune boundary) with a note of
// its length, so that errors never repeat a long query whole.
func clipText(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:i], len(s))
}

// Close closes the index.
func (t *TextIndex) Close() error { return t.idx.Close() }

// HybridMode combines keyword hits with token retrieval.
type HybridMode int

// Hybrid modes.
const (
	// HybridAnd keeps only keyword hits (keyword ∩ tokens): set Query.Restrict.
	HybridAnd HybridMode = iota + 1
	// HybridOr adds keyword hits to the token candidates (keyword ∪ tokens):
	// set Query.Include.
	HybridOr
)

// Hybrid returns q with the keyword hits applied per mode.
func Hybrid(q Query, keyword *roaring.Bitmap, mode HybridMode) Query {
	switch mode {
	case HybridAnd:
		if q.Restrict != nil {
			q.Restrict = Intersect(q.Restrict, keyword)
		} else {
			q.Restrict = keyword
		}
	case HybridOr:
		q.Include = Union(q.Include, keyword)
	}
	return q
}
