package index

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/registry"
)

// CatalogueOptions configures [BuildCatalogue]. Zero fields take defaults.
type CatalogueOptions struct {
	// Text returns the text (title, description, ...) of a doc; nil means
	// labels carry no words.
	Text func(id uint32) string
	// Analyzer is a bleve analyzer name (default "en": tokenise, stop
	// words, stemming).
	Analyzer string
	// Words is the number of words in a label (default 4).
	Words int
	// AttrKeys are the attributes whose dominant values TokenInfo.Attrs
	// lists (default category and brand), TopAttrs values per key (default
	// 2); the label names the first of each.
	AttrKeys []string
	TopAttrs int
	// AttrName, when set, returns a readable name of an attribute value
	// (the category's or brand's own text), which the label shows instead of
	// the value; "" keeps the value.
	AttrName func(key, value string) string
	// ExcludeWords are words that never name a token (brand names, which
	// the brand attribute names already).
	ExcludeWords []string
}

// AttrCount is an attribute value and the number of member docs having it.
type AttrCount struct {
	Value string `json:"value"`
	Count int    `json:"count"`
}

// TokenInfo describes one token of the catalogue.
type TokenInfo struct {
	Token    Token   `json:"token"`
	Level    int     `json:"level"`
	Parent   *Token  `json:"parent,omitempty"`
	Children []Token `json:"children,omitempty"`
	// Size is the number of live docs whose bag holds the token.
	Size int `json:"size"`
	// Words are the most distinctive words of the members' text, by member
	// frequency x idf against the whole catalogue, counted by stem and
	// shown as the members' text spells them most often.
	Words []string `json:"words,omitempty"`
	// Attrs holds the dominant values per AttrKeys key.
	Attrs map[string][]AttrCount `json:"attrs,omitempty"`
	// Label is a human label: the words, then the name of the dominant value
	// of each AttrKeys key, joined by " · " ("trail hiking summit ·
	// Sports / Hiking · Northwave"); for a token without ads, "(no ads yet) "
	// and its parent's label; else the token itself.
	Label string `json:"label"`
}

// Catalogue describes every prototype token and every non-empty residual
// token of a snapshot. Immutable; safe for concurrent use.
type Catalogue struct {
	tokens map[Token]*TokenInfo
	order  []Token
}

// BuildCatalogue labels the tokens of s.
func BuildCatalogue(ctx context.Context, s *Snapshot, opts CatalogueOptions) (*Catalogue, error) {
	if opts.Analyzer == "" {
		opts.Analyzer = en.AnalyzerName
	}
	if opts.Words <= 0 {
		opts.Words = 4
	}
	if opts.AttrKeys == nil {
		opts.AttrKeys = []string{AttrCategory, AttrBrand}
	}
	if opts.TopAttrs <= 0 {
		opts.TopAttrs = 2
	}
	var an analysis.Analyzer
	if opts.Text != nil {
		var err error
		if an, err = registry.NewCache().AnalyzerNamed(opts.Analyzer); err != nil {
			return nil, fmt.Errorf("build catalogue: analyzer %q: %w", opts.Analyzer, err)
		}
	}
	// Per-doc distinct term ids, and the spellings of each term (counted
	// over its first surfaceSample occurrences).
	termID := map[string]int32{}
	var terms []string
	var df []int
	var surfaces []map[string]int32
	excluded := map[string]bool{}
	if an != nil {
		for _, w := range opts.ExcludeWords {
			for _, tok := range an.Analyze([]byte(w)) {
				excluded[string(tok.Term)] = true
			}
		}
	}
	docTerms := map[uint32][]int32{}
	it := s.live.Iterator()
	nDocs := 0
	for it.HasNext() {
		id := it.Next()
		nDocs++
		if nDocs%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("build catalogue: %w", err)
			}
		}
		if an == nil {
			continue
		}
		var ids []int32
		text := opts.Text(id)
		for _, tok := range an.Analyze([]byte(text)) {
			w := string(tok.Term)
			if len(w) < 2 || excluded[w] {
				continue
			}
			t, ok := termID[w]
			if !ok {
				t = int32(len(terms))
				termID[w] = t
				terms = append(terms, w)
				df = append(df, 0)
				surfaces = append(surfaces, map[string]int32{})
			}
			if sf := surfaces[t]; len(sf) < 8 && tok.Start >= 0 && tok.End <= len(text) && tok.Start < tok.End {
				if n := sumCounts(sf); n < surfaceSample {
					sf[strings.ToLower(text[tok.Start:tok.End])]++
				}
			}
			ids = append(ids, t)
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		for _, t := range ids {
			df[t]++
		}
		docTerms[id] = ids
	}
	keyWanted := map[string]bool{}
	for _, k := range opts.AttrKeys {
		keyWanted[k] = true
	}
	c := &Catalogue{tokens: map[Token]*TokenInfo{}}
	q := s.q
	nSlots := s.levelOff[len(s.levelOff)-1]
	for slot := range nSlots {
		t := s.tokenOf(slot)
		b := s.post.get(slot)
		size := 0
		if b != nil {
			size = int(b.GetCardinality())
		}
		if t.Level() >= q.NumLevels() && size == 0 {
			continue
		}
		info := &TokenInfo{Token: t, Level: t.Level(), Size: size}
		if p, ok := q.Parent(t); ok {
			info.Parent = &p
		}
		if size > 0 {
			tf := map[int32]int{}
			attrs := map[string]map[string]int{}
			mi := b.Iterator()
			for mi.HasNext() {
				id := mi.Next()
				for _, w := range docTerms[id] {
					tf[w]++
				}
				m := s.meta.get(int(id))
				for _, a := range m[1+m[0]:] {
					n := s.names.get(int(a))
					if keyWanted[n.key] {
						if attrs[n.key] == nil {
							attrs[n.key] = map[string]int{}
						}
						attrs[n.key][n.value]++
					}
				}
			}
			info.Words = topWords(tf, df, terms, nDocs, size, opts.Words)
			for i, w := range info.Words {
				info.Words[i] = spelling(surfaces[termID[w]], w)
			}
			info.Attrs = topAttrs(attrs, opts.TopAttrs)
		}
		info.Label = label(info, opts.AttrKeys, opts.AttrName)
		c.tokens[t] = info
		c.order = append(c.order, t)
	}
	// Parents come before their children in c.order (by level): a token
	// without ads is labelled by its parent, so that every token reads.
	for _, t := range c.order {
		info := c.tokens[t]
		if p := info.Parent; p != nil {
			if pi := c.tokens[*p]; pi != nil {
				pi.Children = append(pi.Children, t)
				if info.Size == 0 && len(info.Words) == 0 && len(info.Attrs) == 0 && pi.Label != "" {
					info.Label = noAds + strings.TrimPrefix(pi.Label, noAds)
				}
			}
		}
	}
	return c, nil
}

