package dataset

import (
	"bufio"
	"context"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/hir-ads/hir/graph"
)

// Syllables of the made-up words.
var (
	onsets = []string{"b", "br", "c", "ch", "cr", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "l", "m",
		"n", "p", "pl", "pr", "qu", "r", "s", "sh", "st", "t", "tr", "v", "w", "z"}
	vowels = []string{"a", "e", "i", "o", "u", "ai", "ea", "ie", "oa", "ou", "y"}
	codas  = []string{"", "", "", "n", "r", "s", "l", "x", "m", "nd", "st", "k"}
)

// Vocabulary sizes of the made-up words that stand in for interests beyond
// the built-in taxonomy: words per interest.
const wordsPerInterest = 6

// makeVocab gives every interest its words: those of the built-in taxonomy
// (taxonomy.go) where it has the interest, made-up words beyond it; and the
// noise words, brand names and regions. Made-up words never repeat a word.
func (w *world) makeVocab() {
	r := w.rng(streamVocab)
	seen := map[string]struct{}{}
	for _, c := range taxonomy {
		for _, l := range append(append([]taxMid{{c.name, c.words}}, c.mids...), c.facets...) {
			for _, x := range l.words {
				seen[x] = struct{}{}
			}
		}
	}
	for _, x := range noiseVocab {
		seen[x] = struct{}{}
	}
	var sb strings.Builder
	word := func() string {
		for try := 0; ; try++ {
			sb.Reset()
			n := 2 + r.IntN(2) + try/16 // longer words if the short ones run out
			for range n {
				sb.WriteString(onsets[r.IntN(len(onsets))])
				sb.WriteString(vowels[r.IntN(len(vowels))])
			}
			sb.WriteString(codas[r.IntN(len(codas))])
			s := sb.String()
			if _, dup := seen[s]; !dup {
				seen[s] = struct{}{}
				return s
			}
		}
	}
	madeUp := func() []string {
		v := make([]string, wordsPerInterest)
		for j := range v {
			v[j] = word()
		}
		return v
	}
	o := w.o
	w.nameCoarse, w.vocabCoarse = make([]string, o.Coarse), make([][]string, o.Coarse)
	for c := range o.Coarse {
		if c < len(taxonomy) {
			w.nameCoarse[c], w.vocabCoarse[c] = taxonomy[c].name, taxonomy[c].words
		} else {
			w.vocabCoarse[c] = madeUp()
			w.nameCoarse[c] = w.vocabCoarse[c][0]
		}
	}
	// The k-th mid interest of a coarse interest is its taxonomy's k-th,
	// the j-th fine interest of a mid interest its coarse interest's j-th
	// facet.
	firstMid, firstFine := map[int32]int{}, map[int32]int{}
	w.nameMid, w.vocabMid = make([]string, o.Mid), make([][]string, o.Mid)
	inTax := make([]bool, o.Mid)
	for m := range o.Mid {
		c := w.midParent[m]
		if _, ok := firstMid[c]; !ok {
			firstMid[c] = m
		}
		if k := m - firstMid[c]; int(c) < len(taxonomy) && k < len(taxonomy[c].mids) {
			w.nameMid[m], w.vocabMid[m], inTax[m] = taxonomy[c].mids[k].name, taxonomy[c].mids[k].words, true
		} else {
			w.vocabMid[m] = madeUp()
			w.nameMid[m] = w.vocabMid[m][0]
		}
	}
	w.nameFine, w.vocabFine = make([]string, o.Fine), make([][]string, o.Fine)
	for f := range o.Fine {
		m := w.fineParent[f]
		if _, ok := firstFine[m]; !ok {
			firstFine[m] = f
		}
		c := w.midParent[m]
		if j := f - firstFine[m]; inTax[m] && j < len(taxonomy[c].facets) {
			w.vocabFine[f] = taxonomy[c].facets[j].words
			w.nameFine[f] = taxonomy[c].facets[j].name + " " + w.nameMid[m]
		} else {
			w.vocabFine[f] = madeUp()
			w.nameFine[f] = w.vocabFine[f][0] + " " + w.nameMid[m]
		}
	}
	w.noise = noiseVocab
	w.regions = regionNames
	combos := len(brandHeads) * len(brandTails)
	perm := r.Perm(combos)
	w.brand = make([]string, o.Advertisers)
	for a := range w.brand {
		i := perm[a%combos]
		w.brand[a] = brandHeads[i/len(brandTails)] + brandTails[i%len(brandTails)]
		if a >= combos {
			w.brand[a] += " " + strconv.Itoa(a/combos+1)
		}
	}
}

