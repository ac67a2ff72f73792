package retrieval

import "github.com/hir-ads/hir/index"

// AdState is what the live index holds of one ad now: its engagement
// priors, whether it is marked fresh (launched within the fresh window),
// its attributes (labels under index.LabelPrefix keys) and its tokens.
type AdState struct {
	Prior, NewUserPrior float32
	Fresh               bool
	Attrs               map[string][]string
	Tokens              []Token
}

// Ad returns the state of ad node idx in the live index, from one
// snapshot; false when the ad is not live.
func (s *Served) Ad(idx uint32) (AdState, bool) {
	snap := s.live.Index.Snapshot()
	prior, newUser, ok := snap.Priors(idx)
	if !ok {
		return AdState{}, false
	}
	attrs, _ := snap.Attrs(idx)
	tokens, _ := snap.Tokens(idx)
	return AdState{Prior: prior, NewUserPrior: newUser, Fresh: snap.Fresh(idx), Attrs: attrs, Tokens: tokens}, true
}

// Allowed returns how many live ads pass filter f: the audience of a
// filtered request.
func (s *Served) Allowed(f *Filter) (int, error) {
	allowed, err := s.live.Index.Snapshot().Allowed(f)
	if err != nil {
		return 0, err
	}
	return int(allowed.GetCardinality()), nil
}

// Catalogue labels the interest tokens of the generation's index as built
// (nil: no labels). It is shared and must not be modified.
func (s *Served) Catalogue() *index.Catalogue { return s.gen.Catalogue }