func topWords(tf map[int32]int, df []int, terms []string, nDocs, size, n int) []string {
	type ws struct {
		w     int32
		score float64
	}
	minTF := min(2, size)
	var cands []ws
	for w, f := range tf {
		if f < minTF {
			continue
		}
		idf := math.Log(float64(nDocs+1) / float64(df[w]+1))
		if idf <= 0 { // a word of every doc names nothing
			continue
		}
		cands = append(cands, ws{w, float64(f) / float64(size) * idf})
	}
	slices.SortFunc(cands, func(a, b ws) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(terms[a.w], terms[b.w])
	})
	var out []string
	for _, c := range cands[:min(n, len(cands))] {
		out = append(out, terms[c.w])
	}
	return out
}

func topAttrs(attrs map[string]map[string]int, n int) map[string][]AttrCount {
	if len(attrs) == 0 {
		return nil
	}
	out := map[string][]AttrCount{}
	for k, vs := range attrs {
		var list []AttrCount
		for v, c := range vs {
			list = append(list, AttrCount{v, c})
		}
		slices.SortFunc(list, func(a, b AttrCount) int {
			if a.Count != b.Count {
				return b.Count - a.Count
			}
			return strings.Compare(a.Value, b.Value)
		})
		out[k] = list[:min(n, len(list))]
	}
	return out
}

// noAds prefixes the label of a token without ads, which is its parent's.
const noAds = "(no ads yet) "

// surfaceSample is how many occurrences of a term its spellings are counted
// over.
const surfaceSample = 64

func sumCounts(m map[string]int32) int32 {
	var n int32
	for _, c := range m {
		n += c
	}
	return n
}

// spelling returns the most frequent spelling in surfaces (ties: the
// shortest, then the first in order), or stem when there is none.
func spelling(surfaces map[string]int32, stem string) string {
	best, bestN := stem, int32(0)
	for s, n := range surfaces {
		if n > bestN || (n == bestN && (len(s) < len(best) || len(s) == len(best) && s < best)) {
			best, bestN = s, n
		}
	}
	return best
}

func label(info *TokenInfo, keys []string, name func(key, value string) string) string {
	parts := []string{}
	if len(info.Words) > 0 {
		parts = append(parts, strings.Join(info.Words, " "))
	}
	for _, k := range keys {
		if acs := info.Attrs[k]; len(acs) > 0 {
			v := acs[0].Value
			if name != nil {
				if n := name(k, v); n != "" {
					v = n
				}
			}
			parts = append(parts, v)
		}
	}
	if len(parts) == 0 {
		return info.Token.String()
	}
	return strings.Join(parts, " · ")
}

// Get returns the description of t.
func (c *Catalogue) Get(t Token) (TokenInfo, bool) {
	info, ok := c.tokens[t]
	if !ok {
		return TokenInfo{}, false
	}
	return *info, true
}

// Tokens returns every described token, by level then code.
func (c *Catalogue) Tokens() []Token { return slices.Clone(c.order) }

// Infos returns every token's description, in the order of Tokens: what
// NewCatalogue takes back.
func (c *Catalogue) Infos() []TokenInfo {
	out := make([]TokenInfo, len(c.order))
	for i, t := range c.order {
		out[i] = *c.tokens[t]
	}
	return out
}

// NewCatalogue returns the catalogue of infos, as Infos returned them (for
// a catalogue read back from a file). A token described twice is refused.
func NewCatalogue(infos []TokenInfo) (*Catalogue, error) {
	c := &Catalogue{tokens: make(map[Token]*TokenInfo, len(infos)), order: make([]Token, 0, len(infos))}
	for i := range infos {
		info := infos[i]
		if _, dup := c.tokens[info.Token]; dup {
			return nil, fmt.Errorf("new catalogue: token %v described twice", info.Token)
		}
		c.tokens[info.Token] = &info
		c.order = append(c.order, info.Token)
	}
	return c, nil
}
