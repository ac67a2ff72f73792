package index

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCatalogueAndText(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 800, 6)
	snap := ix.Snapshot()
	// Text: every doc's words come from its coarse cluster's vocabulary,
	// plus common filler, so each coarse token has distinctive words.
	q := snap.Quantizer()
	vocab := []string{"running shoes", "garden hoses", "coffee beans", "guitar strings",
		"yoga mats", "phone cases", "dog food", "ski jackets"}
	text := map[uint32]TextDoc{}
	textOf := func(id uint32) string {
		d := text[id]
		return d.Title + " " + d.Description
	}
	for _, d := range s.docs {
		c, _ := q.argmaxDot(0, d.Embedding)
		text[d.ID] = TextDoc{Title: "the best " + vocab[int(c)%len(vocab)], Description: fmt.Sprintf("buy now item %d", d.ID)}
	}
	cat, err := BuildCatalogue(ctx, snap, CatalogueOptions{Text: textOf})
	if err != nil {
		t.Fatalf("BuildCatalogue() error = %v", err)
	}
	for code := range q.LevelSize(0) {
		tok := mustToken(0, code)
		info, ok := cat.Get(tok)
		if !ok {
			t.Fatalf("Get(%v) missing", tok)
		}
		if info.Size != int(snap.Postings(tok).GetCardinality()) {
			t.Errorf("%v Size = %d, want %d", tok, info.Size, snap.Postings(tok).GetCardinality())
		}
		if info.Parent != nil {
			t.Errorf("%v Parent = %v, want none", tok, *info.Parent)
		}
		if info.Size == 0 {
			continue
		}
		// The stemmed distinctive words of the cluster come first; stop
		// words ("the") and words of every doc ("buy") never appear.
		stems := strings.Fields(vocab[code%len(vocab)])
		if len(info.Words) == 0 || !slices.ContainsFunc(stems, func(w string) bool { return strings.HasPrefix(w, info.Words[0]) }) {
			t.Errorf("%v Words = %v, want a stem of %v first", tok, info.Words, stems)
		}
		for _, w := range info.Words {
			if w == "the" || w == "buy" {
				t.Errorf("%v Words = %v contains non-distinctive %q", tok, info.Words, w)
			}
		}
		if len(info.Attrs[AttrCategory]) == 0 || !strings.Contains(info.Label, " · "+info.Attrs[AttrCategory][0].Value) {
			t.Errorf("%v Label = %q, Attrs = %v, want the dominant category after the words", tok, info.Label, info.Attrs)
		}
		for _, ch := range info.Children {
			ci, _ := cat.Get(ch)
			if ci.Parent == nil || *ci.Parent != tok || ch.Level() != 1 {
				t.Errorf("child %v of %v has parent %v", ch, tok, ci.Parent)
			}
		}
	}
	if len(cat.Tokens()) < q.LevelSize(0)+q.LevelSize(1)+q.LevelSize(2) {
		t.Errorf("catalogue has %d tokens, want every prototype", len(cat.Tokens()))
	}

	// Keyword index and hybrid queries.
	ti, err := NewTextIndex("")
	if err != nil {
		t.Fatal(err)
	}
	defer ti.Close()
	if err := ti.Index(ctx, text); err != nil {
		t.Fatal(err)
	}
	kw, err := ti.Search(ctx, "guitar", 10000)
	if err != nil {
		t.Fatal(err)
	}
	if kw.IsEmpty() {
		t.Fatal("Search(guitar) found nothing")
	}
	it := kw.Iterator()
	for it.HasNext() {
		if id := it.Next(); !strings.Contains(text[id].Title, "guitar") {
			t.Fatalf("Search(guitar) returned doc %d titled %q", id, text[id].Title)
		}
	}
	v := s.queries(1, 4)[0]
	and, _ := snap.Search(ctx, Hybrid(Query{Vector: v, K: 10}, kw, HybridAnd))
	for _, h := range and.Hits {
		if !kw.Contains(h.ID) {
			t.Errorf("keyword ∩ tokens hit %d is not a keyword hit", h.ID)
		}
	}
	if err := ti.Delete(ctx, kw.Minimum()); err != nil {
		t.Fatal(err)
	}
	kw2, _ := ti.Search(ctx, "guitar", 10000)
	if kw2.Contains(kw.Minimum()) || kw2.GetCardinality() != kw.GetCardinality()-1 {
		t.Errorf("after Delete: %d hits, want %d", kw2.GetCardinality(), kw.GetCardinality()-1)
	}
	if _, err := ti.Search(ctx, `title:"unterminated`, 10); err == nil {
		t.Errorf("Search(bad syntax) error = nil")
	}
}