// textBuilder composes entity text from the vocabularies.
type textBuilder struct {
	w     *world
	r     *rand.Rand
	words []string
}

// add appends n distinct words of vocab (all of them when it has fewer),
// consecutive from a random one.
func (t *textBuilder) add(vocab []string, n int) {
	start := t.r.IntN(len(vocab))
	for i := range min(n, len(vocab)) {
		t.words = append(t.words, vocab[(start+i)%len(vocab)])
	}
}

// text returns head followed by words drawn from the fine interest f, then
// its mid and coarse interests, then the noise vocabulary, as ad copy
// reads: "Northwave trail rugged running marathon sports shop now".
func (t *textBuilder) text(head string, f int32, nCoarse, nMid, nFine, nNoise int) string {
	t.words = t.words[:0]
	if head != "" {
		t.words = append(t.words, head)
	}
	m := t.w.fineParent[f]
	t.add(t.w.vocabFine[f], nFine)
	t.add(t.w.vocabMid[m], nMid)
	t.add(t.w.vocabCoarse[t.w.midParent[m]], nCoarse)
	t.add(t.w.noise, nNoise)
	return strings.Join(t.words, " ")
}

// capitalize upper-cases the first letter of each word of s.
func capitalize(s string) string {
	ws := strings.Fields(s)
	for i, x := range ws {
		ws[i] = strings.ToUpper(x[:1]) + x[1:]
	}
	return strings.Join(ws, " ")
}

// Precomputed JSON fragments.
var (
	refOpen   [graph.NumNodeTypes]string // `{"type":"ad","id":"a`
	entOpen   [graph.NumNodeTypes]string // `{"type":"ad","id":"a`
	edgeNames [graph.NumEdgeTypes]string // `,"type":"click","ts":`
)

func init() {
	for t := graph.NodeType(1); t.Valid(); t++ {
		refOpen[t] = `{"type":"` + t.String() + `","id":"` + synthPrefix[t]
		entOpen[t] = refOpen[t]
	}
	for t := graph.EdgeType(1); t.Valid(); t++ {
		edgeNames[t] = `,"type":"` + t.String() + `","ts":`
	}
}

// entityLine builds one entities.jsonl line by hand; attribute keys must be
// added in sorted order, like AppendEntity writes them.
type entityLine struct {
	b      []byte
	nAttrs int
}

func (l *entityLine) start(t graph.NodeType, idx int, text string) {
	l.b = append(l.b[:0], entOpen[t]...)
	l.b = strconv.AppendInt(l.b, int64(idx), 10)
	l.b = append(l.b, '"')
	if text != "" {
		l.b = append(l.b, `,"text":`...)
		l.b = appendString(l.b, text)
	}
	l.nAttrs = 0
}

func (l *entityLine) attr(key, val string) {
	if l.nAttrs == 0 {
		l.b = append(l.b, `,"attrs":{`...)
	} else {
		l.b = append(l.b, ',')
	}
	l.nAttrs++
	l.b = appendString(l.b, key)
	l.b = append(l.b, ':')
	l.b = appendString(l.b, val)
}

func (l *entityLine) attrID(key string, t graph.NodeType, idx int32) {
	l.attr(key, SynthID(t, int(idx)))
}

