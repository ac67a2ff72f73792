package model

import (
	"cmp"
	gocontext "context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/viterin/vek/vek32"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/hir-ads/hir/graph"
)

// testFit is the fit of k factors at the default half-life, without
// content or profile rows.
func testFit(k int) spectralFit {
	return spectralFit{k: k, halfLifeDays: DefaultSpectralHalfLifeDays}
}

func fitTestSpectral(t *testing.T, w *synthWorld, k int, seed uint64, prev *spectralTable) *spectralTable {
	t.Helper()
	sm := graph.NewSampler(w.store, graph.SamplerOptions{})
	tbl, err := fitSpectral(gocontext.Background(), w.store, sm, testFit(k), w.store.MaxTS(), seed, prev, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func cosine32(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// TestFitSpectral checks the spectral factors of a world whose users engage
// with the ads of one interest each: the longest row of unit norm, the
// more engaged half of the ads with longer rows than the less engaged
// half, ads of one interest closer than ads of two, deterministic,
// and, given the table of a resumed version, rotated onto its factors.
func TestFitSpectral(t *testing.T) {
	w := newSynthWorld(t, 80, 60, 4, 12, 1)
	const k = 4
	a := fitTestSpectral(t, w, k, 1, nil)
	na := len(a.IDs)
	if na < 50 || len(a.Rows) != na*k || len(a.Fold) != na {
		t.Fatalf("%d ads, %d rows, %d fold weights; want >= 50 ads of %d factors", na, len(a.Rows), len(a.Fold), k)
	}
	norms := make([]float64, na)
	longest := 0.0
	for i := range na {
		for _, v := range a.Rows[i*k : (i+1)*k] {
			norms[i] += float64(v) * float64(v)
		}
		norms[i] = math.Sqrt(norms[i])
		longest = max(longest, norms[i])
	}
	if math.Abs(longest-1) > 1e-4 {
		t.Fatalf("longest row %.5f, want 1", longest)
	}
	// Fold is 1/sqrt(weighted degree): by it, the more engaged half.
	byDegree := make([]int, na)
	for i := range byDegree {
		byDegree[i] = i
	}
	slices.SortFunc(byDegree, func(x, y int) int { return cmp.Compare(a.Fold[x], a.Fold[y]) })
	var more, less float64
	for r, i := range byDegree {
		if r < na/2 {
			more += norms[i]
		} else {
			less += norms[i]
		}
	}
	if !(more > less) {
		t.Errorf("rows' norms: %.3f summed over the more engaged half, %.3f over the other; want the first larger", more, less)
	}
	topic := adTopics(w)
	var same, diff []float64
	for i := range na {
		for j := i + 1; j < na; j++ {
			c := cosine32(a.Rows[i*k:(i+1)*k], a.Rows[j*k:(j+1)*k])
			if topic[a.IDs[i]] == topic[a.IDs[j]] {
				same = append(same, c)
			} else {
				diff = append(diff, c)
			}
		}
	}
	if ms, md := meanOf(same), meanOf(diff); !(ms > md+0.3) {
		t.Errorf("mean cosine of two ads of one interest %.3f, of two interests %.3f; want the first well above", ms, md)
	}
	if b := fitTestSpectral(t, w, k, 1, nil); !slices.Equal(a.Rows, b.Rows) || !slices.Equal(a.IDs, b.IDs) {
		t.Error("two fits with the same seed differ")
	}

	// A previous table in another basis of the same subspace: a refit
	// is rotated onto it.
	rng := rand.New(rand.NewPCG(7, 7))
	r0 := mat.NewDense(k, k, nil)
	for i := range k {
		for j := range k {
			r0.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(r0)
	var rot mat.Dense
	qr.QTo(&rot)
	prev := &spectralTable{K: k, IDs: a.IDs, Fold: a.Fold, Rows: make([]float32, len(a.Rows))}
	for i := range na {
		for j := range k {
			var s float64
			for l := range k {
				s += float64(a.Rows[i*k+l]) * rot.At(l, j)
			}
			prev.Rows[i*k+j] = float32(s)
		}
	}
	prev.buildIndex()
	var maxDiff float64
	for _, tc := range []struct {
		name  string
		prev  *spectralTable
		close bool
	}{
		{"aligned", prev, true},
		{"not aligned", nil, false},
	} {
		c := fitTestSpectral(t, w, k, 1, tc.prev)
		maxDiff = 0
		for i, v := range c.Rows {
			maxDiff = max(maxDiff, math.Abs(float64(v-prev.Rows[i])))
		}
		if (maxDiff < 1e-3) != tc.close {
			t.Errorf("%s: largest difference from the previous table's factors %.4f", tc.name, maxDiff)
		}
	}
}

// TestSpectralHalfLife checks that the half-life shapes the fit: a short
// one gives the longer rows to the ads engaged lately rather than to those
// engaged most over the whole span, and a very long one reads as no decay.
func TestSpectralHalfLife(t *testing.T) {
	w := newSynthWorld(t, 120, 60, 4, 16, 1)
	sm := graph.NewSampler(w.store, graph.SamplerOptions{})
	asOf := w.store.MaxTS()
	const k, short = 4, 2.0 // days
	fit := func(days float64) *spectralTable {
		t.Helper()
		f := testFit(k)
		f.halfLifeDays = days
		tbl, err := fitSpectral(gocontext.Background(), w.store, sm, f, asOf, 1, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	// recent holds each ad's positive engagement weighted by the short
	// half-life, as the short fit weighs it.
	recent := map[string]float64{}
	w.store.ForEachEdge(w.store.MinTS(), asOf+1, func(src graph.NodeID, e graph.Edge) bool {
		if src.Type == graph.NodeUser && e.Nbr.Type == graph.NodeAd && sm.HistoryPrior(e.Type) > 0 {
			age := float64(asOf-e.TS) / float64((24 * time.Hour).Milliseconds())
			recent[w.store.Ref(e.Nbr).ID] += float64(sm.HistoryPrior(e.Type)) * math.Exp2(-age/short)
		}
		return true
	})
	// corr is the Pearson correlation of the table's row norms with recent.
	corr := func(tbl *spectralTable) float64 {
		var x, y []float64
		for i, id := range tbl.IDs {
			x = append(x, float64(vek32.Norm(tbl.Rows[i*k:(i+1)*k])))
			y = append(y, recent[id])
		}
		return stat.Correlation(x, y, nil)
	}
	none, shortFit := fit(-1), fit(short)
	if cn, cs := corr(none), corr(shortFit); !(cs > cn+0.05) {
		t.Errorf("correlation of the rows' norms with recent engagement: %.3f at a %v-day half-life, %.3f without decay; want the first higher", cs, short, cn)
	}
	var maxDiff float64
	for i, v := range fit(1e9).Rows {
		maxDiff = max(maxDiff, math.Abs(float64(v-none.Rows[i])))
	}
	if maxDiff > 1e-4 {
		t.Errorf("a half-life of 1e9 days differs from no decay by %.2g", maxDiff)
	}
}

// TestSpectralFile checks that a table survives its file and that a
// damaged file or one of another width is refused.
func TestSpectralFile(t *testing.T) {
	w := newSynthWorld(t, 40, 30, 3, 8, 1)
	a := fitTestSpectral(t, w, 4, 1, nil)
	a.Pred, a.PredDim = []float32{1, 2, 3, 4, 5, 6, 7, 8}, 2
	a.Content = make([]bool, len(a.IDs))
	a.Content[len(a.IDs)-1] = true
	a.Profile, a.ProfileRows = []int32{3, 70}, []float32{1, 0, 0, 0, 0, 0.5, 0.5, 0}
	a.Attr, a.AttrRows, a.AttrN = []uint64{5, 1 << 60}, []float32{0, 1, 0, 0, 0.5, 0, 0.5, 0}, []int32{3, 1}
	a.Groups, a.AttrGroup, a.GroupW = []string{textGroup, "campaign"}, []int32{1, 0}, []float32{0.25, 0.75}
	dir := t.TempDir()
	path := filepath.Join(dir, FileSpectral)
	if err := writeSpectral(path, a); err != nil {
		t.Fatal(err)
	}
	b, err := readSpectral(path, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.IDs, b.IDs) || !slices.Equal(a.Rows, b.Rows) || !slices.Equal(a.Fold, b.Fold) || b.row(a.IDs[3]) != 3 ||
		!slices.Equal(a.Pred, b.Pred) || b.PredDim != 2 || !slices.Equal(a.Content, b.Content) ||
		!slices.Equal(a.Profile, b.Profile) || !slices.Equal(a.ProfileRows, b.ProfileRows) || b.profile[70] != 1 ||
		!slices.Equal(a.Attr, b.Attr) || !slices.Equal(a.AttrRows, b.AttrRows) || !slices.Equal(a.AttrN, b.AttrN) || b.attr[1<<60] != 1 ||
		!slices.Equal(a.Groups, b.Groups) || !slices.Equal(a.AttrGroup, b.AttrGroup) || !slices.Equal(a.GroupW, b.GroupW) {
		t.Error("table read back differs")
	}
	short := *a
	short.PredDim = 3 // 8 values are not [3, 4]
	if err := writeSpectral(filepath.Join(dir, "short"), &short); err != nil {
		t.Fatal(err)
	}
	shortRaw, err := os.ReadFile(filepath.Join(dir, "short"))
	if err != nil {
		t.Fatal(err)
	}
	marks := *a
	marks.Content = marks.Content[1:] // one mark short of the rows
	if err := writeSpectral(filepath.Join(dir, "marks"), &marks); err != nil {
		t.Fatal(err)
	}
	marksRaw, err := os.ReadFile(filepath.Join(dir, "marks"))
	if err != nil {
		t.Fatal(err)
	}
	profile := *a
	profile.ProfileRows = profile.ProfileRows[1:] // one value short of two rows of 4
	if err := writeSpectral(filepath.Join(dir, "profile"), &profile); err != nil {
		t.Fatal(err)
	}
	profileRaw, err := os.ReadFile(filepath.Join(dir, "profile"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := func(name string, edit func(c *spectralTable)) []byte {
		t.Helper()
		c := *a
		edit(&c)
		p := filepath.Join(dir, name)
		if err := writeSpectral(p, &c); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	attrRowsRaw := corrupt("attr rows", func(c *spectralTable) { c.AttrRows = c.AttrRows[1:] })
	attrNRaw := corrupt("attr counts", func(c *spectralTable) { c.AttrN = []int32{3, 0} })
	groupWRaw := corrupt("group weights", func(c *spectralTable) {
		c.Groups, c.AttrGroup, c.GroupW = []string{"campaign"}, make([]int32, len(c.Attr)), []float32{-1}
	})
	groupRaw := corrupt("groups", func(c *spectralTable) {
		c.Groups, c.AttrGroup, c.GroupW = []string{"campaign"}, slices.Repeat([]int32{1}, len(c.Attr)), []float32{1}
	})
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		k, dim int
	}{
		{"other width", raw, 8, 2},
		{"predictor of other inputs", raw, 4, 3},
		{"truncated", raw[:len(raw)/2], 4, 2},
		{"empty", nil, 4, 2},
		{"not a table", []byte("hello"), 4, 2},
		{"predictor of another shape", shortRaw, 4, 3},
		{"content marks of another length", marksRaw, 4, 2},
		{"profile rows of another length", profileRaw, 4, 2},
		{"attribute rows of another length", attrRowsRaw, 4, 2},
		{"an attribute shared by no ad", attrNRaw, 4, 2},
		{"a negative group weight", groupWRaw, 4, 2},
		{"a key of no group", groupRaw, 4, 2},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readSpectral(p, tc.k, tc.dim); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: error %v, want ErrCorrupt", tc.name, err)
		}
	}
}

// fitKeyed fits k factors on w's engagement, each ad's keys (attribute
// rows) given by keyOf.
func fitKeyed(t *testing.T, w *synthWorld, k int, keyOf map[graph.NodeID][]adKey) *spectralTable {
	t.Helper()
	sm := graph.NewSampler(w.store, graph.SamplerOptions{})
	tbl, err := fitSpectral(gocontext.Background(), w.store, sm, testFit(k), w.store.MaxTS(), 1, nil, nil,
		func(id graph.NodeID) []adKey { return keyOf[id] })
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// TestAttrRows checks the attribute rows of the spectral fit: every
// attribute value of the engaged ads gets the mean of their rows, and an
// ad without a row of its own folds in its values' rows weighted by their
// rarity, near the rows of its campaign's interest, at least at the
// engaged rows' median length, at the new-ad scale.
func TestAttrRows(t *testing.T) {
	w := newSynthWorld(t, 80, 60, 4, 12, 1)
	keyOf := map[graph.NodeID][]adKey{}
	for i, id := range w.ads { // three campaigns per interest; one format for every ad
		keyOf[id] = attrKeys(map[string]string{"campaign": fmt.Sprintf("c%d-%d", w.adTopic[i], i%3), "format": "video"})
	}
	const k = 4
	tbl := fitKeyed(t, w, k, keyOf)
	if len(tbl.Attr) != 13 || len(tbl.AttrRows) != 13*k || len(tbl.AttrN) != 13 || !slices.IsSorted(tbl.Attr) {
		t.Fatalf("%d attribute rows (%d values, %d counts), want 12 campaigns and one format, sorted", len(tbl.Attr), len(tbl.AttrRows), len(tbl.AttrN))
	}
	format := attrKeys(map[string]string{"format": "video"})[0].key
	if n := tbl.AttrN[tbl.attr[format]]; int(n) != len(tbl.IDs) {
		t.Errorf("the format every ad has counts %d ads, want the %d engaged", n, len(tbl.IDs))
	}
	// A campaign's row is the mean of its ads' rows.
	camp := attrKeys(map[string]string{"campaign": "c1-2"})[0].key
	want := make([]float32, k)
	n := 0
	for i, id := range w.ads {
		if r := tbl.row(w.store.Ref(id).ID); r >= 0 && w.adTopic[i] == 1 && i%3 == 2 {
			vek32.Add_Inplace(want, tbl.Rows[int(r)*k:(int(r)+1)*k])
			n++
		}
	}
	vek32.MulNumber_Inplace(want, 1/float32(n))
	r := tbl.attr[camp]
	if got := tbl.AttrRows[int(r)*k : (int(r)+1)*k]; tbl.AttrN[r] != int32(n) || !closeSlices(got, want, 1e-6) {
		t.Errorf("campaign row %v of %d ads, want the mean %v of %d", got, tbl.AttrN[r], want, n)
	}
	topic := adTopics(w)
	var same, diff []float64
	for i, id := range w.ads {
		f := make([]float32, k)
		if !tbl.attrFold(f, keyOf[id]) {
			t.Fatalf("ad %d: no attribute factors", i)
		}
		s, d := topicCosines(tbl, f, topic, w.adTopic[i], "")
		same, diff = append(same, s...), append(diff, d...)
	}
	if ms, md := meanOf(same), meanOf(diff); !(ms > md+0.2) {
		t.Errorf("mean cosine of an ad's attribute factors with its interest's rows %.3f, with the others' %.3f", ms, md)
	}
	// The groups: campaign and format, the campaign's rows the better
	// predictor of an ad's row (the format's is the mean of every ad).
	if !slices.Equal(tbl.Groups, []string{"campaign", "format"}) || tbl.AttrGroup[r] != 0 || tbl.AttrGroup[tbl.attr[format]] != 1 {
		t.Fatalf("groups %q, campaign's %d, format's %d; want campaign (0) and format (1)", tbl.Groups, tbl.AttrGroup[r], tbl.AttrGroup[tbl.attr[format]])
	}
	if !(tbl.GroupW[0] > 0.5 && tbl.GroupW[0] > 2*tbl.GroupW[1]) {
		t.Errorf("group weights %v, want the campaign's above 0.5 and above twice the format's", tbl.GroupW)
	}
	// The fold sums each group's row times its weight.
	fc, ff := tbl.AttrRows[int(r)*k:(int(r)+1)*k], tbl.AttrRows[int(tbl.attr[format])*k:int(tbl.attr[format]+1)*k]
	mixed := make([]float32, k)
	for j := range k {
		mixed[j] = tbl.GroupW[0]*fc[j] + tbl.GroupW[1]*ff[j]
	}
	both := []adKey{{key: camp}, {key: format}}
	got := make([]float32, k)
	plain := tbl.withNewAdScale(1)
	plain.typical = 0 // no median length to reach
	plain.attrFold(got, both)
	if !closeSlices(got, mixed, 1e-6) {
		t.Errorf("fold of a campaign and the shared format = %v, want %v", got, mixed)
	}
	double := plain.withNewAdScale(2)
	double.attrFold(got, both)
	if want := vekScaled(mixed, 2); !closeSlices(got, want, 1e-6) {
		t.Errorf("at scale 2: %v, want %v", got, want)
	}
	// A fold shorter than the engaged rows' median is served at it, then
	// scaled.
	long := double.withNewAdScale(2)
	long.typical = 4 * vek32.Norm(mixed)
	long.attrFold(got, both)
	if n := vek32.Norm(got); math.Abs(float64(n-2*long.typical)) > 1e-5*float64(long.typical) || cosine32(got, mixed) < 1-1e-6 {
		t.Errorf("below the median length: fold of norm %v, cosine %v with the mean; want twice the median %v, the same direction",
			n, cosine32(got, mixed), long.typical)
	}
	// A table written without groups weighs each key by the inverse of its
	// count: the campaign's 1/n against the format's 1/len(IDs).
	old := plain.withNewAdScale(1)
	old.Groups, old.AttrGroup, old.GroupW = nil, nil, nil
	wc, wf := 1/float32(n), 1/float32(len(tbl.IDs))
	for j := range k {
		mixed[j] = (wc*fc[j] + wf*ff[j]) / (wc + wf)
	}
	old.attrFold(got, both)
	if !closeSlices(got, mixed, 1e-6) {
		t.Errorf("fold without groups = %v, want %v", got, mixed)
	}
	if tbl.attrFold(got, []adKey{{key: 12345}}) || !slices.Equal(got, make([]float32, k)) {
		t.Errorf("an unknown value folded to %v, want nothing", got)
	}
}

// TestAttrRowsRareNoise checks that a new ad's fold follows the attribute
// that predicts where an ad's users are, not a rarer one shared by chance:
// every ad has a campaign of its interest and a release date it shares
// with one ad of another interest. Weighted by rarity alone, the date (2
// ads) outweighs the campaign (about 7) and the fold points at the other
// interest; the fitted group weights give the date little of it.
func TestAttrRowsRareNoise(t *testing.T) {
	w := newSynthWorld(t, 80, 60, 4, 12, 1)
	keyOf := map[graph.NodeID][]adKey{}
	for i, id := range w.ads {
		// Ads 2m and 2m+1 (interests 0 and 1, or 2 and 3: adTopic is
		// i % 4) share a date.
		keyOf[id] = attrKeys(map[string]string{"campaign": fmt.Sprintf("c%d-%d", w.adTopic[i], i%2), "date": fmt.Sprint(i / 2)})
	}
	const k = 4
	tbl := fitKeyed(t, w, k, keyOf)
	date := slices.Index(tbl.Groups, "date")
	if camp := slices.Index(tbl.Groups, "campaign"); !(tbl.GroupW[camp] > 4*tbl.GroupW[date]) {
		t.Errorf("group weights %v of %q, want the campaign's above four times the date's", tbl.GroupW, tbl.Groups)
	}
	topic := adTopics(w)
	var same, diff []float64
	for i := range w.ads {
		// A new creative of ad i's campaign, released on the date of the
		// next pair, whose two ads are of the two other interests.
		keys := attrKeys(map[string]string{"campaign": fmt.Sprintf("c%d-%d", w.adTopic[i], i%2), "date": fmt.Sprint((i/2 + 1) % (len(w.ads) / 2))})
		f := make([]float32, k)
		if !tbl.attrFold(f, keys) {
			t.Fatalf("ad %d: no attribute factors", i)
		}
		s, d := topicCosines(tbl, f, topic, w.adTopic[i], "")
		same, diff = append(same, s...), append(diff, d...)
	}
	if ms, md := meanOf(same), meanOf(diff); !(ms > md+0.2) {
		t.Errorf("mean cosine of a new ad's factors with its interest's rows %.3f, with the others' %.3f", ms, md)
	}
}

// vekScaled returns a copy of v times s.
func vekScaled(v []float32, s float32) []float32 {
	out := slices.Clone(v)
	vek32.MulNumber_Inplace(out, s)
	return out
}

// closeSlices reports whether a and b have the same length and differ by
// at most tol in every element.
func closeSlices(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol {
			return false
		}
	}
	return true
}

// TestSpectralFeatures checks the factors the featuriser gives each
// anchor: a user the fold-in of its history, an ad its row only with a
// history, an anchor alone nothing.
func TestSpectralFeatures(t *testing.T) {
	w := newSynthWorld(t, 40, 60, 4, 12, 1)
	cfg := tinyConfig().WithDefaults().Model
	cfg.Spectral = 4
	f, err := newFeaturizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.spec = fitTestSpectral(t, w, 4, 1, nil)
	k := 4
	asOf := w.store.MaxTS()
	sm := graph.NewSampler(w.store, graph.DefaultSamplerOptions())
	alone := graph.DefaultSamplerOptions()
	alone.Student.AnchorOnly = 1
	smAlone := graph.NewSampler(w.store, alone)
	row := func(id graph.NodeID) []float32 {
		r := f.spec.row(w.store.Ref(id).ID)
		if r < 0 {
			return make([]float32, k)
		}
		return f.spec.Rows[int(r)*k : (int(r)+1)*k]
	}
	feats := func(sg *graph.Subgraph) []float32 {
		bt, err := f.featurize(w.store, []*graph.Subgraph{sg}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return bt.spec
	}
	near := func(a, b []float32) bool {
		for i := range a {
			if math.Abs(float64(a[i]-b[i])) > 1e-5 {
				return false
			}
		}
		return true
	}
	zero := make([]float32, k)

	user := sm.Sample(w.users[0], asOf, graph.ViewTeacher, 1)
	if len(user.History) == 0 {
		t.Fatal("user 0 has no history")
	}
	want := make([]float32, k)
	for i, h := range user.History {
		r := f.spec.row(w.store.Ref(h).ID)
		if r < 0 {
			continue
		}
		for j := range k {
			want[j] += user.HistoryW[i] * f.spec.Fold[r] * f.spec.Rows[int(r)*k+j]
		}
	}
	normalize(want)
	if got := feats(user); len(got) != k || !near(got, want) || near(want, zero) {
		t.Errorf("user anchor: %v, want the fold-in of its history %v", got, want)
	}
	ad := sm.Sample(w.ads[0], asOf, graph.ViewTeacher, 1)
	if got := feats(ad); len(ad.History) == 0 || !near(got[:k], row(w.ads[0])) || near(got[:k], zero) {
		t.Errorf("ad anchor with a history: %v, want its row %v", got[:k], row(w.ads[0]))
	}
	for _, id := range []graph.NodeID{w.users[0], w.ads[0]} {
		if got := feats(smAlone.Sample(id, asOf, graph.ViewStudent, 1)); !near(got[:k], zero) {
			t.Errorf("%v alone: %v, want zeros", id, got[:k])
		}
	}
}

// FuzzReadSpectral checks that readSpectral refuses what it cannot use
// (ErrCorrupt, never a panic) and that what it accepts is consistent.
func FuzzReadSpectral(f *testing.F) {
	dir := f.TempDir()
	good := &spectralTable{K: 2, IDs: []string{"a", "b"}, Rows: []float32{1, 0, 0, 1}, Fold: []float32{0.5, 0.25},
		Pred: []float32{1, 2, 3, 4, 5, 6}, PredDim: 3, Content: []bool{false, true},
		Profile: []int32{5}, ProfileRows: []float32{0.5, 0.5}}
	path := filepath.Join(dir, "seed")
	if err := writeSpectral(path, good); err != nil {
		f.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(raw[:len(raw)-3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), FileSpectral)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tbl, err := readSpectral(p, 2, 3)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v, want ErrCorrupt", err)
			}
			return
		}
		if len(tbl.Rows) != 2*len(tbl.IDs) || len(tbl.Fold) != len(tbl.IDs) || (tbl.Content != nil && len(tbl.Content) != len(tbl.IDs)) {
			t.Fatalf("accepted a table of %d ids, %d factors, %d fold weights", len(tbl.IDs), len(tbl.Rows), len(tbl.Fold))
		}
		for i, id := range tbl.IDs {
			if r := tbl.row(id); r < 0 || tbl.IDs[r] != id {
				t.Fatalf("id %d (%q) maps to row %d", i, id, r)
			}
		}
		if len(tbl.ProfileRows) != 2*len(tbl.Profile) {
			t.Fatalf("accepted %d profile buckets with %d values", len(tbl.Profile), len(tbl.ProfileRows))
		}
		dst := make([]float32, 2)
		tbl.profileFold(dst, tbl.Profile)
		if tbl.predict(dst, []float32{1, 1, 1}) != (tbl.PredDim == 3) {
			t.Fatalf("predictor of %d inputs answered wrongly", tbl.PredDim)
		}
	})
}

// TestRidge checks the ridge regression on a noiseless linear map: it
// recovers the map, up to the small penalty.
func TestRidge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const n, d, k = 400, 6, 3
	x, m0 := mat.NewDense(n, d, nil), mat.NewDense(d, k, nil)
	for i := range n {
		for j := range d {
			x.Set(i, j, rng.NormFloat64())
		}
	}
	for i := range d {
		for j := range k {
			m0.Set(i, j, rng.NormFloat64())
		}
	}
	var y mat.Dense
	y.Mul(x, m0)
	for _, tc := range []struct {
		rel, tol float64
	}{{1e-6, 1e-4}, {0.01, 0.05}} {
		p, err := ridge(x, &y, tc.rel)
		if err != nil {
			t.Fatal(err)
		}
		for i := range d {
			for j := range k {
				if d := math.Abs(p.At(i, j) - m0.At(i, j)); d > tc.tol*math.Max(1, math.Abs(m0.At(i, j))) {
					t.Fatalf("rel %g: coefficient (%d,%d) %.5f, want %.5f", tc.rel, i, j, p.At(i, j), m0.At(i, j))
				}
			}
		}
	}
}

// TestSpectralPredictor checks that a trained model's predictor gives a
// new ad of one interest factors closer to its interest's ads' rows than
// to the other interests', at the median length of the engaged ads' rows.
func TestSpectralPredictor(t *testing.T) {
	w := newSynthWorld(t, 80, 60, 4, 12, 1)
	cfg := tinyConfig()
	cfg.Steps = 30
	cfg.Model.Spectral = 4
	dir := t.TempDir()
	ck, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := readSpectral(filepath.Join(ck.Dir, FileSpectral), 4, cfg.Model.WithDefaults().EmbedDim)
	if err != nil {
		t.Fatal(err)
	}
	if tbl.PredDim != cfg.Model.WithDefaults().EmbedDim {
		t.Fatalf("predictor of %d inputs, want the encoder's %d", tbl.PredDim, cfg.Model.WithDefaults().EmbedDim)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	topic := adTopics(w)
	E := tbl.PredDim
	weight := float32(cfg.Model.WithDefaults().SpectralWeight)
	// Each ad embedded as of before any engagement, with the fold of the
	// rows of its format and its words (at least at the engaged rows'
	// median length), at the new-ad scale; the encoder's part does not
	// depend on it.
	embs, err := m.Embed(gocontext.Background(), w.store, w.ads, w.store.MinTS()-1)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := m.WithNewAdScale(2)
	if err != nil {
		t.Fatal(err)
	}
	embs2, err := m2.Embed(gocontext.Background(), w.store, w.ads, w.store.MinTS()-1)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range embs {
		keys := m.feat.adKeys(w.store.Entity(w.ads[i]))
		if len(keys) < 2 || keys[0].group != "format" || keys[1].group != textGroup {
			t.Fatalf("new ad %d: keys %v, want its format, then its words", i, keys)
		}
		want := make([]float32, 4)
		if !tbl.attrFold(want, keys) {
			t.Fatalf("new ad %d: no fold", i)
		}
		vek32.MulNumber_Inplace(want, weight)
		if !closeSlices(e[E:], want, 1e-6) || !slices.Equal(embs2[i][:E], e[:E]) {
			t.Fatalf("new ad %d: factors %v, want its format's row times the weight %v", i, e[E:], want)
		}
		vek32.MulNumber_Inplace(want, 2)
		if !closeSlices(embs2[i][E:], want, 1e-6) {
			t.Fatalf("new ad %d at scale 2: factors %v, want %v", i, embs2[i][E:], want)
		}
	}
	if m.NewAdScale() != 1 || m2.NewAdScale() != 2 {
		t.Errorf("new-ad scales %v, %v; want 1 and 2", m.NewAdScale(), m2.NewAdScale())
	}
	// Without attribute rows: predicted factors.
	m.feat.spec.Attr, m.feat.spec.attr = nil, nil
	var same, diff []float64
	if embs, err = m.Embed(gocontext.Background(), w.store, w.ads, w.store.MinTS()-1); err != nil {
		t.Fatal(err)
	}
	typical := float64(tbl.engagedMedian()) * float64(weight)
	for i, e := range embs {
		f := e[E:]
		if slices.Equal(f, make([]float32, len(f))) {
			t.Fatalf("ad %d: no predicted factors", i)
		}
		// At a typical engaged ad's length, not the regression's shrunken one.
		if n := float64(vek32.Norm(f)); math.Abs(n-typical) > 1e-4*typical {
			t.Fatalf("ad %d: predicted factors of norm %.5f, want the engaged rows' median %.5f times the weight", i, n, typical)
		}
		s, d := topicCosines(tbl, f, topic, w.adTopic[i], "")
		same, diff = append(same, s...), append(diff, d...)
	}
	ms, md := meanOf(same), meanOf(diff)
	t.Logf("mean cosine with the ad's interest's rows %.3f, with the others' %.3f", ms, md)
	if !(ms > md+0.2) {
		t.Errorf("mean cosine of a new ad's predicted factors with its interest's rows %.3f, with the others' %.3f", ms, md)
	}
}

// adTopics maps each ad's id in w to its interest.
func adTopics(w *synthWorld) map[string]int {
	topic := make(map[string]int, len(w.ads))
	for i, id := range w.ads {
		topic[w.store.Ref(id).ID] = w.adTopic[i]
	}
	return topic
}

// topicCosines returns the cosines of f with the rows of tbl's ads of
// interest want (by topic), and with the others' rows; the row of ad skip
// is left out.
func topicCosines(tbl *spectralTable, f []float32, topic map[string]int, want int, skip string) (same, diff []float64) {
	k := tbl.K
	for r, id := range tbl.IDs {
		if id == skip {
			continue
		}
		c := cosine32(f, tbl.Rows[r*k:(r+1)*k])
		if topic[id] == want {
			same = append(same, c)
		} else {
			diff = append(diff, c)
		}
	}
	return same, diff
}

// meanOf returns the mean of v.
func meanOf(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// TestSpectralContent checks the content pseudo-users of the spectral fit
// (Config.SpectralContent): an ad with no engagement gets a row from its
// content alone, marked so, near the rows of the ads whose words it
// shares; without content it has none. A trained model serves that row as
// the new ad's factors.
func TestSpectralContent(t *testing.T) {
	w := newSynthWorld(t, 80, 60, 4, 12, 1)
	words := topicWords[0]
	fresh, err := w.store.UpsertEntity(graph.Entity{Type: graph.NodeAd, ID: "fresh",
		Text: words[0] + " " + words[1] + " " + words[2] + " " + words[3]})
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig()
	cfg.Model.Spectral = 4
	cfg.Model.SpectralContent = 1
	mc := cfg.Model.WithDefaults()
	_, fitWith := contentFitter(t, w, mc)
	fit := func(alpha float64) *spectralTable { return fitWith(alpha, 0) }
	if tbl := fit(-1); tbl.row("fresh") >= 0 || tbl.Content != nil {
		t.Fatalf("without content: the unengaged ad has row %d, content marks %v; want none", tbl.row("fresh"), tbl.Content)
	}
	tbl := fit(1)
	r := tbl.row("fresh")
	if r < 0 || !tbl.contentOnly(r) {
		t.Fatalf("with content: the unengaged ad has row %d (content only %v), want a content row", r, tbl.contentOnly(r))
	}
	// Its length is a typical engaged ad's: the median of theirs.
	var norms []float64
	for i, id := range tbl.IDs {
		if id == "fresh" {
			continue
		}
		if tbl.contentOnly(int32(i)) {
			t.Errorf("engaged ad %s marked content only", id)
			continue
		}
		norms = append(norms, float64(vek32.Norm(tbl.Rows[i*4:(i+1)*4])))
	}
	slices.Sort(norms)
	row := tbl.Rows[int(r)*4 : (int(r)+1)*4]
	if got, want := float64(vek32.Norm(row)), norms[len(norms)/2]; math.Abs(got-want) > 1e-5 {
		t.Errorf("content row of norm %.5f, want the engaged rows' median %.5f", got, want)
	}
	same, diff := topicCosines(tbl, row, adTopics(w), 0, "fresh")
	ms, md := meanOf(same), meanOf(diff)
	t.Logf("mean cosine of the content row with its words' interest's rows %.3f, with the others' %.3f", ms, md)
	if !(ms > md+0.2) {
		t.Errorf("mean cosine of the content row with its words' interest's rows %.3f, with the others' %.3f; want the first well above", ms, md)
	}

	// Served: the new ad's appended factors are its content row times the weight.
	stored, got := trainServed(t, w, cfg, fresh)
	sr := stored.row("fresh")
	if sr < 0 || !stored.contentOnly(sr) {
		t.Fatalf("stored table: the unengaged ad has row %d (content only %v)", sr, stored.contentOnly(sr))
	}
	want := stored.Rows[int(sr)*4 : (int(sr)+1)*4]
	for j := range want {
		if math.Abs(float64(got[j])-mc.SpectralWeight*float64(want[j])) > 1e-5 {
			t.Fatalf("served factors %v, want the content row %v times %v", got, want, mc.SpectralWeight)
		}
	}
}

// TestFitProfile checks fitProfile on a hand-made fit: a bucket's row is
// the mean of the unit fold-ins of the users that have it, a bucket fewer
// than minUsers users share gets none, and content pseudo-users and users
// without engagement count for no bucket.
func TestFitProfile(t *testing.T) {
	tbl := &spectralTable{K: 2, IDs: []string{"a", "b"}, Rows: []float32{1, 0, 0, 1}, Fold: []float32{1, 1}}
	// Users 0-2 (store indices 10-12): 0 engages a twice as much as b, 1 only b,
	// 2 only a; row 3 is a content pseudo-user, past the users.
	// User 0 arrived a day before the fit, 1 at it, 2 two days before.
	const day = int64(24 * time.Hour / time.Millisecond)
	asOf := 10 * day
	ents := []spectralEntry{{0, 0, 2, asOf - day}, {0, 1, 1, asOf}, {1, 1, 0.5, asOf}, {2, 0, 3, asOf - 2*day}, {3, 1, 9, 0}}
	userIdx := []uint32{10, 11, 12}
	buckets := map[uint32][]int32{10: {7, 8}, 11: {7}, 12: {7, 9}}
	tbl.fitProfile(ents, userIdx, func(u uint32) []int32 { return buckets[u] }, 2, -1, asOf)
	tbl.buildIndex()
	if !slices.Equal(tbl.Profile, []int32{7}) {
		t.Fatalf("profile buckets %v, want [7] (8 and 9 have one user each)", tbl.Profile)
	}
	s := float32(1 / math.Sqrt(5))
	want := []float32{(2*s + 0 + 1) / 3, (s + 1 + 0) / 3}
	for j := range want {
		if math.Abs(float64(tbl.ProfileRows[j]-want[j])) > 1e-6 {
			t.Fatalf("row of bucket 7 %v, want the mean of the unit fold-ins %v", tbl.ProfileRows, want)
		}
	}
	dst := make([]float32, 2)
	if !tbl.profileFold(dst, []int32{9, 7}) || math.Abs(cosine32(dst, want)-1) > 1e-6 || math.Abs(float64(vek32.Norm(dst))-1) > 1e-6 {
		t.Errorf("fold of buckets 9, 7: %v, want the unit row of 7", dst)
	}
	if tbl.profileFold(dst, []int32{8, 9}) || vek32.Norm(dst) != 0 {
		t.Errorf("fold of buckets without rows: %v, want zeros and false", dst)
	}
	// Weighed by arrival with a one-day half-life: 1/2, 1 and 1/4.
	tbl.fitProfile(ents, userIdx, func(u uint32) []int32 { return buckets[u] }, 2, 1, asOf)
	want = []float32{(0.5*2*s + 0 + 0.25) / 3, (0.5*s + 1 + 0) / 3}
	for j := range want {
		if math.Abs(float64(tbl.ProfileRows[j]-want[j])) > 1e-6 {
			t.Fatalf("row of bucket 7 weighed by arrival %v, want %v", tbl.ProfileRows, want)
		}
	}
	tbl.fitProfile(ents, userIdx, func(u uint32) []int32 { return buckets[u] }, 4, -1, asOf)
	if len(tbl.Profile) != 0 || len(tbl.ProfileRows) != 0 {
		t.Errorf("at least 4 users: buckets %v, want none", tbl.Profile)
	}
}

// TestSpectralProfile checks the profile factors end to end on a world
// whose users' segment attribute names their interest: a new user with a
// segment and no history gets factors near its interest's ads' rows, from
// the trained model too; a segment the fit never saw, or a fit without
// profiles, gives it none.
func TestSpectralProfile(t *testing.T) {
	w := newSynthWorld(t, 80, 60, 4, 12, 1)
	for u, id := range w.users {
		attrs := map[string]string{"segment": fmt.Sprintf("s%d", u%4)}
		if u < 3 {
			attrs["rare"] = fmt.Sprintf("r%d", u) // one user each: below the threshold
		}
		if _, err := w.store.UpsertEntity(graph.Entity{Type: graph.NodeUser, ID: w.store.Ref(id).ID, Attrs: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	fresh, err := w.store.UpsertEntity(graph.Entity{Type: graph.NodeUser, ID: "fresh", Attrs: map[string]string{"segment": "s0"}})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := w.store.UpsertEntity(graph.Entity{Type: graph.NodeUser, ID: "stranger", Attrs: map[string]string{"segment": "unseen"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig()
	cfg.Model.Spectral = 4
	cfg.Model.SpectralProfile = 5
	mc := cfg.Model.WithDefaults()
	feat, fitWith := contentFitter(t, w, mc)
	sm := graph.NewSampler(w.store, graph.SamplerOptions{})
	fit := func(minProfile int) *spectralTable { return fitWith(-1, minProfile) }
	if tbl := fit(0); tbl.Profile != nil || tbl.ProfileRows != nil {
		t.Fatalf("without profiles: %d profile rows, want none", len(tbl.Profile))
	}
	tbl := fit(5)
	bucketsOf := func(attrs map[string]string) []int32 {
		return feat.profileBuckets(&nodeFeatures{attrs: attrBuckets(graph.NodeUser, attrs, mc.AttrBkts, mc.AttrLen)})
	}
	var segments []int32
	for s := range 4 {
		for _, b := range bucketsOf(map[string]string{"segment": fmt.Sprintf("s%d", s)}) {
			segments = append(segments, b)
			if _, ok := slices.BinarySearch(tbl.Profile, b); !ok {
				t.Errorf("segment s%d: bucket %d has no row", s, b)
			}
		}
	}
	for u := range 3 {
		for _, b := range bucketsOf(map[string]string{"rare": fmt.Sprintf("r%d", u)}) {
			if _, ok := slices.BinarySearch(tbl.Profile, b); ok && !slices.Contains(segments, b) {
				t.Errorf("a value one user has (r%d): bucket %d has a row", u, b)
			}
		}
	}

	topics := adTopics(w)
	check := func(name string, f []float32) {
		t.Helper()
		same, diff := topicCosines(tbl, f, topics, 0, "")
		ms, md := meanOf(same), meanOf(diff)
		t.Logf("%s: mean cosine with interest 0's rows %.3f, with the others' %.3f", name, ms, md)
		if !(ms > md+0.2) {
			t.Errorf("%s: mean cosine with its segment's interest's rows %.3f, with the others' %.3f; want the first well above", name, ms, md)
		}
	}
	feat.spec = tbl
	factors := func(id graph.NodeID) []float32 {
		t.Helper()
		sg := sm.Sample(id, w.store.MaxTS(), graph.ViewTeacher, 1)
		if len(sg.History) != 0 {
			t.Fatalf("%v has a history", id)
		}
		bt, err := feat.featurize(w.store, []*graph.Subgraph{sg}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return bt.spec[:4]
	}
	check("featurised new user", factors(fresh))
	if got := factors(stranger); vek32.Norm(got) != 0 {
		t.Errorf("a segment no user with a history has: factors %v, want zeros", got)
	}

	// Served: the trained model's stored table has the profile rows, and the
	// new user's appended factors are its profile fold-in times the weight.
	stored, got := trainServed(t, w, cfg, fresh)
	if len(stored.Profile) == 0 {
		t.Fatal("the stored table has no profile rows")
	}
	want := make([]float32, 4)
	if !stored.profileFold(want, bucketsOf(map[string]string{"segment": "s0"})) {
		t.Fatal("the stored table has no row for segment s0")
	}
	for j := range want {
		if math.Abs(float64(got[j])-mc.SpectralWeight*float64(want[j])) > 1e-5 {
			t.Fatalf("served factors %v, want the profile fold-in %v times %v", got, want, mc.SpectralWeight)
		}
	}
}

// contentFitter returns a featuriser of mc and a fit of w's spectral
// factors (4 of them) with content weight alpha and profile threshold
// minProfile, over that featuriser's content buckets.
func contentFitter(t *testing.T, w *synthWorld, mc Config) (*featurizer, func(alpha float64, minProfile int) *spectralTable) {
	t.Helper()
	feat, err := newFeaturizer(mc)
	if err != nil {
		t.Fatal(err)
	}
	sm := graph.NewSampler(w.store, graph.SamplerOptions{})
	return feat, func(alpha float64, minProfile int) *spectralTable {
		t.Helper()
		fit := testFit(4)
		fit.content, fit.minProfile, fit.profileDays = alpha, minProfile, -1
		tbl, err := fitSpectral(gocontext.Background(), w.store, sm, fit, w.store.MaxTS(), 1, nil, feat.contentBuckets(w.store), nil)
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
}

// trainServed trains cfg on w for 3 steps and returns the version's stored
// spectral table (4 factors) and the factors the loaded model serves for id.
func trainServed(t *testing.T, w *synthWorld, cfg TrainConfig, id graph.NodeID) (*spectralTable, []float32) {
	t.Helper()
	cfg.Steps = 3
	mc := cfg.Model.WithDefaults()
	dir := t.TempDir()
	ck, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := readSpectral(filepath.Join(ck.Dir, FileSpectral), 4, mc.EmbedDim)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	embs, err := m.Embed(gocontext.Background(), w.store, []graph.NodeID{id}, w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	return stored, embs[0][mc.EmbedDim:]
}

// TestRefit checks that a refit model's factors see nothing after its
// time: refit on the whole store as of a cut, it embeds every ad as a
// model refit on the store cut there does, and unlike the trained one
// (fitted on everything).
func TestRefit(t *testing.T) {
	ctx := gocontext.Background()
	w := newSynthWorld(t, 30, 40, 4, 8, 5)
	cfg := tinyConfig()
	cfg.Model.Spectral, cfg.Steps = 4, 2
	dir := t.TempDir()
	if _, err := Train(ctx, w.store, cfg, dir, nil); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cut := (w.store.MinTS() + w.store.MaxTS()) / 2
	whole, err := m.Refit(ctx, w.store, cut)
	if err != nil {
		t.Fatal(err)
	}
	past, err := m.Refit(ctx, w.store.Until(cut), cut)
	if err != nil {
		t.Fatal(err)
	}
	embed := func(m *Model, store *graph.Store) [][]float32 {
		t.Helper()
		e, err := m.Embed(ctx, store, w.ads, cut)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	same := func(a, b [][]float32) bool { return slices.EqualFunc(a, b, slices.Equal[[]float32]) }
	got, want, trained := embed(whole, w.store), embed(past, w.store.Until(cut)), embed(m, w.store)
	if !same(want, got) {
		t.Errorf("refit on the whole store embeds the ads otherwise than the refit on the store as of the cut")
	}
	if same(trained, got) {
		t.Errorf("the refit embeds as the trained model, whose factors saw every event")
	}
	// Refit as of the newest event, the model embeds every user and ad as
	// trained.
	again, err := m.Refit(ctx, w.store, w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	ids := append(slices.Clone(w.users), w.ads...)
	a, err := again.Embed(ctx, w.store, ids, w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Embed(ctx, w.store, ids, w.store.MaxTS())
	if err != nil {
		t.Fatal(err)
	}
	if !same(a, b) {
		t.Errorf("refit as of the newest event embeds otherwise than the trained model")
	}
	if vek32.Norm(a[0][cfg.Model.EmbedDim:]) == 0 {
		t.Errorf("a user with a history has no spectral factors after the refit")
	}
	if m.Calibration() != nil {
		t.Errorf("a version without calibration has one: %+v", m.Calibration())
	}
}

// TestWriteCalibration checks that a version carries its calibration only
// once its checksums list it, and that a damaged one fails to load.
func TestWriteCalibration(t *testing.T) {
	ctx := gocontext.Background()
	w := newSynthWorld(t, 20, 30, 3, 6, 6)
	cfg := tinyConfig()
	cfg.Steps = 1
	ck, err := Train(ctx, w.store, cfg, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Calibration{NewAdScale: 2, NewAdPoints: []CalibrationPoint{{NewAdScale: 2, Recall: 0.5, NDCG: 0.5}},
		PriorWeight: 1.5, CoEngagementWeight: 5, Cut: 7, Users: 3, K: 20,
		Points: []CalibrationPoint{{PriorWeight: 1.5, Recall: 0.5, NDCG: 0.25}}}
	path := filepath.Join(ck.Dir, FileCalibration)
	// A calibration file the checksums do not list (a crash between the
	// two renames) is not read.
	if err := writeJSON(path, c); err != nil {
		t.Fatal(err)
	}
	if m, err := Load(ck.Dir); err != nil || m.Calibration() != nil {
		t.Fatalf("Load with an unlisted calibration = %v; calibration %+v, want none", err, m.Calibration())
	}
	if err := WriteCalibration(ck.Dir, c); err != nil {
		t.Fatal(err)
	}
	m, err := Load(ck.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Calibration(); !reflect.DeepEqual(&c, got) {
		t.Errorf("loaded calibration %+v, want %+v", got, c)
	}
	if m.NewAdScale() != 2 {
		t.Errorf("loaded version's new-ad scale %v, want the calibrated 2", m.NewAdScale())
	}
	for _, bad := range []float32{-1, -0.5} { // JSON holds no NaN or infinity
		b := c
		b.NewAdScale = bad
		if err := WriteCalibration(ck.Dir, b); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(ck.Dir); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Load with new-ad scale %v: %v, want ErrCorrupt", bad, err)
		}
	}
	if err := WriteCalibration(ck.Dir, c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"prior_weight": 9}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ck.Dir); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load with a changed calibration: %v, want ErrCorrupt", err)
	}
}