// TestCatalogueLabelsRead (issue 52, goal 1): a label's words are spelled
// as the members' text spells them (not as stems), words of every doc and
// excluded words (brand names) never name a token, and attribute values
// are shown by their names.
func TestCatalogueLabelsRead(t *testing.T) {
	ix, s := testIndex(t, 400, 7)
	snap := ix.Snapshot()
	q := snap.Quantizer()
	vocab := []string{"Running Shoes", "garden hoses", "coffee beans", "guitar strings"}
	text := map[uint32]string{}
	for _, d := range s.docs {
		c, _ := q.argmaxDot(0, d.Embedding)
		text[d.ID] = fmt.Sprintf("Acmebrand %s for everyone, item %d", vocab[int(c)%len(vocab)], d.ID)
	}
	cat, err := BuildCatalogue(context.Background(), snap, CatalogueOptions{Text: func(id uint32) string { return text[id] },
		ExcludeWords: []string{"Acmebrand"},
		AttrName:     func(key, value string) string { return "the " + key + " " + value }})
	if err != nil {
		t.Fatal(err)
	}
	labelled := 0
	for code := range q.LevelSize(0) {
		info, _ := cat.Get(mustToken(0, code))
		if info.Size == 0 {
			continue
		}
		labelled++
		for _, w := range info.Words {
			switch w {
			case "run", "shoe", "hose", "bean", "string":
				t.Errorf("%v Words = %v: a stem, want the text's spelling", info.Token, info.Words)
			case "acmebrand", "everyone", "item":
				t.Errorf("%v Words = %v: %q is excluded or in every doc", info.Token, info.Words, w)
			}
		}
		if len(info.Words) == 0 || !strings.Contains(info.Label, strings.Join(info.Words, " ")+" · the category ") {
			t.Errorf("%v Label = %q, want its words, then the category's name", info.Token, info.Label)
		}
	}
	if labelled == 0 {
		t.Fatal("no coarse token has members")
	}
	// A token without ads reads as its parent's (issue 52: "L1:12"): keep
	// a few docs only, so that most tokens have none.
	var gone []uint32
	for _, d := range s.docs[10:] {
		gone = append(gone, d.ID)
	}
	if err := ix.Delete(context.Background(), gone...); err != nil {
		t.Fatal(err)
	}
	if cat, err = BuildCatalogue(context.Background(), ix.Snapshot(), CatalogueOptions{Text: func(id uint32) string { return text[id] }}); err != nil {
		t.Fatal(err)
	}
	empties := 0
	for _, tok := range cat.Tokens() {
		info, _ := cat.Get(tok)
		if info.Size != 0 || info.Parent == nil || tok.Level() >= q.NumLevels() {
			continue
		}
		parent, _ := cat.Get(*info.Parent)
		empties++
		if parent.Size > 0 && info.Label != "(no ads yet) "+parent.Label {
			t.Errorf("%v without ads: label %q, want its parent's %q after \"(no ads yet) \"", tok, info.Label, parent.Label)
		}
	}
	if empties == 0 {
		t.Error("no prototype token without ads: the check checked nothing")
	}
}
