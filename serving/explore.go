package serving

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/explore"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/retrieval"
)

// Limits of the explorer's read endpoints, as in openapi.yaml.
const (
	defaultTokenPage   = 50
	maxTokenPage       = 500
	defaultPage        = 50
	maxPage            = 1000
	defaultMapPoints   = 1000
	maxMapPoints       = 5000
	maxProject         = 1000
	mapBasisSample     = 4096
	tokenSampleMembers = 3
	memberTextBytes    = 200
	maxTokenLevel      = 63
)

// mapBasis is the PCA basis of one generation's ad embeddings, fitted on
// their first pca.Dim() coordinates: the encoder's (model.Config.EmbedDim),
// the interests, without the appended spectral factors, whose longest rows
// would otherwise pull the two components onto a few ads.
type mapBasis struct {
	gen *retrieval.Generation
	pca *explore.PCA
}

// explorerCache holds what the explorer endpoints compute once per
// generation: the map's basis and the training history. Safe for
// concurrent use.
type explorerCache struct {
	basisMtx   sync.Mutex
	basis      *mapBasis // basisMtx must be held
	historyMtx sync.Mutex
	history    *modelHistory // historyMtx must be held
}

// pageParams validates the optional limit (default def, at most max) and
// cursor parameters of a paged or sampled list.
func pageParams(limit *int, cursor *string, def, max int) (int, uint64, error) {
	n := def
	if limit != nil {
		if *limit < 1 || *limit > max {
			return 0, 0, badRequestf("limit: %d is out of range 1..%d", *limit, max)
		}
		n = *limit
	}
	if cursor == nil {
		return n, 0, nil
	}
	c, err := explore.ParseCursor(*cursor)
	if err != nil {
		return 0, 0, badRequestf("cursor: %q is not a cursor this server returned", clip(*cursor))
	}
	return n, c, nil
}

func apiRef(ref graph.Ref) api.Ref {
	return api.Ref{Type: api.NodeType(ref.Type.String()), Id: ref.ID}
}