func (l *entityLine) end(bw *bufio.Writer) error {
	if l.nAttrs > 0 {
		l.b = append(l.b, '}')
	}
	l.b = append(l.b, '}', '\n')
	_, err := bw.Write(l.b)
	return err
}

// writeEntities writes entities.jsonl: categories, brands, advertisers,
// pixels, campaigns, products, ads, users.
func (w *world) writeEntities(ctx context.Context, bw *bufio.Writer, c *counter) error {
	tb := &textBuilder{w: w, r: w.rng(streamText)}
	var l entityLine
	count := func(t graph.NodeType, n int) {
		c.sum.Entities += n
		c.sum.EntitiesByType[t.String()] += n
	}
	for m := range w.o.Mid {
		l.start(graph.NodeCategory, m, capitalize(w.nameCoarse[w.midParent[m]])+" / "+capitalize(w.nameMid[m]))
		if err := l.end(bw); err != nil {
			return err
		}
	}
	count(graph.NodeCategory, w.o.Mid)
	for a, name := range w.brand {
		l.start(graph.NodeBrand, a, name)
		if err := l.end(bw); err != nil {
			return err
		}
	}
	count(graph.NodeBrand, len(w.brand))
	for a, f := range w.advFine {
		l.start(graph.NodeAdvertiser, a, tb.text(w.brand[a], f, 1, 1, 0, 1))
		l.attrID("brand", graph.NodeBrand, int32(a))
		if err := l.end(bw); err != nil {
			return err
		}
	}
	count(graph.NodeAdvertiser, len(w.advFine))
	for a := range w.advFine {
		l.start(graph.NodePixel, a, "")
		l.attrID("advertiser", graph.NodeAdvertiser, int32(a))
		if err := l.end(bw); err != nil {
			return err
		}
	}
	count(graph.NodePixel, len(w.advFine))
	for cp, f := range w.campFine {
		a := w.campAdv[cp]
		l.start(graph.NodeCampaign, cp, tb.text(w.brand[a], f, 0, 1, 1, 1))
		l.attrID("advertiser", graph.NodeAdvertiser, a)
		if err := l.end(bw); err != nil {
			return err
		}
	}
	count(graph.NodeCampaign, len(w.campFine))
	for p, cp := range w.prodCamp {
		f, a := w.campFine[cp], w.campAdv[cp]
		l.start(graph.NodeProduct, p, tb.text(w.brand[a], f, 1, 1, 2, 1+tb.r.IntN(2)))
		l.attrID("advertiser", graph.NodeAdvertiser, a)
		l.attrID("brand", graph.NodeBrand, a)
		l.attrID("campaign", graph.NodeCampaign, cp)
		l.attrID("category", graph.NodeCategory, w.fineParent[f])
		if err := l.end(bw); err != nil {
			return err
		}
	}
	count(graph.NodeProduct, len(w.prodCamp))
	for ad, cp := range w.adCamp {
		if ad%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		f, a := w.campFine[cp], w.campAdv[cp]
		l.start(graph.NodeAd, ad, tb.text(w.brand[a], f, 1, 1+tb.r.IntN(2), 2+tb.r.IntN(2), 1+tb.r.IntN(3)))
		l.attrID("advertiser", graph.NodeAdvertiser, a)
		l.attrID("brand", graph.NodeBrand, a)
		l.attrID("campaign", graph.NodeCampaign, cp)
		l.attrID("category", graph.NodeCategory, w.fineParent[f])
		l.attrID("product", graph.NodeProduct, w.adProd[ad])
		l.attr("status", "active")
		if err := l.end(bw); err != nil {
			return err
		}
	}
	count(graph.NodeAd, len(w.adCamp))
	for u := range w.o.Users {
		l.start(graph.NodeUser, u, "")
		l.attr("age", ageBuckets[w.userAge[u]])
		l.attr("region", w.regions[tb.r.IntN(len(w.regions))])
		if err := l.end(bw); err != nil {
			return err
		}
	}
	count(graph.NodeUser, w.o.Users)
	return nil
}
