package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// TestPriors checks that the re-rank adds PriorWeight*Prior (for a new
// user's query, PriorWeight*NewUserPrior) to the dot product, that SetPriors
// changes only the priors of live docs and publishes a new snapshot, and
// that Upsert sets the priors from Doc.Prior and Doc.NewUserPrior.
func TestPriors(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 600, 5)
	v := s.queries(1, 3)[0]
	before := ix.Snapshot()
	base, err := before.Search(ctx, Query{Vector: v, K: 10, Exhaustive: true})
	if err != nil {
		t.Fatal(err)
	}
	// Give the doc ranked last among all docs a large prior.
	all, _ := before.Search(ctx, Query{Vector: v, K: 600, Exhaustive: true})
	last := all.Hits[len(all.Hits)-1].ID
	second := all.Hits[len(all.Hits)-2].ID // lifted for new users only
	if err := ix.SetPriors(ctx, []uint32{last, second, 100000}, []float32{10, 0, 1}, []float32{0, 10, 1}, nil); err != nil {
		t.Fatal(err)
	}
	after := ix.Snapshot()
	if p, _, _ := before.Priors(last); p != 0 {
		t.Errorf("old snapshot sees prior %v, want 0 (snapshots are immutable)", p)
	}
	if _, _, ok := after.Priors(100000); ok {
		t.Errorf("SetPriors made unknown doc 100000 live")
	}
	for _, tc := range []struct {
		name    string
		weight  float32
		newUser bool
		top     uint32 // the doc lifted to the first hit; 0: neither
	}{
		{"weight 0 ignores priors", 0, false, 0},
		{"weight 1 lifts the doc", 1, false, last},
		{"negative weight", -1, false, 0},
		{"a new user's query reads the new-user priors", 1, true, second},
		{"new user, weight 0", 0, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, exhaustive := range []bool{true, false} {
				res, err := after.Search(ctx, Query{Vector: v, K: 10, Exhaustive: exhaustive, PriorWeight: tc.weight, NewUser: tc.newUser,
					Include: roaring.BitmapOf(last, second), Options: SearchOptions{ExhaustiveMax: 1, MinCandidates: 20}})
				if err != nil {
					t.Fatal(err)
				}
				top := res.Hits[0].ID
				if (top == last || top == second) != (tc.top != 0) || (tc.top != 0 && top != tc.top) {
					t.Errorf("exhaustive=%v: top hit %d, want %d (0: neither %d nor %d)", exhaustive, top, tc.top, last, second)
				}
				if tc.top != 0 {
					e, _ := after.Embedding(tc.top)
					if want := Dot(v, e) + 10*tc.weight; res.Hits[0].Score != want {
						t.Errorf("score %v, want dot+weight*prior = %v", res.Hits[0].Score, want)
					}
				}
			}
		})
	}
	if res, _ := after.Search(ctx, Query{Vector: v, K: 10, Exhaustive: true}); res.Hits[0].ID != base.Hits[0].ID || res.Hits[0].Score != base.Hits[0].Score {
		t.Errorf("weight 0 changed the top hit: %+v vs %+v", res.Hits[0], base.Hits[0])
	}
	// Upsert replaces the priors with the doc's own.
	d := s.docs[last]
	d.Prior, d.NewUserPrior = -3, 2
	if err := ix.Upsert(ctx, d); err != nil {
		t.Fatal(err)
	}
	if p, u, _ := ix.Snapshot().Priors(last); p != -3 || u != 2 {
		t.Errorf("priors after Upsert = %v, %v, want -3, 2", p, u)
	}
	if err := ix.SetPriors(ctx, []uint32{1}, []float32{1}, nil, nil); err == nil {
		t.Errorf("SetPriors with mismatched lengths: no error")
	}
}

// TestBoost checks that a query's Boost adds to the re-rank score of the
// boosted docs, that boosted docs join the token stage's candidates, and
// that they still pass Exclude and Filter.
func TestBoost(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 600, 5)
	v := s.queries(1, 3)[0]
	snap := ix.Snapshot()
	all, err := snap.Search(ctx, Query{Vector: v, K: 600, Exhaustive: true})
	if err != nil {
		t.Fatal(err)
	}
	last := all.Hits[len(all.Hits)-1].ID
	e, _ := snap.Embedding(last)
	narrow := SearchOptions{ExhaustiveMax: 1, MinCandidates: 1, CandidateFactor: 1}
	for _, tc := range []struct {
		name    string
		q       Query
		lifted  bool
		onlyTok bool // the token stage must run
	}{
		{"exhaustive", Query{Exhaustive: true}, true, false},
		{"token stage: the boosted doc joins the candidates", Query{Options: narrow}, true, true},
		{"excluded", Query{Exhaustive: true, Exclude: roaring.BitmapOf(last)}, false, false},
		{"restricted away", Query{Options: narrow, Restrict: roaring.BitmapOf(all.Hits[0].ID, all.Hits[1].ID)}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Vector, q.K, q.Boost = v, 10, map[uint32]float32{last: 100}
			res, err := snap.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if tc.onlyTok && res.Stage != StageTokens {
				t.Fatalf("stage %s, want %s", res.Stage, StageTokens)
			}
			if got := len(res.Hits) > 0 && res.Hits[0].ID == last; got != tc.lifted {
				t.Fatalf("boosted doc %d first = %v, want %v (hits %v)", last, got, tc.lifted, res.Hits)
			}
			if tc.lifted {
				if want := Dot(v, e) + 100; res.Hits[0].Score != want {
					t.Errorf("score %v, want dot+boost = %v", res.Hits[0].Score, want)
				}
			}
			for _, h := range res.Hits {
				if h.ID == last && !tc.lifted {
					t.Errorf("boosted doc %d returned although filtered out", last)
				}
			}
		})
	}
}