// ListTokens answers a page of the tokens of one level, or of the children
// of one token, largest first.
func (s *Server) ListTokens(w http.ResponseWriter, r *http.Request, params api.ListTokensParams) {
	limit, offset, err := pageParams(params.Limit, params.Cursor, defaultTokenPage, maxTokenPage)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	level := 0
	if params.Level != nil {
		if *params.Level < 0 || *params.Level > maxTokenLevel {
			s.writeProblem(w, r, badRequestf("level: %d is out of range 0..%d", *params.Level, maxTokenLevel))
			return
		}
		level = *params.Level
	}
	var parent *index.Token
	if params.Parent != nil {
		p, err := parseToken(*params.Parent)
		if err != nil {
			s.writeProblem(w, r, fmt.Errorf("parent: %w", err))
			return
		}
		parent, level = &p, p.Level()+1
	}
	list, err := s.engine.Tokens(level, parent, tokenSampleMembers)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	lo, hi, more := explore.Page(len(list.Tokens), offset, limit)
	out := api.TokenPage{ModelVersion: list.Version, Level: level, Levels: list.Levels, Total: len(list.Tokens),
		Tokens: make([]api.TokenSummary, 0, hi-lo)}
	if parent != nil {
		p := formatToken(*parent)
		out.Parent = &p
	}
	for _, v := range list.Tokens[lo:hi] {
		info := v.Info
		ts := api.TokenSummary{Token: formatToken(info.Token), Level: info.Token.Level(), Size: v.Size, Children: len(info.Children)}
		if info.Label != "" {
			l := info.Label
			ts.Label = &l
		}
		if info.Parent != nil {
			p := formatToken(*info.Parent)
			ts.Parent = &p
		}
		members := make([]api.Ref, 0, len(v.Members))
		for _, ref := range v.Members {
			members = append(members, apiRef(ref))
		}
		ts.SampleMembers = &members
		out.Tokens = append(out.Tokens, ts)
	}
	if more {
		c := explore.FormatCursor(uint64(hi))
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
}

// ListTokenMembers answers a page of the ads indexed under a token, in
// index order; the cursor is the index position to resume at.
func (s *Server) ListTokenMembers(w http.ResponseWriter, r *http.Request, token string, params api.ListTokenMembersParams) {
	t, err := parseToken(token)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	limit, from, err := pageParams(params.Limit, params.Cursor, defaultPage, maxPage)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if from > math.MaxUint32 {
		s.writeProblem(w, r, badRequestf("cursor: %q is not a cursor this server returned", clip(*params.Cursor)))
		return
	}
	page, err := s.engine.TokenMembers(t, uint32(from), limit)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.MemberPage{Token: formatToken(t), ModelVersion: page.Version, Total: page.Total,
		Items: make([]api.Member, 0, len(page.Members))}
	for _, nid := range page.Members {
		m := api.Member{Type: api.Ad, Id: s.store.Ref(nid).ID}
		if e := s.store.Entity(nid); e != nil && e.Text != "" {
			txt := cutAtRune(e.Text, memberTextBytes)
			m.Text = &txt
		}
		out.Items = append(out.Items, m)
	}
	if page.More {
		c := explore.FormatCursor(uint64(page.Next))
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
}

// ListEntityEvents answers a page of the events an entity is the source
// of, newest first; the cursor is an offset.
func (s *Server) ListEntityEvents(w http.ResponseWriter, r *http.Request, pType api.EntityType, id api.EntityID, params api.ListEntityEventsParams) {
	ref, err := parseEntityParams(pType, id)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	limit, offset, err := pageParams(params.Limit, params.Cursor, defaultPage, maxPage)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	total, edges, err := s.engine.Events(ref, offset, limit)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.EventPage{Entity: apiRef(ref), Total: total, Events: make([]api.EventRecord, 0, len(edges))}
	for _, e := range edges {
		out.Events = append(out.Events, api.EventRecord{Dst: apiRef(s.store.Ref(e.Nbr)),
			Type: api.EdgeType(e.Type.String()), Ts: msTime(e.TS), Weight: e.Weight})
	}
	if next := offset + uint64(len(out.Events)); len(out.Events) == limit && next < uint64(total) {
		c := explore.FormatCursor(next)
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
}

// basisFor returns the map basis of cur's generation, fitting it on the
// first call for that generation.
func (s *Server) basisFor(r *http.Request, cur *retrieval.Served) (*mapBasis, error) {
	s.explorerCache.basisMtx.Lock()
	defer s.explorerCache.basisMtx.Unlock()
	if b := s.explorerCache.basis; b != nil && b.gen == cur.Gen {
		return b, nil
	}
	m := cur.Gen.Embeddings[graph.NodeAd]
	if m == nil || m.Len() == 0 {
		return nil, notFoundf("model %s has no ad embeddings to map", cur.Gen.Version)
	}
	dim := m.Dim
	if cur.Gen.Model != nil {
		dim = min(dim, cur.Gen.Model.Config().EmbedDim)
	}
	rows := explore.Spread(m.Len(), mapBasisSample)
	vecs := make([][]float32, len(rows))
	for i, row := range rows {
		vecs[i] = m.Data[row*m.Dim : row*m.Dim+dim]
	}
	pca, err := explore.FitPCA(r.Context(), vecs)
	if err != nil {
		return nil, fmt.Errorf("fit map basis: %w", err)
	}
	b := &mapBasis{gen: cur.Gen, pca: pca}
	s.explorerCache.basis = b
	return b, nil
}

// mapPoint places vec with b and labels it with its coarse interest.
func mapPoint(b *mapBasis, q *index.Quantizer, ref graph.Ref, vec []float32) (api.MapPoint, bool) {
	x, y, ok := b.pca.Project(vec[:min(b.pca.Dim(), len(vec))])
	if !ok {
		return api.MapPoint{}, false
	}
	p := api.MapPoint{Type: api.NodeType(ref.Type.String()), Id: ref.ID, X: float32(x), Y: float32(y)}
	if t, ok := coarseToken(q, vec); ok {
		tok := formatToken(t)
		p.Token = &tok
		if cat := b.gen.Catalogue; cat != nil {
			if info, ok := cat.Get(t); ok && info.Label != "" {
				l := info.Label
				p.Label = &l
			}
		}
	}
	return p, true
}

// coarseToken returns the level-0 token of vec's bag with the highest
// weight.
func coarseToken(q *index.Quantizer, vec []float32) (index.Token, bool) {
	var best index.WeightedToken
	found := false
	for _, wt := range q.Bag(vec) {
		if wt.Token.Level() == 0 && (!found || wt.Weight > best.Weight) {
			best, found = wt, true
		}
	}
	return best.Token, found
}

// GetMap answers an evenly spaced sample of the served ads projected on the
// first two principal components of their embeddings.
func (s *Server) GetMap(w http.ResponseWriter, r *http.Request, params api.GetMapParams) {
	limit, _, err := pageParams(params.Limit, nil, defaultMapPoints, maxMapPoints)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	cur := s.engine.Current()
	if cur == nil {
		s.writeProblem(w, r, ErrNoSnapshot)
		return
	}
	b, err := s.basisFor(r, cur)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	m := cur.Gen.Embeddings[graph.NodeAd]
	q := cur.Live.Index.Quantizer()
	ev := b.pca.Explained()
	out := api.EmbeddingMap{ModelVersion: cur.Gen.Version, BasisSample: b.pca.SampleSize(), Total: m.Len(),
		Method:            fmt.Sprintf("pca: top 2 principal components of %d sampled ad embeddings", b.pca.SampleSize()),
		ExplainedVariance: []float32{float32(ev[0]), float32(ev[1])},
		Points:            []api.MapPoint{}, Interests: []api.TokenRef{}}
	counts := map[string]int{}
	for _, row := range explore.Spread(m.Len(), limit) {
		ref := s.store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: m.Idx[row]})
		p, ok := mapPoint(b, q, ref, m.Data[row*m.Dim:(row+1)*m.Dim])
		if !ok {
			continue
		}
		if p.Token != nil {
			counts[*p.Token]++
		}
		out.Points = append(out.Points, p)
	}
	for tok, n := range counts {
		t, err := parseToken(tok)
		if err != nil {
			continue
		}
		out.Interests = append(out.Interests, tokenRef(cur.Gen.Catalogue, t, float32(n)/float32(len(out.Points))))
	}
	slices.SortFunc(out.Interests, func(a, b api.TokenRef) int {
		if c := cmp.Compare(*b.Weight, *a.Weight); c != 0 {
			return c
		}
		return strings.Compare(a.Token, b.Token)
	})
	writeJSON(w, http.StatusOK, out)
}

// projectRequest mirrors api.ProjectRequest.
type projectRequest struct {
	Entities []json.RawMessage `json:"entities"`
}

// ProjectEntities places entities on the map of GetMap: each one's current
// embedding, projected with the same basis.
func (s *Server) ProjectEntities(w http.ResponseWriter, r *http.Request) {
	body, err := readJSONBody(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var raw projectRequest
	if err := decodeStrict(body, &raw); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	switch {
	case len(raw.Entities) == 0:
		s.writeProblem(w, r, badRequestf("entities: at least one entity is required"))
		return
	case len(raw.Entities) > maxProject:
		s.writeProblem(w, r, badRequestf("entities: %d entities exceed the limit of %d", len(raw.Entities), maxProject))
		return
	}
	refs := make([]graph.Ref, len(raw.Entities))
	for i, rr := range raw.Entities {
		if _, err := objectFields(rr, refFields); err != nil {
			s.writeProblem(w, r, &ItemError{Field: "entities", Index: i, Err: err})
			return
		}
		if err := json.Unmarshal(rr, &refs[i]); err != nil {
			s.writeProblem(w, r, &ItemError{Field: "entities", Index: i, Err: badRequestf("%v", err)})
			return
		}
		if err := refs[i].Validate(); err != nil {
			s.writeProblem(w, r, &ItemError{Field: "entities", Index: i, Err: badRequestf("%v", err)})
			return
		}
	}
	cur := s.engine.Current()
	if cur == nil {
		s.writeProblem(w, r, ErrNoSnapshot)
		return
	}
	b, err := s.basisFor(r, cur)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.ProjectResponse{ModelVersion: cur.Gen.Version, Points: []api.MapPoint{}, Missing: []api.Ref{}}
	q := cur.Live.Index.Quantizer()
	for _, ref := range refs {
		vec, _, err := s.engine.Vector(r.Context(), ref)
		if err != nil {
			if isNotFound(err) {
				out.Missing = append(out.Missing, apiRef(ref))
				continue
			}
			s.writeProblem(w, r, err)
			return
		}
		if p, ok := mapPoint(b, q, ref, vec); ok {
			out.Points = append(out.Points, p)
		} else {
			out.Missing = append(out.Missing, apiRef(ref))
		}
	}
	writeJSON(w, http.StatusOK, out)
}
