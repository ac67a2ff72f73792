package index

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

func TestUpsertDeleteVisibility(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 2000, 11)
	old := ix.Snapshot()
	target := s.docs[5]
	moved := slices.Clone(s.docs[1500].Embedding) // give doc 5 doc 1500's embedding
	oldTokens, _ := old.Tokens(target.ID)
	upd := target
	upd.Embedding = moved
	upd.Attrs = map[string][]string{AttrCategory: {"new-cat"}}
	if err := ix.Upsert(ctx, upd); err != nil {
		t.Fatalf("Upsert() error = %v", err)
	}
	cur := ix.Snapshot()
	newTokens, _ := cur.Tokens(target.ID)
	if slices.Equal(oldTokens, newTokens) {
		t.Fatalf("tokens unchanged after moving the embedding: %v", newTokens)
	}
	// The old snapshot still sees the old state.
	if got, _ := old.Tokens(target.ID); !slices.Equal(got, oldTokens) {
		t.Errorf("old snapshot Tokens = %v, want %v", got, oldTokens)
	}
	for _, tok := range oldTokens {
		if !old.Postings(tok).Contains(target.ID) {
			t.Errorf("old snapshot lost doc %d from posting %v", target.ID, tok)
		}
	}
	if b, _ := old.Allowed(Eq(AttrCategory, "new-cat")); !b.IsEmpty() {
		t.Errorf("old snapshot sees new-cat docs %v", b.ToArray())
	}
	// The new snapshot sees the new state.
	for _, tok := range newTokens {
		if !cur.Postings(tok).Contains(target.ID) {
			t.Errorf("new snapshot: doc %d missing from posting %v", target.ID, tok)
		}
	}
	for _, tok := range oldTokens {
		if !slices.Contains(newTokens, tok) && cur.Postings(tok).Contains(target.ID) {
			t.Errorf("new snapshot: doc %d still in stale posting %v", target.ID, tok)
		}
	}
	if b, _ := cur.Allowed(Eq(AttrCategory, "new-cat")); !slices.Equal(b.ToArray(), []uint32{target.ID}) {
		t.Errorf("new-cat docs = %v, want [%d]", b.ToArray(), target.ID)
	}
	res, err := cur.Search(ctx, Query{Vector: moved, K: 3, Filter: Eq(AttrCategory, "new-cat")})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].ID != target.ID {
		t.Fatalf("Search(new-cat) = %+v, %v, want doc %d", res, err, target.ID)
	}
	// Delete: gone from the newest snapshot only.
	if err := ix.Delete(ctx, target.ID, 999999); err != nil {
		t.Fatalf("Delete() error = %v", err)
	}
	del := ix.Snapshot()
	if del.Contains(target.ID) || !cur.Contains(target.ID) || !old.Contains(target.ID) {
		t.Errorf("Contains after delete: new %v cur %v old %v, want false true true",
			del.Contains(target.ID), cur.Contains(target.ID), old.Contains(target.ID))
	}
	for _, tok := range newTokens {
		if del.Postings(tok).Contains(target.ID) {
			t.Errorf("deleted doc %d still in posting %v", target.ID, tok)
		}
	}
	if del.Len() != len(s.docs)-1 || old.Len() != len(s.docs) {
		t.Errorf("Len = %d/%d, want %d/%d", del.Len(), old.Len(), len(s.docs)-1, len(s.docs))
	}
	if got := del.Seq(); got != old.Seq()+2 {
		t.Errorf("Seq = %d, want %d", got, old.Seq()+2)
	}
}

func TestUpsertMatchesBuild(t *testing.T) {
	ctx := context.Background()
	built, s := testIndex(t, 1500, 5)
	inc, _ := New(Options{Quantizer: built.Quantizer()})
	for i := 0; i < len(s.docs); i += 100 {
		if err := inc.Upsert(ctx, s.docs[i:min(i+100, len(s.docs))]...); err != nil {
			t.Fatal(err)
		}
	}
	a, b := built.Snapshot(), inc.Snapshot()
	if !a.live.Equals(b.live) {
		t.Fatalf("live sets differ")
	}
	for tok, n := range a.TokenSizes() {
		if !a.Postings(tok).Equals(b.Postings(tok)) {
			t.Errorf("posting %v differs (built %d docs)", tok, n)
		}
	}
	if len(a.TokenSizes()) != len(b.TokenSizes()) {
		t.Errorf("token counts differ: %d vs %d", len(a.TokenSizes()), len(b.TokenSizes()))
	}
}

