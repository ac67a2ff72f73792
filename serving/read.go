package serving

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/retrieval"
)

// Limits of read requests, as in openapi.yaml.
const (
	MaxK             = retrieval.MaxK
	DefaultRetrieveK = 100
	DefaultSimilarK  = 20
	MaxContextEvents = retrieval.MaxContextEvents
	maxUserText      = 4096
	maxUserAttrs     = 64
	maxUserAttrBytes = 256
	sampleMembers    = 10
)

// anonymousID is the id a context-only (anonymous) retrieve request's user
// takes in the events it sends.
const anonymousID = "_anonymous"

// retrieveRequest mirrors api.RetrieveRequest, with the parts the project's
// own decoders validate kept raw.
type retrieveRequest struct {
	User           json.RawMessage   `json:"user"`
	K              *int              `json:"k"`
	ExcludeSeen    *bool             `json:"exclude_seen"`
	Filter         json.RawMessage   `json:"filter"`
	Query          *string           `json:"query"`
	ContextEvents  []json.RawMessage `json:"context_events"`
	UserContent    json.RawMessage   `json:"user_content"`
	Explain        *bool             `json:"explain"`
	PriorWeight    *float64          `json:"prior_weight"`
	CoEngageWeight *float64          `json:"coengagement_weight"`
	NewAdShare     *float64          `json:"new_ad_share"`
}

// userContent mirrors api.RetrieveRequest's user_content.
type userContent struct {
	Text  string            `json:"text"`
	Attrs map[string]string `json:"attrs"`
}

// retrieveParams is a decoded, validated retrieve request.
type retrieveParams struct {
	req     retrieval.Request
	explain bool
}

// decodeRetrieve decodes and validates a retrieve request body; the weights
// it sets override the engine's for this request.
func decodeRetrieve(body []byte) (*retrieveParams, error) {
	var raw retrieveRequest
	if err := decodeStrict(body, &raw); err != nil {
		return nil, err
	}
	p := &retrieveParams{req: retrieval.Request{K: DefaultRetrieveK, ExcludeSeen: true}}
	req := &p.req
	if len(raw.User) > 0 && string(raw.User) != "null" {
		if _, err := objectFields(raw.User, refFields); err != nil {
			return nil, fmt.Errorf("user: %w", err)
		}
		var ref graph.Ref
		if err := json.Unmarshal(raw.User, &ref); err != nil {
			return nil, fmt.Errorf("user: %w", err)
		}
		if err := normID("user.id", &ref.ID); err != nil {
			return nil, err
		}
		req.User = &ref
	}
	if raw.K != nil {
		req.K = *raw.K
	}
	if raw.ExcludeSeen != nil {
		req.ExcludeSeen = *raw.ExcludeSeen
	}
	if raw.Explain != nil {
		p.explain = *raw.Explain
	}
	for _, f := range []struct {
		name string
		v    *float64
		max  float64
		dst  **float32
	}{
		{"prior_weight", raw.PriorWeight, retrieval.MaxPriorWeight, &req.Weights.Prior},
		{"coengagement_weight", raw.CoEngageWeight, retrieval.MaxCoEngageWeight, &req.Weights.CoEngagement},
		{"new_ad_share", raw.NewAdShare, retrieval.MaxNewAdShare, &req.Weights.NewAdShare},
	} {
		if f.v == nil {
			continue
		}
		if !(*f.v >= 0 && *f.v <= f.max) {
			return nil, badRequestf("%s: %v is out of range 0..%v", f.name, *f.v, f.max)
		}
		v := float32(*f.v)
		*f.dst = &v
	}
	if raw.Query != nil {
		req.Query = *raw.Query
	}
	if err := checkQuery(req.Query); err != nil {
		return nil, err
	}
	if len(raw.Filter) > 0 && string(raw.Filter) != "null" {
		f, err := retrieval.ParseFilter(raw.Filter)
		if err != nil {
			return nil, badRequestf("filter: %v", err)
		}
		req.Filter = f
	}
	if len(raw.UserContent) > 0 && string(raw.UserContent) != "null" {
		ent, err := decodeUserContent(raw.UserContent, req.User)
		if err != nil {
			return nil, fmt.Errorf("user_content: %w", err)
		}
		req.Content = ent
	}
	if len(raw.ContextEvents) > MaxContextEvents {
		return nil, badRequestf("context_events: %d events exceed the limit of %d", len(raw.ContextEvents), MaxContextEvents)
	}
	anchor := graph.Ref{Type: graph.NodeUser, ID: anonymousID}
	if req.User != nil {
		anchor = *req.User
	}
	for i, rawEv := range raw.ContextEvents {
		ev, err := decodeEvent(rawEv, &anchor)
		if err != nil {
			return nil, &ItemError{Field: "context_events", Index: i, Err: err}
		}
		if ev.Src != anchor {
			return nil, &ItemError{Field: "context_events", Index: i,
				Err: badRequestf("src: %s must be omitted or equal the request's user %s", ev.Src, anchor)}
		}
		req.ContextEvents = append(req.ContextEvents, ev)
	}
	if err := req.Validate(); err != nil { // k, the user's type, something to go on
		return nil, err
	}
	return p, nil
}

