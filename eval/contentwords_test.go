package eval

import (
	"context"
	"slices"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// TestContentWords checks the word-count content baseline against
// hand-computed scores: words longer than 3 characters (years included)
// count, an item scores the profile's counts of its words, popularity only
// breaks ties, and an item nobody engaged with is reached by its words.
func TestContentWords(t *testing.T) {
	cat := &Catalog{Users: []string{"u0", "u1"}, Items: []string{"m0", "m1", "m2", "m3", "m4"}, ItemText: []string{
		"Star Wars (1977) | Action, Sci-Fi",  // words: star, wars, 1977, action
		"Return of the Jedi (1983) | Action", // return, jedi, 1983, action
		"Alien (1979) | Horror, Sci-Fi",      // alien, 1979, horror
		"Wars of the Stars (1977) | Drama",   // wars, stars, 1977, drama: new, never engaged
		"Casablanca (1942) | Drama, Romance", // casablanca, 1942, drama, romance
	}}
	click := func(u, item int32) Interaction { return Interaction{User: u, Item: item, TS: 1, Type: graph.EdgeClick} }
	view := &TrainView{Catalog: cat, AsOf: 10, Interactions: []Interaction{
		click(0, 0), click(1, 1), click(1, 1), click(1, 2), click(1, 4), click(1, 4), click(1, 4),
	}}
	m := NewContentWords()
	if m.Name() != MethodContentWords {
		t.Errorf("Name() = %q", m.Name())
	}
	if err := m.Fit(context.Background(), view); err != nil {
		t.Fatal(err)
	}
	// u0 liked m0: profile star, wars, 1977, action (1 each). Scores: m1 1
	// (action), m2 0, m3 2 (wars, 1977: the new item first), m4 0; m2 and
	// m4 tie at 0 and popularity breaks it (m4: 3 clicks, m2: 1).
	q := &Query{User: 0, AsOf: 10, K: 4, History: []Interaction{click(0, 0)}, exclude: []bool{true, false, false, false, false}}
	got, err := m.TopK(context.Background(), q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{3, 1, 4, 2}; !slices.Equal(got, want) {
		t.Errorf("TopK = %v, want %v", got, want)
	}
	if w := contentWords("Sci-Fi Children's (1995) War"); !slices.Equal(w, []string{"children", "1995"}) {
		t.Errorf("contentWords = %v, want [children 1995]", w)
	}
}
