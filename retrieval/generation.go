package retrieval

import (
	"container/heap"
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/rank"
)

// generation is one trained model's immutable serving state: the model,
// the per-type embedding matrices of every entity it embedded, and the
// token catalogue of the ad index as built. Nothing in a generation
// changes after it is built; what every ingested event changes is its
// liveState part. Safe for concurrent reads.
type generation struct {
	// Model embeds entities unseen at training time (cold start); nil
	// serves only the precomputed embeddings.
	Model *model.Model
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
	// Catalogue labels the interest tokens of the index as built (nil: no
	// labels).
	Catalogue *index.Catalogue
}

// Dim returns the embedding dimension, 0 when unknown.
func (g *generation) Dim() int {
	if g.Model != nil {
		return g.Model.Config().ServedDim()
	}
	for _, m := range g.Embeddings {
		return m.Dim
	}
	return 0
}

// liveState is the writer-side part of a served generation: the live ad index
// (fresh ads are upserted into it; its readers take index snapshots), the
// ads' engagement priors and their co-engagement. Every ingested event
// changes it. Its one owner is the [Engine] that serves it: only
// Engine.Publish and Engine.Apply write to it, under the engine's apply
// lock, after the event is in the graph store. Readers may use it
// concurrently.
type liveState struct {
	Index *index.Index
	// Priors and Co are nil when the settings turn them off, and before
	// Engine.Publish counts them.
	Priors *rank.Priors
	Co     *rank.CoEngagement

	newAds atomic.Pointer[newAdSet] // the last answer of newAdsOf
}

// newAdSet is the set of new ads of one index snapshot, as of a count of
// the priors' changes.
type newAdSet struct {
	snap    *index.Snapshot
	priors  *rank.Priors
	changes uint64
	ads     *roaring.Bitmap
}

// newAdsOf returns the ads of snapshot idx that are new (rank.Priors.NewAds),
// nil without priors. The answer is shared by every request of the same
// snapshot until the priors change which ads are new, so it must not be
// modified: at a million ads computing it copies the live set twice.
func (l *liveState) newAdsOf(idx *index.Snapshot) *roaring.Bitmap {
	p := l.Priors
	if p == nil {
		return nil
	}
	changes := p.Changes() // read first: a change meanwhile is seen by the next call
	if c := l.newAds.Load(); c != nil && c.snap == idx && c.priors == p && c.changes == changes {
		return c.ads
	}
	ads := p.NewAds(idx.Live())
	l.newAds.Store(&newAdSet{snap: idx, priors: p, changes: changes, ads: ads})
	return ads
}

// Served is what a request reads: a generation and its live part. A
// request loads the engine's current Served once and uses it throughout.
// Its parts are read only through [Engine] methods and the accessors
// below, which describe the version it serves.
type Served struct {
	gen  *generation
	live *liveState

	sm atomic.Pointer[graph.Sampler] // request-time sampler of gen.Model, made on first use
}

// Version names the model version served ("v3").
func (s *Served) Version() string { return s.gen.Version }

// TrainedAt is when the served model version was trained.
func (s *Served) TrainedAt() time.Time { return s.gen.TrainedAt }

// AsOf is the graph time (unix ms) the generation's embeddings were
// taken at.
func (s *Served) AsOf() int64 { return s.gen.AsOf }

// Dir is the absolute checkpoint directory of the served model version
// ("" when unknown).
func (s *Served) Dir() string { return s.gen.Dir }

// Metrics returns a copy of the served model's training and validation
// metrics.
func (s *Served) Metrics() map[string]float64 { return maps.Clone(s.gen.Metrics) }

// Embeddings returns the generation's embeddings of the nodes of type t
// as of AsOf (nil when it holds none). The matrix is shared and must not
// be modified.
func (s *Served) Embeddings(t graph.NodeType) *Matrix { return s.gen.Embeddings[t] }

// sampler returns the request-time sampler of the generation's model over
// store (one per Served, so that its pooled state is reused across
// requests): its teacher view, or with narrow its student view without
// dropout as the teacher view. An engine always passes the same store and
// narrow. gen.Model must not be nil.
func (s *Served) sampler(store *graph.Store, narrow bool) *graph.Sampler {
	if sm := s.sm.Load(); sm != nil {
		return sm
	}
	opts := s.gen.Model.SamplerOptions()
	if narrow {
		opts = graph.NewSampler(store, opts).Options() // with the defaults of both views
		opts.Teacher = opts.Student
		opts.Teacher.FeatureDropout, opts.Teacher.AnchorOnly = -1, -1 // negative: none
	}
	sm := graph.NewSampler(store, opts)
	if s.sm.CompareAndSwap(nil, sm) {
		return sm
	}
	return s.sm.Load()
}

// popularityAxis is the generation's model's popularity coordinate (-1:
// none, or no model).
func (s *Served) popularityAxis() int {
	if s.gen.Model == nil {
		return -1
	}
	return s.gen.Model.PopularityAxis()
}

// IndexSize returns the number of ads in the live index.
func (s *Served) IndexSize() int {
	if s == nil || s.live == nil || s.live.Index == nil {
		return 0
	}
	return s.live.Index.Snapshot().Len()
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

// Vector returns the embedding of node idx; the slice must not be
// modified. A nil matrix has no rows.
func (m *Matrix) Vector(idx uint32) ([]float32, bool) {
	if m == nil {
		return nil, false
	}
	r, ok := m.row[idx]
	if !ok {
		return nil, false
	}
	return m.Data[r*m.Dim : (r+1)*m.Dim], true
}

// Scored is one row of a [Matrix] (a graph node index) and its score.
type Scored struct {
	Idx   uint32
	Score float32
}

type minHeap []Scored

func (h minHeap) Len() int { return len(h) }
func (h minHeap) Less(i, j int) bool {
	if h[i].Score != h[j].Score {
		return h[i].Score < h[j].Score
	}
	return h[i].Idx > h[j].Idx
}
func (h minHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)   { *h = append(*h, x.(Scored)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TopK returns the k rows with the highest dot product with q, best first
// (ties by smaller node index), skipping node skip when skipOK. It checks
// ctx every 4096 rows.
func (m *Matrix) TopK(ctx context.Context, q []float32, k int, skip uint32, skipOK bool) ([]Scored, error) {
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
			heap.Push(&h, Scored{idx, s})
		} else if s > h[0].Score || (s == h[0].Score && idx < h[0].Idx) {
			h[0] = Scored{idx, s}
			heap.Fix(&h, 0)
		}
	}
	out := make([]Scored, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(Scored)
	}
	return out, nil
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
