package retrieval

import (
	"encoding/json"

	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/rank"
)

// The vocabulary of the engine's answers and requests, so that a caller
// (the HTTP layer) needs no package below the engine.

// Token is an interest token: a level and a code ([index.Token]).
type Token = index.Token

// WeightedToken is a token of a bag with its weight.
type WeightedToken = index.WeightedToken

// Filter is a parsed boolean filter over ad attributes ([index.Filter]).
type Filter = index.Filter

// Errors of malformed filters and queries, as the index reports them.
var (
	ErrBadFilter    = index.ErrBadFilter
	ErrBadQuery     = index.ErrBadQuery
	ErrBadTextQuery = index.ErrBadTextQuery
)

// Upper bounds of a request's score weights ([Weights]).
const (
	MaxPriorWeight     = rank.MaxPriorWeight
	MaxCoEngageWeight  = rank.MaxCoEngageWeight
	MaxNewAdShare      = rank.MaxNewAdShare
	DefaultPriorWeight = rank.DefaultPriorWeight
)

// MakeToken returns the token of code at level, false when either is out
// of range.
func MakeToken(level, code int) (Token, bool) { return index.MakeToken(level, code) }

// ParseFilter parses a filter's JSON form (docs/serving.md, "Filters");
// errors wrap ErrBadFilter.
func ParseFilter(raw json.RawMessage) (*Filter, error) { return index.ParseFilter(raw) }

// Label returns the label of token t in the catalogue of the generation
// that answered r ("" when it has none).
func (r *Response) Label(t Token) string {
	if r.Catalogue == nil {
		return ""
	}
	info, ok := r.Catalogue.Get(t)
	if !ok {
		return ""
	}
	return info.Label
}
