package serving

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/explore"
	"github.com/hir-ads/hir/graph"
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
	tokenSampleMembers = 3
	memberTextBytes    = 200
	maxTokenLevel      = 63
)

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
	var parent *retrieval.Token
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

// apiMapPoint renders p for the API.
func apiMapPoint(p retrieval.MapPoint) api.MapPoint {
	out := api.MapPoint{Type: api.NodeType(p.Ref.Type.String()), Id: p.Ref.ID, X: p.X, Y: p.Y}
	if p.HasToken {
		tok := formatToken(p.Token)
		out.Token = &tok
		if p.Label != "" {
			l := p.Label
			out.Label = &l
		}
	}
	return out
}

// GetMap answers an evenly spaced sample of the served ads projected on the
// first two principal components of their embeddings.
func (s *Server) GetMap(w http.ResponseWriter, r *http.Request, params api.GetMapParams) {
	limit, _, err := pageParams(params.Limit, nil, defaultMapPoints, maxMapPoints)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	m, err := s.engine.Map(r.Context(), limit)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.EmbeddingMap{ModelVersion: m.Version, BasisSample: m.BasisSample, Total: m.Total,
		Method:            fmt.Sprintf("pca: top 2 principal components of %d sampled ad embeddings", m.BasisSample),
		ExplainedVariance: []float32{float32(m.Explained[0]), float32(m.Explained[1])},
		Points:            make([]api.MapPoint, len(m.Points)), Interests: make([]api.TokenRef, len(m.Interests))}
	for i, p := range m.Points {
		out.Points[i] = apiMapPoint(p)
	}
	for i, in := range m.Interests {
		out.Interests[i] = labelledTokenRef(in.Token, in.Label, in.Share)
	}
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
	version, points, missing, err := s.engine.Project(r.Context(), refs)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.ProjectResponse{ModelVersion: version, Points: make([]api.MapPoint, len(points)), Missing: make([]api.Ref, len(missing))}
	for i, p := range points {
		out.Points[i] = apiMapPoint(p)
	}
	for i, ref := range missing {
		out.Missing[i] = apiRef(ref)
	}
	writeJSON(w, http.StatusOK, out)
}

// msTime converts unix milliseconds to a UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