// TestReadOldVersions checks that version-1 files (DOCS without priors),
// version-2 files (DOCS without new-user priors), version-3 files (no
// first-stage codes) and version-4 files (no whole-vector level) still load, the missing priors reading 0, and that a
// version from the future is refused.
func TestReadOldVersions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		version uint32
		priors  bool // the docs have (non-new-user) priors
	}{
		{1, false},
		{2, true},
		{3, true},
		{4, true},
	} {
		t.Run(fmt.Sprintf("version %d", tc.version), func(t *testing.T) {
			ix, _ := testIndex(t, 300, 6)
			if tc.priors {
				if err := ix.SetPriors(ctx, []uint32{1, 250}, []float32{0.5, -1}, []float32{0, 0}, nil); err != nil {
					t.Fatal(err)
				}
			}
			snap := ix.Snapshot()
			var buf bytes.Buffer
			if _, err := snap.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			old := downgrade(t, buf.Bytes(), snap, tc.version)
			back, err := ReadSnapshot(bytes.NewReader(old))
			if err != nil {
				t.Fatalf("ReadSnapshot(version %d) error = %v", tc.version, err)
			}
			snapshotsEqual(t, snap, back)
		})
	}
	ix, _ := testIndex(t, 10, 6)
	var buf bytes.Buffer
	if _, err := ix.Snapshot().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	binary.LittleEndian.PutUint32(b[8:12], FormatVersion+1)
	if _, err := ReadSnapshot(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("version %d: error %v, want ErrCorrupt", FormatVersion+1, err)
	}
}

// downgrade rewrites a current file of snap (which has no whole-vector
// codebook) as version 1 to 4: QNTZ without the whole-vector level and,
// below 4, without the product codebooks, DOCS below 4 without residual
// shares and first-stage codes, and every doc keeping only the priors of its version
// (the dropped ones must be 0); the checksums are redone.
func downgrade(t *testing.T, b []byte, snap *Snapshot, version uint32) []byte {
	t.Helper()
	dim := snap.q.dim
	keep := min(int(version)-1, 2)
	width := snap.pq.width
	out := append([]byte(nil), b[:12]...)
	binary.LittleEndian.PutUint32(out[8:12], version)
	rest := b[12:]
	for len(rest) > 0 {
		tag := string(rest[:4])
		n := binary.LittleEndian.Uint64(rest[4:12])
		payload := rest[12 : 12+n]
		switch tag {
		case secQuantizer:
			tail := 8 + 4*len(snap.q.whole) // version 5's whole-vector level
			if version < 4 {
				tail += 4
				if p := snap.q.pq; p != nil {
					tail += 4 + 4*p.k*dim
				}
			}
			payload = payload[:len(payload)-tail]
		case secDocs:
			if version >= 4 {
				break
			}
			var p []byte
			p = append(p, payload[:8]...) // seq
			ns := int(binary.LittleEndian.Uint32(payload[8:]))
			r := payload[12+4*ns+4:]
			p = append(p, r[:4]...) // n
			r = r[4:]
			for len(r) > 0 {
				head := 4 + 4*dim + 4*keep
				p = append(p, r[:head]...)
				for i := keep; i < 2; i++ {
					if binary.LittleEndian.Uint32(r[4+4*dim+4*i:]) != 0 {
						t.Fatalf("downgrade: doc with a prior that version %d cannot hold", version)
					}
				}
				r = r[4+4*dim+8:]
				m := int(binary.LittleEndian.Uint32(r))
				p = append(p, r[:4+4*m]...)
				r = r[4+4*m+8+width:]
			}
			payload = p
		}
		var sec bytes.Buffer
		sec.WriteString(tag)
		sec.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(payload))))
		sec.Write(payload)
		sec.Write(binary.LittleEndian.AppendUint32(nil, crc32.Checksum(sec.Bytes(), crcTable)))
		out = append(out, sec.Bytes()...)
		rest = rest[12+n+4:]
	}
	return out
}