// decodeUserContent decodes a retrieve request's user_content into the
// entity of the request's user (anonymous when user is nil).
func decodeUserContent(raw json.RawMessage, user *graph.Ref) (*graph.Entity, error) {
	var uc userContent
	if err := decodeStrict(raw, &uc); err != nil {
		return nil, err
	}
	switch {
	case len(uc.Text) > maxUserText:
		return nil, badRequestf("text: %d bytes exceed the limit of %d", len(uc.Text), maxUserText)
	case len(uc.Attrs) > maxUserAttrs:
		return nil, badRequestf("attrs: %d attributes exceed the limit of %d", len(uc.Attrs), maxUserAttrs)
	}
	for k, v := range uc.Attrs {
		if len(k) > maxUserAttrBytes || len(v) > maxUserAttrBytes {
			return nil, badRequestf("attrs: a key or value exceeds %d bytes", maxUserAttrBytes)
		}
	}
	ref := graph.Ref{Type: graph.NodeUser, ID: anonymousID}
	if user != nil {
		ref = *user
	}
	return &graph.Entity{Type: ref.Type, ID: ref.ID, Text: uc.Text, Attrs: uc.Attrs}, nil
}

// RetrieveCandidates answers candidate ads for a known, never-seen or
// anonymous user: decode, [retrieval.Engine.Retrieve], encode.
func (s *Server) RetrieveCandidates(w http.ResponseWriter, r *http.Request) {
	body, err := readJSONBody(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	p, err := s.checkRetrieve(decodeRetrieve(body))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.engine.Retrieve(r.Context(), p.req)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.observeRetrieve(r.Context(), res)
	out := s.retrieveResponse(res, p.explain)
	writeRetrieveResponse(w, http.StatusOK, &out)
}

// stageOptions are the metric options of each retrieval stage, made once.
var stageOptions = func() map[string]metric.RecordOption {
	m := map[string]metric.RecordOption{}
	for _, name := range []string{"keywords", "embed", "candidates", "rerank"} {
		m[name] = metric.WithAttributeSet(attribute.NewSet(attribute.String("stage", name)))
	}
	return m
}()

// observeRetrieve records a retrieval's stage metrics and, when the
// request's span records (a tracer provider is configured), its stage
// spans.
func (s *Server) observeRetrieve(ctx context.Context, res *retrieval.Response) {
	st := res.Stats
	mctx := context.WithoutCancel(ctx)
	recording := trace.SpanFromContext(ctx).IsRecording()
	t := st.Start
	span := func(name string, d time.Duration, attrs ...attribute.KeyValue) {
		if recording {
			_, sp := s.tel.tracer.Start(ctx, name, trace.WithTimestamp(t))
			sp.SetAttributes(attrs...)
			sp.End(trace.WithTimestamp(t.Add(d)))
		}
		s.tel.stageTime.Record(mctx, d.Seconds(), stageOptions[name])
		t = t.Add(d)
	}
	if !recording {
		span("keywords", st.Keywords)
		span("embed", st.Embed)
		span("candidates", st.CandidatesTime)
		span("rerank", st.RerankTime)
	} else {
		span("keywords", st.Keywords)
		span("embed", st.Embed, attribute.Bool("hir.fresh", res.FreshUser))
		span("candidates", st.CandidatesTime, attribute.Int("hir.candidates", st.Candidates), attribute.Int("hir.allowed", st.Allowed),
			attribute.String("hir.stage", string(st.Stage)), attribute.Int("hir.level", st.Level))
		span("rerank", st.RerankTime, attribute.Int("hir.hits", len(res.Candidates)))
	}
	s.tel.candidates.Record(mctx, int64(st.Candidates))
}

// retrieveResponse encodes a retrieval; with explain, each candidate
// carries its score parts and matched tokens with labels.
func (s *Server) retrieveResponse(res *retrieval.Response, explain bool) api.RetrieveResponse {
	fresh, newUser := res.FreshUser, res.NewUser
	out := api.RetrieveResponse{ModelVersion: res.Version, FreshUser: &fresh, NewUser: &newUser,
		Candidates: make([]api.Candidate, 0, len(res.Candidates))}
	var weights map[retrieval.Token]float32 // the query tokens' weights, for explanations
	if explain {
		weights = make(map[retrieval.Token]float32, len(res.Bag))
		for _, wt := range res.Bag {
			weights[wt.Token] = wt.Weight
		}
	}
	for _, c := range res.Candidates {
		ac := api.Candidate{Type: api.NodeType(c.Ref.Type.String()), Id: c.Ref.ID, Score: c.Score}
		if c.NewAd {
			na := true
			ac.NewAd = &na
		}
		if explain {
			toks := make([]api.TokenRef, 0, len(c.Tokens))
			for _, t := range c.Tokens {
				toks = append(toks, labelledTokenRef(t, res.Label(t), weights[t]))
			}
			ac.Tokens = &toks
			ac.Parts = &api.ScoreParts{Similarity: c.Parts.Similarity, Prior: c.Parts.Prior, Coengagement: c.Parts.Boost}
			if c.KeywordMatch { // only with a query
				km := true
				ac.KeywordMatch = &km
			}
		}
		out.Candidates = append(out.Candidates, ac)
	}
	return out
}

// labelledTokenRef describes token t with its label ("": none) and weight
// (0: none).
func labelledTokenRef(t retrieval.Token, label string, weight float32) api.TokenRef {
	tr := api.TokenRef{Token: formatToken(t), Level: t.Level()}
	if label != "" {
		tr.Label = &label
	}
	if weight != 0 {
		w := weight
		tr.Weight = &w
	}
	return tr
}

// formatToken renders t as the API's "level.code".
func formatToken(t retrieval.Token) string {
	return strconv.Itoa(t.Level()) + "." + strconv.Itoa(t.Code())
}

// parseToken parses the API's "level.code".
func parseToken(s string) (retrieval.Token, error) {
	l, c, ok := strings.Cut(s, ".")
	if !ok {
		return 0, badRequestf("token %q: want \"level.code\"", s)
	}
	level, err1 := strconv.Atoi(l)
	code, err2 := strconv.Atoi(c)
	if err1 != nil || err2 != nil {
		return 0, badRequestf("token %q: want \"level.code\" with decimal integers", s)
	}
	t, ok := retrieval.MakeToken(level, code)
	if !ok {
		return 0, badRequestf("token %q: level or code out of range", s)
	}
	return t, nil
}

// parseEntityParams validates the path parameters of an entity endpoint.
func parseEntityParams(pType api.EntityType, id api.EntityID) (graph.Ref, error) {
	t, err := graph.ParseNodeType(string(pType))
	if err != nil {
		return graph.Ref{}, badRequestf("type: %v", err)
	}
	ref := graph.Ref{Type: t, ID: id}
	if err := ref.Validate(); err != nil {
		return graph.Ref{}, badRequestf("id: %v", err)
	}
	if err := normID("id", &ref.ID); err != nil {
		return graph.Ref{}, err
	}
	return ref, nil
}

// GetInterests returns an entity's Bag-of-Meaning tokens with labels.
func (s *Server) GetInterests(w http.ResponseWriter, r *http.Request, pType api.EntityType, id api.EntityID) {
	ref, err := parseEntityParams(pType, id)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	version, interests, err := s.engine.Interests(r.Context(), ref)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.InterestsResponse{Entity: api.Ref{Type: api.NodeType(ref.Type.String()), Id: ref.ID},
		ModelVersion: version, Tokens: make([]api.TokenRef, 0, len(interests))}
	for _, in := range interests {
		out.Tokens = append(out.Tokens, labelledTokenRef(in.Token, in.Label, in.Weight))
	}
	writeJSON(w, http.StatusOK, out)
}

// GetSimilar returns the nearest entities of a target type: exact top-k
// over the generation's embedding matrix of that type, or over the live ad
// index for ads (fresh ads included).
func (s *Server) GetSimilar(w http.ResponseWriter, r *http.Request, pType api.EntityType, id api.EntityID, params api.GetSimilarParams) {
	ctx := r.Context()
	ref, err := parseEntityParams(pType, id)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	target := ref.Type
	if params.TargetType != nil {
		if target, err = graph.ParseNodeType(string(*params.TargetType)); err != nil {
			s.writeProblem(w, r, badRequestf("target_type: %v", err))
			return
		}
	}
	k := DefaultSimilarK
	if params.K != nil {
		if *params.K < 1 || *params.K > MaxK {
			s.writeProblem(w, r, badRequestf("k: %d is out of range 1..%d", *params.K, MaxK))
			return
		}
		k = *params.K
	}
	version, items, err := s.engine.Similar(ctx, ref, target, k)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.SimilarResponse{Entity: api.Ref{Type: api.NodeType(ref.Type.String()), Id: ref.ID},
		ModelVersion: version, Items: make([]api.SimilarItem, 0, len(items))}
	for _, it := range items {
		out.Items = append(out.Items, api.SimilarItem{Type: api.NodeType(it.Ref.Type.String()), Id: it.Ref.ID, Score: it.Score})
	}
	writeJSON(w, http.StatusOK, out)
}

// GetToken describes one interest token: label, level, parent, children,
// live size and sample member ads.
func (s *Server) GetToken(w http.ResponseWriter, r *http.Request, token string) {
	t, err := parseToken(token)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	v, err := s.engine.Token(t, sampleMembers)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	info := v.Info
	out := api.TokenInfo{Token: formatToken(t), Level: t.Level(), Size: v.Size}
	if info.Label != "" {
		l := info.Label
		out.Label = &l
	}
	if info.Parent != nil {
		p := formatToken(*info.Parent)
		out.Parent = &p
	}
	children := make([]string, 0, len(info.Children))
	for _, c := range info.Children {
		children = append(children, formatToken(c))
	}
	out.Children = &children
	members := make([]api.Ref, 0, len(v.Members))
	for _, ref := range v.Members {
		members = append(members, api.Ref{Type: api.NodeType(ref.Type.String()), Id: ref.ID})
	}
	out.SampleMembers = &members
	writeJSON(w, http.StatusOK, out)
}
