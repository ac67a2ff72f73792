package retrieval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hir-ads/hir/explore"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
)

// MapBasisSample bounds the ads a map basis is fitted on ([Engine.Map]).
const MapBasisSample = 4096

// MapPoint is an entity placed on the map of the served ads ([Engine.Map],
// [Engine.Project]): its coordinates on the basis's two principal
// components and, when its bag has one, its coarse interest (the level-0
// token of the highest weight) with the token's label.
type MapPoint struct {
	Ref      graph.Ref
	X, Y     float32
	HasToken bool
	Token    index.Token
	Label    string
}

// MapInterest is a coarse interest of a map's points and the share of the
// points it holds.
type MapInterest struct {
	Token index.Token
	Label string
	Share float32
}

// EmbeddingMap is an evenly spaced sample of the served ads on the first
// two principal components of their embeddings ([Engine.Map]).
type EmbeddingMap struct {
	Version     string
	BasisSample int        // ads the basis was fitted on
	Total       int        // ads the generation embedded
	Explained   [2]float64 // each component's share of the variance
	Points      []MapPoint
	Interests   []MapInterest // the points' coarse interests, largest share first
}

// mapBasis is the PCA basis of one generation's ad embeddings, fitted on
// their first pca.Dim() coordinates: the encoder's (model.Config.EmbedDim),
// the interests, without the appended spectral factors, whose longest rows
// would otherwise pull the two components onto a few ads.
type mapBasis struct {
	gen *generation
	pca *explore.PCA
}

// mapCache holds the basis of the last generation mapped. Safe for
// concurrent use.
type mapCache struct {
	mu    sync.Mutex
	basis *mapBasis // mu must be held
}

// get returns the map basis of s's generation, fitting it on the first
// call for that generation.
func (c *mapCache) get(ctx context.Context, s *Served) (*mapBasis, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.basis; b != nil && b.gen == s.gen {
		return b, nil
	}
	m := s.gen.Embeddings[graph.NodeAd]
	if m == nil || m.Len() == 0 {
		return nil, fmt.Errorf("%w: model %s has no ad embeddings to map", ErrNotFound, s.gen.Version)
	}
	dim := m.Dim
	if s.gen.Model != nil {
		dim = min(dim, s.gen.Model.Config().EmbedDim)
	}
	rows := explore.Spread(m.Len(), MapBasisSample)
	vecs := make([][]float32, len(rows))
	for i, row := range rows {
		vecs[i] = m.Data[row*m.Dim : row*m.Dim+dim]
	}
	pca, err := explore.FitPCA(ctx, vecs)
	if err != nil {
		return nil, fmt.Errorf("fit map basis: %w", err)
	}
	c.basis = &mapBasis{gen: s.gen, pca: pca}
	return c.basis, nil
}

// point places vec of ref with b, labelled with its coarse interest from
// quantizer q and catalogue cat (nil: no labels); false when the basis
// cannot project it.
func (b *mapBasis) point(q *index.Quantizer, cat *index.Catalogue, ref graph.Ref, vec []float32) (MapPoint, bool) {
	x, y, ok := b.pca.Project(vec[:min(b.pca.Dim(), len(vec))])
	if !ok {
		return MapPoint{}, false
	}
	p := MapPoint{Ref: ref, X: float32(x), Y: float32(y)}
	var best index.WeightedToken
	for _, wt := range q.Bag(vec) {
		if wt.Token.Level() == 0 && (!p.HasToken || wt.Weight > best.Weight) {
			best, p.HasToken = wt, true
		}
	}
	if p.HasToken {
		p.Token = best.Token
		if cat != nil {
			if info, ok := cat.Get(best.Token); ok {
				p.Label = info.Label
			}
		}
	}
	return p, true
}

// Map returns an evenly spaced sample of up to limit of the generation's
// ads on the first two principal components of their embeddings, fitted
// once per generation on up to MapBasisSample of them. It loads the served
// state once; ErrNoGeneration before the first publication.
func (e *Engine) Map(ctx context.Context, limit int) (*EmbeddingMap, error) {
	s := e.cur.Load()
	if s == nil {
		return nil, ErrNoGeneration
	}
	b, err := e.maps.get(ctx, s)
	if err != nil {
		return nil, err
	}
	m := s.gen.Embeddings[graph.NodeAd]
	ev := b.pca.Explained()
	out := &EmbeddingMap{Version: s.gen.Version, BasisSample: b.pca.SampleSize(), Total: m.Len(),
		Explained: [2]float64{ev[0], ev[1]}, Points: []MapPoint{}, Interests: []MapInterest{}}
	counts := map[index.Token]int{}
	q := s.live.Index.Quantizer()
	for _, row := range explore.Spread(m.Len(), limit) {
		ref := e.store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: m.Idx[row]})
		p, ok := b.point(q, s.gen.Catalogue, ref, m.Data[row*m.Dim:(row+1)*m.Dim])
		if !ok {
			continue
		}
		if p.HasToken {
			counts[p.Token]++
		}
		out.Points = append(out.Points, p)
	}
	for t, n := range counts {
		in := MapInterest{Token: t, Share: float32(n) / float32(len(out.Points))}
		if cat := s.gen.Catalogue; cat != nil {
			if info, ok := cat.Get(t); ok {
				in.Label = info.Label
			}
		}
		out.Interests = append(out.Interests, in)
	}
	slices.SortFunc(out.Interests, func(a, b MapInterest) int {
		return cmp.Or(cmp.Compare(b.Share, a.Share), cmp.Compare(a.Token.Level(), b.Token.Level()), cmp.Compare(a.Token.Code(), b.Token.Code()))
	})
	return out, nil
}

// Project places each of refs on the map of [Engine.Map] by its current
// embedding (embedded at request time where the generation has none), with
// the same basis; refs the graph does not hold, or that the basis cannot
// project, are returned as missing. It loads the served state once;
// ErrNoGeneration before the first publication.
func (e *Engine) Project(ctx context.Context, refs []graph.Ref) (version string, points []MapPoint, missing []graph.Ref, err error) {
	s := e.cur.Load()
	if s == nil {
		return "", nil, nil, ErrNoGeneration
	}
	b, err := e.maps.get(ctx, s)
	if err != nil {
		return "", nil, nil, err
	}
	points, missing = []MapPoint{}, []graph.Ref{}
	idx := s.live.Index.Snapshot()
	q := s.live.Index.Quantizer()
	for _, ref := range refs {
		vec, err := e.vectorIn(ctx, s, idx, ref)
		if errors.Is(err, ErrNotFound) {
			missing = append(missing, ref)
			continue
		}
		if err != nil {
			return "", nil, nil, err
		}
		if p, ok := b.point(q, s.gen.Catalogue, ref, vec); ok {
			points = append(points, p)
		} else {
			missing = append(missing, ref)
		}
	}
	return s.gen.Version, points, missing, nil
}