// TestPopularityFloor checks the popularity floor of fresh docs: with a
// non-zero PriorWeight a fresh doc scores as if its popularity coordinate
// were raised to the floor (the rank-th largest of the live docs) and its
// embedding re-normalised, the gain reported in Parts.Prior; a doc that is
// not fresh, a zero PriorWeight, a doc already above the floor or no floor
// change nothing. Upsert and Delete set and clear the flag.
func TestPopularityFloor(t *testing.T) {
	ctx := context.Background()
	ix, s := testIndex(t, 600, 5)
	v := s.queries(1, 3)[0]
	snap := ix.Snapshot()
	axis := len(v) - 1
	const rank = 20
	// The doc least popular by the coordinate, and the floor value.
	var low, high uint32
	var coords []float32
	it := snap.Live().Iterator()
	for it.HasNext() {
		id := it.Next()
		e, _ := snap.Embedding(id)
		coords = append(coords, e[axis])
		if el, _ := snap.Embedding(low); e[axis] < el[axis] {
			low = id
		}
		if eh, _ := snap.Embedding(high); e[axis] > eh[axis] {
			high = id
		}
	}
	slices.Sort(coords)
	floor := coords[len(coords)-rank]
	if err := ix.SetPriors(ctx, []uint32{low, high}, []float32{0, 0}, []float32{0, 0}, []bool{true, true}); err != nil {
		t.Fatal(err)
	}
	if err := ix.SetPopularityFloor(ctx, axis, rank); err != nil {
		t.Fatal(err)
	}
	floored := ix.Snapshot()
	if err := ix.SetPopularityFloor(ctx, axis+1, rank); err == nil {
		t.Errorf("SetPopularityFloor(axis %d of %d): no error", axis+1, axis+1)
	}
	if err := ix.SetPopularityFloor(ctx, -1, rank); err != nil {
		t.Fatal(err)
	}
	noFloor := ix.Snapshot()
	if err := ix.SetPopularityFloor(ctx, axis, rank); err != nil {
		t.Fatal(err)
	}
	if err := ix.SetPriors(ctx, []uint32{low}, []float32{0}, []float32{0}, nil); err != nil {
		t.Fatal(err)
	}
	notFresh := ix.Snapshot()

	hit := func(snap *Snapshot, w float32, id uint32) Hit {
		t.Helper()
		res, err := snap.Search(ctx, Query{Vector: v, K: 600, Exhaustive: true, PriorWeight: w})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range res.Hits {
			if h.ID == id {
				return h
			}
		}
		t.Fatalf("doc %d not retrieved", id)
		return Hit{}
	}
	e, _ := snap.Embedding(low)
	raised := slices.Clone(e)
	raised[axis] = floor
	norm := float32(math.Sqrt(float64(Dot(raised, raised))))
	for i := range raised {
		raised[i] /= norm
	}
	plain, lifted := Dot(v, e), Dot(v, raised)
	if lifted == plain || floor <= e[axis] {
		t.Fatalf("test data: floor %v over coordinate %v changes nothing (%v)", floor, e[axis], plain)
	}
	eh, _ := snap.Embedding(high)
	for _, tc := range []struct {
		name string
		snap *Snapshot
		w    float32
		id   uint32
		want float32 // the score
	}{
		{"fresh doc below the floor, prior weight 1", floored, 1, low, lifted},
		{"prior weight 2: the lift is not scaled", floored, 2, low, lifted},
		{"prior weight 0: the embeddings alone", floored, 0, low, plain},
		{"no floor", noFloor, 1, low, plain},
		{"not fresh", notFresh, 1, low, plain},
		{"fresh doc above the floor", floored, 1, high, Dot(v, eh)},
		{"an older snapshot", snap, 1, low, plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hit(tc.snap, tc.w, tc.id)
			if math.Abs(float64(h.Score-tc.want)) > 1e-5 {
				t.Errorf("score %v, want %v", h.Score, tc.want)
			}
			if got := h.Parts.Similarity + h.Parts.Prior; math.Abs(float64(got-tc.want)) > 1e-5 || h.Parts.Similarity != Dot(v, tc.snap.mustEmbedding(t, tc.id)) {
				t.Errorf("parts %+v: want similarity the plain dot product and the lift in prior", h.Parts)
			}
		})
	}
	if lifted <= plain && v[axis] > 0 {
		t.Errorf("lifted score %v <= plain %v for a query with popularity weight %v", lifted, plain, v[axis])
	}
	// Upsert sets the flag from the doc, Delete clears it.
	d := s.docs[low]
	d.Fresh = true
	if err := ix.Upsert(ctx, d); err != nil {
		t.Fatal(err)
	}
	if h := hit(ix.Snapshot(), 1, low); math.Abs(float64(h.Score-lifted)) > 1e-5 {
		t.Errorf("upserted fresh doc: score %v, want %v", h.Score, lifted)
	}
	if err := ix.Delete(ctx, low); err != nil {
		t.Fatal(err)
	}
	d.Fresh = false
	if err := ix.Upsert(ctx, d); err != nil {
		t.Fatal(err)
	}
	if h := hit(ix.Snapshot(), 1, low); h.Score != plain {
		t.Errorf("deleted and re-added as not fresh: score %v, want %v", h.Score, plain)
	}
}

func (s *Snapshot) mustEmbedding(t *testing.T, id uint32) []float32 {
	t.Helper()
	e, ok := s.Embedding(id)
	if !ok {
		t.Fatalf("doc %d not live", id)
	}
	return e
}
