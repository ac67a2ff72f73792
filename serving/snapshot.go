package serving

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
)

// Snapshot is one published serving state: a model version, the ad index
// built from its embeddings, and the per-type embedding matrices of every
// entity the model saw. It is immutable once published, except Index, which
// is the live writer that new ads are upserted into (its readers take
// index snapshots). A request loads the Snapshot once and uses it
// throughout.
type Snapshot struct {
	// Model embeds entities unseen at training time (cold start); nil
	// serves only the precomputed embeddings.
	Model *model.Model
	// Index holds the ads: doc id = the ad's graph node index.
	Index *index.Index
	// Version names the model version ("v3"); TrainedAt is when it was
	// trained and AsOf the graph time (unix ms) its embeddings were taken at.
	Version   string
	TrainedAt time.Time
	AsOf      int64
	// Dir is the absolute checkpoint directory Model was loaded from, when
	// known; in a cluster it is what the model registry announces.
	Dir string
	// Metrics are the model's training and validation metrics.
	Metrics map[string]float64
	// Embeddings holds, per node type, the embedding of each node that
	// existed at AsOf (ads included), for similar-entity search and known
	// users.
	Embeddings map[graph.NodeType]*Matrix
	// Catalogue labels the interest tokens of Index as built (nil: no
	// labels).
	Catalogue *index.Catalogue

	// trend holds the ads' engagement counts behind the index priors (nil:
	// priors disabled).
	trend *trend
	// co holds the ads' co-engagement behind the re-rank's co-engagement
	// term (nil: the term is off).
	co *coEngagement
}

// IndexSize returns the number of ads in the live index.
func (s *Snapshot) IndexSize() int {
	if s == nil || s.Index == nil {
		return 0
	}
	return s.Index.Snapshot().Len()
}

// Dim returns the embedding dimension, 0 when unknown.
func (s *Snapshot) Dim() int {
	if s.Index != nil {
		return s.Index.Quantizer().Dim()
	}
	for _, m := range s.Embeddings {
		return m.Dim
	}
	return 0
}

// Matrix is a dense matrix of L2-normalised embeddings of nodes of one type,
// row i being node Idx[i]. Immutable once built; safe for concurrent reads.
type Matrix struct {
	Dim  int
	Idx  []uint32  // graph node index of each row
	Data []float32 // len(Idx)*Dim, row-major
	row  map[uint32]int
}

// NewMatrix builds a matrix from rows: idx[i] is the node index of vecs[i].
// The slices are copied.
func NewMatrix(dim int, idx []uint32, vecs [][]float32) (*Matrix, error) {
	if len(idx) != len(vecs) {
		return nil, fmt.Errorf("new matrix: %d ids for %d vectors", len(idx), len(vecs))
	}
	m := &Matrix{Dim: dim, Idx: append([]uint32(nil), idx...), Data: make([]float32, 0, len(idx)*dim),
		row: make(map[uint32]int, len(idx))}
	for i, v := range vecs {
		if len(v) != dim {
			return nil, fmt.Errorf("new matrix: row %d has dim %d, want %d", i, len(v), dim)
		}
		m.Data = append(m.Data, v...)
		m.row[idx[i]] = i
	}
	return m, nil
}

// Len returns the number of rows.
func (m *Matrix) Len() int { return len(m.Idx) }

// Vector returns the embedding of node idx; the slice must not be modified.
func (m *Matrix) Vector(idx uint32) ([]float32, bool) {
	r, ok := m.row[idx]
	if !ok {
		return nil, false
	}
	return m.Data[r*m.Dim : (r+1)*m.Dim], true
}

// scored is one row and its score.
type scored struct {
	idx   uint32
	score float32
}

type minHeap []scored

func (h minHeap) Len() int { return len(h) }
func (h minHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score < h[j].score
	}
	return h[i].idx > h[j].idx
}
func (h minHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)   { *h = append(*h, x.(scored)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// topK returns the k rows with the highest dot product with q, best first
// (ties by smaller node index), skipping node skip when skipOK. It checks
// ctx every 4096 rows.
func (m *Matrix) topK(ctx context.Context, q []float32, k int, skip uint32, skipOK bool) ([]scored, error) {
	if len(q) != m.Dim {
		return nil, fmt.Errorf("top-k: %w: query dim %d, want %d", ErrBadRequest, len(q), m.Dim)
	}
	h := make(minHeap, 0, k+1)
	for r, idx := range m.Idx {
		if r%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if skipOK && idx == skip {
			continue
		}
		s := index.Dot(q, m.Data[r*m.Dim:(r+1)*m.Dim])
		if len(h) < k {
			heap.Push(&h, scored{idx, s})
		} else if s > h[0].score || (s == h[0].score && idx < h[0].idx) {
			h[0] = scored{idx, s}
			heap.Fix(&h, 0)
		}
	}
	out := make([]scored, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(scored)
	}
	return out, nil
}

// formatToken renders t as the API's "level.code".
func formatToken(t index.Token) string {
	return strconv.Itoa(t.Level()) + "." + strconv.Itoa(t.Code())
}

// parseToken parses the API's "level.code".
func parseToken(s string) (index.Token, error) {
	l, c, ok := strings.Cut(s, ".")
	if !ok {
		return 0, badRequestf("token %q: want \"level.code\"", s)
	}
	level, err1 := strconv.Atoi(l)
	code, err2 := strconv.Atoi(c)
	if err1 != nil || err2 != nil {
		return 0, badRequestf("token %q: want \"level.code\" with decimal integers", s)
	}
	t, ok := index.MakeToken(level, code)
	if !ok {
		return 0, badRequestf("token %q: level or code out of range", s)
	}
	return t, nil
}

// embedCache caches embeddings computed on the fly, keyed by model version,
// node and the node's degree (so new events invalidate an entry). Bounded:
// it is cleared whole when full. Safe for concurrent use.
type embedCache struct {
	max int

	mtx sync.Mutex
	m   map[embedKey][]float32 // mtx must be held
}

type embedKey struct {
	version string
	node    graph.NodeID
	degree  int
}

func newEmbedCache(max int) *embedCache {
	return &embedCache{max: max, m: make(map[embedKey][]float32)}
}

func (c *embedCache) get(k embedKey) ([]float32, bool) {
	c.mtx.Lock()
	defer c.mtx.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *embedCache) put(k embedKey, v []float32) {
	c.mtx.Lock()
	defer c.mtx.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = v
}

func (c *embedCache) reset() {
	c.mtx.Lock()
	defer c.mtx.Unlock()
	clear(c.m)
}
