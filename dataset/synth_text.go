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

// Vocabulary sizes: words per interest at each level, and shared noise words.
const (
	wordsPerInterest = 6
	noiseWords       = 1500
	numRegions       = 12
)

// makeVocab draws the per-interest vocabularies, the noise words, brand names
// and regions; all words are distinct.
func (w *world) makeVocab() {
	r := w.rng(streamVocab)
	seen := map[string]struct{}{}
	var sb strings.Builder
	word := func(minSyl, maxSyl int) string {
		for try := 0; ; try++ {
			sb.Reset()
			n := minSyl + r.IntN(maxSyl-minSyl+1) + try/16 // longer words if the short ones run out
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
	level := func(n, minSyl, maxSyl int) [][]string {
		v := make([][]string, n)
		for i := range v {
			v[i] = make([]string, wordsPerInterest)
			for j := range v[i] {
				v[i][j] = word(minSyl, maxSyl)
			}
		}
		return v
	}
	w.vocabCoarse = level(w.o.Coarse, 2, 2)
	w.vocabMid = level(w.o.Mid, 2, 3)
	w.vocabFine = level(w.o.Fine, 2, 3)
	w.noise = make([]string, noiseWords)
	for i := range w.noise {
		w.noise[i] = word(1, 2)
	}
	w.regions = make([]string, numRegions)
	for i := range w.regions {
		w.regions[i] = capitalize(word(2, 3))
	}
	w.brand = make([]string, w.o.Advertisers)
	for i := range w.brand {
		w.brand[i] = capitalize(word(2, 3))
	}
}

func capitalize(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// textBuilder composes entity text from the vocabularies.
type textBuilder struct {
	w     *world
	r     *rand.Rand
	words []string
}

func (t *textBuilder) add(vocab []string, n int) {
	for range n {
		t.words = append(t.words, vocab[t.r.IntN(len(vocab))])
	}
}

// text returns head followed by words drawn from the fine interest f, its
// parents and the noise vocabulary, in random order.
func (t *textBuilder) text(head string, f int32, nCoarse, nMid, nFine, nNoise int) string {
	t.words = t.words[:0]
	m := t.w.fineParent[f]
	t.add(t.w.vocabCoarse[t.w.midParent[m]], nCoarse)
	t.add(t.w.vocabMid[m], nMid)
	t.add(t.w.vocabFine[f], nFine)
	t.add(t.w.noise, nNoise)
	t.r.Shuffle(len(t.words), func(i, j int) { t.words[i], t.words[j] = t.words[j], t.words[i] })
	if head == "" {
		return strings.Join(t.words, " ")
	}
	return head + " " + strings.Join(t.words, " ")
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
		coarse := w.vocabCoarse[w.midParent[m]]
		l.start(graph.NodeCategory, m, capitalize(coarse[0])+" / "+capitalize(w.vocabMid[m][0])+" "+w.vocabMid[m][1])
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