func TestSearch(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 4000, 2)
	snap := ix.Snapshot()
	qs := s.queries(20, 9)
	paused := Eq(AttrStatus, "paused")
	for _, tc := range []struct {
		name   string
		filter *Filter
	}{{"unfiltered", nil}, {"paused", paused}, {"category c7", Eq(AttrCategory, "c7")}} {
		t.Run(tc.name, func(t *testing.T) {
			var rec float64
			for _, v := range qs {
				got, err := snap.Search(ctx, Query{Vector: v, K: 20, Filter: tc.filter, Options: SearchOptions{ExhaustiveMax: 1, MinCandidates: 100}})
				if err != nil {
					t.Fatal(err)
				}
				want, _ := snap.Search(ctx, Query{Vector: v, K: 20, Filter: tc.filter, Exhaustive: true})
				rec += recall(got.Hits, want.Hits)
				for i, h := range got.Hits {
					if i > 0 && h.Score > got.Hits[i-1].Score {
						t.Fatalf("hits not sorted: %+v", got.Hits)
					}
					a, _ := snap.Attrs(h.ID)
					if tc.filter != nil && !tc.filter.Matches(a) {
						t.Fatalf("hit %d does not match the filter: %v", h.ID, a)
					}
					if got.Stage == StageTokens && len(h.Tokens) == 0 {
						t.Fatalf("token-stage hit %d lists no matched tokens", h.ID)
					}
					for _, tok := range h.Tokens {
						if !snap.Postings(tok).Contains(h.ID) {
							t.Fatalf("hit %d lists token %v it is not posted under", h.ID, tok)
						}
					}
				}
			}
			if r := rec / float64(len(qs)); r < 0.9 {
				t.Errorf("recall@20 = %.3f, want >= 0.9", r)
			}
		})
	}
	// Exclusion, Restrict and Include.
	v := qs[0]
	first, _ := snap.Search(ctx, Query{Vector: v, K: 5})
	ex := roaring.BitmapOf(first.Hits[0].ID)
	second, _ := snap.Search(ctx, Query{Vector: v, K: 5, Exclude: ex})
	for _, h := range second.Hits {
		if h.ID == first.Hits[0].ID {
			t.Errorf("excluded doc %d returned", h.ID)
		}
	}
	far := roaring.BitmapOf(3, 77)
	r, _ := snap.Search(ctx, Hybrid(Query{Vector: v, K: 5}, far, HybridAnd))
	if len(r.Hits) != 2 {
		t.Errorf("Restrict to 2 docs gave %d hits", len(r.Hits))
	}
	// A restriction naming a doc that is not live (an id past the last)
	// keeps only the live ones, and is not modified; one of live docs
	// alone is read as it is.
	for _, restrict := range []*roaring.Bitmap{roaring.BitmapOf(3, 77, 1<<30), roaring.BitmapOf(3, 77)} {
		before := restrict.Clone()
		r, _ := snap.Search(ctx, Query{Vector: v, K: 5, Restrict: restrict})
		if len(r.Hits) != 2 || r.Allowed != 2 || !restrict.Equals(before) {
			t.Errorf("Restrict %v: %d hits of %d allowed, restriction now %v; want 2 of 2, unchanged", before, len(r.Hits), r.Allowed, restrict)
		}
	}
	r, _ = snap.Search(ctx, Hybrid(Query{Vector: v, K: 5000}, far, HybridOr))
	ids := map[uint32]bool{}
	for _, h := range r.Hits {
		ids[h.ID] = true
	}
	if !ids[3] || !ids[77] {
		t.Errorf("Include of docs 3, 77 missing from hits")
	}
	if _, err := snap.Search(ctx, Query{Vector: []float32{1}}); !errors.Is(err, ErrBadQuery) {
		t.Errorf("Search(bad dim) error = %v, want ErrBadQuery", err)
	}
	if _, err := snap.Search(ctx, Query{Vector: v, Filter: &Filter{}}); !errors.Is(err, ErrBadFilter) {
		t.Errorf("Search(bad filter) error = %v, want ErrBadFilter", err)
	}
	if err := ix.Upsert(ctx, Doc{ID: 1, Embedding: []float32{1}}); !errors.Is(err, ErrDim) {
		t.Errorf("Upsert(bad dim) error = %v, want ErrDim", err)
	}
}
