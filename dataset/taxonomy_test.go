package dataset

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/blevesearch/bleve/v2/analysis/lang/en" // registers the "en" analyzer
	"github.com/blevesearch/bleve/v2/registry"

	"github.com/hir-ads/hir/graph"
)

// TestTaxonomyWordsDistinct: every word of the built-in taxonomy, the noise
// words, the brand names and the regions is one token of the "en" analyzer
// that labels tokens, and no two share a stem, so that a word names one
// interest.
func TestTaxonomyWordsDistinct(t *testing.T) {
	an, err := registry.NewCache().AnalyzerNamed("en")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	add := func(where, w string) {
		toks := an.Analyze([]byte(w))
		if len(toks) != 1 {
			t.Errorf("%s: %q is %d tokens, want 1", where, w, len(toks))
			return
		}
		st := string(toks[0].Term)
		if prev, dup := seen[st]; dup {
			t.Errorf("%s: %q shares the stem %q with %s", where, w, st, prev)
		}
		seen[st] = where + " " + w
	}
	if len(taxonomy) < 8 {
		t.Fatalf("%d coarse interests, want at least the default 8", len(taxonomy))
	}
	for _, c := range taxonomy {
		if len(c.mids) != 8 || len(c.facets) != 8 {
			t.Errorf("%s: %d mid interests and %d facets, want 8 and 8 (the default 64 and 512 interests)", c.name, len(c.mids), len(c.facets))
		}
		for _, w := range c.words {
			add(c.name, w)
		}
		for _, m := range c.mids {
			for _, w := range m.words {
				add(c.name+" / "+m.name, w)
			}
		}
		for _, f := range c.facets {
			for _, w := range f.words {
				add(c.name+" facet "+f.name, w)
			}
		}
	}
	for _, w := range noiseVocab {
		add("noise", w)
	}
	for _, h := range brandHeads {
		for _, tl := range brandTails {
			add("brand", h+tl)
		}
	}
	for _, r := range regionNames {
		add("region", r)
	}
}

// TestSynthReadsLikeAds (issue 52, goal 1): at the default sizes every
// interest comes from the taxonomy, with real names; each ad's text is its
// brand followed by words of its planted fine, mid and coarse interests and
// generic ad words only; categories read "Coarse / Mid". Sizes beyond the
// taxonomy still work, with made-up words for the interests it lacks.
func TestSynthReadsLikeAds(t *testing.T) {
	dir := t.TempDir()
	if _, err := Synth(context.Background(), SynthOptions{Users: 60, Ads: 300, Seed: 5, EventsPerUser: 5}, dir); err != nil {
		t.Fatal(err)
	}
	truth, err := ReadTruth(filepath.Join(dir, "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	var wantCoarse []string
	for _, c := range taxonomy[:8] {
		wantCoarse = append(wantCoarse, c.name)
	}
	if !slices.Equal(truth.Names.Coarse, wantCoarse) || len(truth.Names.Mid) != 64 || truth.Names.Fine[0] != "trail running" {
		t.Fatalf("names = %v, %d mids, fine[0] %q; want the taxonomy's", truth.Names.Coarse, len(truth.Names.Mid), truth.Names.Fine[0])
	}
	known := map[string]bool{}
	for _, c := range taxonomy {
		for _, l := range append(append([]taxMid{{c.name, c.words}}, c.mids...), c.facets...) {
			for _, w := range l.words {
				known[w] = true
			}
		}
	}
	for _, w := range noiseVocab {
		known[w] = true
	}
	planted := map[string]TruthEntity{}
	for _, e := range truth.Entities {
		planted[e.Type.String()+":"+e.ID] = e
	}
	f, err := os.Open(filepath.Join(dir, "entities.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	ads := 0
	for sc.Scan() {
		var e graph.Entity
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		p := planted[e.Type.String()+":"+e.ID]
		switch e.Type {
		case graph.NodeCategory:
			want := strings.ToUpper(truth.Names.Coarse[p.Coarse][:1])
			if !strings.HasPrefix(e.Text, want) || !strings.Contains(e.Text, " / ") {
				t.Errorf("category %s text %q, want \"Coarse / Mid\" of %s", e.ID, e.Text, truth.Names.Mid[p.Mid])
			}
		case graph.NodeAd:
			ads++
			words := strings.Fields(e.Text)
			for _, w := range words[1:] {
				if !known[w] {
					t.Errorf("ad %s: %q in %q is not a word of the taxonomy or the ad words", e.ID, w, e.Text)
				}
			}
			for level, vocab := range map[string][]string{"fine": truth.Vocab.Fine[p.Fine], "mid": truth.Vocab.Mid[p.Mid], "coarse": truth.Vocab.Coarse[p.Coarse]} {
				if !slices.ContainsFunc(words, func(w string) bool { return slices.Contains(vocab, w) }) {
					t.Errorf("ad %s %q holds no word of its planted %s interest %v", e.ID, e.Text, level, vocab)
				}
			}
		}
	}
	if ads != 300 {
		t.Errorf("read %d ads, want 300", ads)
	}

	// More interests than the taxonomy holds: made-up words for the rest.
	big := t.TempDir()
	if _, err := Synth(context.Background(), SynthOptions{Users: 20, Ads: 40, Seed: 5, Coarse: len(taxonomy) + 2, Mid: 2 * (len(taxonomy) + 2), Fine: 4 * (len(taxonomy) + 2)}, big); err != nil {
		t.Fatal(err)
	}
	bt, err := ReadTruth(filepath.Join(big, "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	last := bt.Names.Coarse[len(taxonomy)]
	if known[last] || last == "" || bt.Names.Coarse[0] != taxonomy[0].name {
		t.Errorf("coarse names %v: want the taxonomy's, then made-up words", bt.Names.Coarse)
	}
}
