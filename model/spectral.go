package model

import (
	"cmp"
	gocontext "context"
	"encoding/gob"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/viterin/vek/vek32"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"

	"github.com/hir-ads/hir/graph"
)

// FileSpectral holds a version's spectral factors (Config.Spectral) in
// DIR/models/vN/.
const FileSpectral = "spectral.gob"

const spectralMagic = "hir-spectral-v1"

// spectralIters is the number of subspace iterations of fitSpectral.
const spectralIters = 5

// spectralTable holds the spectral factors of the ads: the top Config.Spectral
// eigenvectors of the ad-ad co-engagement matrix A^T A, where A is the
// user-ad engagement matrix (graph.Sampler.HistoryPrior times
// 2^(-age/Config.SpectralHalfLifeDays)) normalised by both sides' weighted degrees,
// A[u,a] = w(u,a) / sqrt(d(u) d(a)) (LightGCN's normalisation). An ad's row
// is its coordinates in that subspace, each factor scaled by its singular
// value, every row divided by the longest's norm; two ads engaged by the
// same users have rows of close directions. A user folds in the rows of its
// history (fold), so u·a is a smoothed sum of the user's history's
// co-engagement with a: the collaborative signal of item-based filtering,
// appended to the encoder's embeddings (Config.Spectral) at no training
// cost. Ads not in the table (new since the fit) have no row. Immutable
// once built.
type spectralTable struct {
	K    int       // factors per row
	IDs  []string  // external ad ids, by row
	Rows []float32 // [len(IDs), K]
	// Fold holds each row's fold-in weight 1/sqrt(d(a)), the ad side of
	// the normalisation.
	Fold []float32
	// Pred, when set, predicts the factors of an ad that has none (new,
	// or new since the fit) from its encoder embedding: [PredDim, K]
	// row-major, PredDim = Config.EmbedDim (see fitSpectralPredictor).
	Pred    []float32
	PredDim int
	// Content marks the rows of ads that had no engagement when the
	// factors were fitted: their rows come from their content alone
	// (fitSpectral's content pseudo-users), so they hold at any time. Nil
	// (a table fitted without content): none.
	Content []bool
	// Profile lists, in increasing order, the profile buckets (a user's
	// content buckets: its attribute values and words) that have a row in
	// ProfileRows [len(Profile), K]: the mean of the unit fold-ins of the
	// users with a history at the fit that have the bucket (at least
	// Config.SpectralProfile of them). A user without history folds in its
	// buckets' rows (profileFold): what the users who share its profile
	// engage with. Nil: none.
	Profile     []int32
	ProfileRows []float32
	// Attr lists, in increasing order, the keys (adKeys: an ad's
	// attribute values, such as its campaign, advertiser, brand or
	// category, and the words of its text) of the ads engaged at the fit,
	// AttrRows [len(Attr), K] the mean of those ads' rows and AttrN how
	// many ads share each. An ad without factors of its own (new, or new
	// since the fit) folds in the rows of its keys (attrFold): what the
	// users of its campaign's and advertiser's other ads, and of the ads
	// that share its words, engage with. Nil: none.
	Attr     []uint64
	AttrRows []float32
	AttrN    []int32
	// Groups names the key groups (an attribute's name, or textGroup),
	// in increasing order; AttrGroup gives each key's group (an index of
	// Groups) and GroupW each group's weight in a new ad's fold, fitted
	// on the engaged ads (fitGroupWeights): how well the group's rows,
	// each ad's own left out, predict an engaged ad's row. Nil (a table
	// written before the groups existed): every key weighted by the
	// inverse of its count (attrFoldByCount).
	Groups    []string
	AttrGroup []int32
	GroupW    []float32

	first []int64 // each row's first engagement (unix ms); set by fitSpectral, not stored

	index   map[string]int32 // ad id -> row
	profile map[int32]int32  // profile bucket -> row of ProfileRows
	attr    map[uint64]int32 // attribute key -> row of AttrRows
	typical float32          // median norm of the engaged ads' rows (engagedMedian)
	engaged int              // the rows not from content alone
	// newAd scales the factors of new ads (attrFold, predict): how a new
	// ad's engagement compares with the engaged ads' it is derived from,
	// which depends on the data (retrieval.Calibrate chooses it;
	// Model.WithNewAdScale). 0: 1.
	newAd float32
}

// contentOnly reports whether row r came from the ad's content alone.
func (t *spectralTable) contentOnly(r int32) bool {
	return r >= 0 && int(r) < len(t.Content) && t.Content[r]
}

// row returns ad id's row index, or -1.
func (t *spectralTable) row(id string) int32 {
	if r, ok := t.index[id]; ok {
		return r
	}
	return -1
}

func (t *spectralTable) buildIndex() {
	t.index = make(map[string]int32, len(t.IDs))
	for i, id := range t.IDs {
		t.index[id] = int32(i)
	}
	t.profile = make(map[int32]int32, len(t.Profile))
	for i, b := range t.Profile {
		t.profile[b] = int32(i)
	}
	t.attr = make(map[uint64]int32, len(t.Attr))
	for i, key := range t.Attr {
		t.attr[key] = int32(i)
	}
	t.typical = t.engagedMedian()
	t.engaged = 0
	for i := range t.IDs {
		if !t.contentOnly(int32(i)) {
			t.engaged++
		}
	}
}

// engagedMedian returns the median norm of the rows of engaged ads (those
// not from content alone), or 0 when there are none.
func (t *spectralTable) engagedMedian() float32 {
	norms := make([]float32, 0, len(t.IDs))
	for i := range t.IDs {
		if !t.contentOnly(int32(i)) {
			norms = append(norms, vek32.Norm(t.Rows[i*t.K:(i+1)*t.K]))
		}
	}
	if len(norms) == 0 {
		return 0
	}
	slices.Sort(norms)
	return norms[len(norms)/2]
}

// profileFold writes into dst[:K] the L2-normalised mean of the rows of
// buckets (a user's profile buckets) that have one and reports whether
// any had (dst stays zero when none has).
func (t *spectralTable) profileFold(dst []float32, buckets []int32) bool {
	dst = dst[:t.K]
	clear(dst)
	folded := false
	for _, b := range buckets {
		r, ok := t.profile[b]
		if !ok {
			continue
		}
		folded = true
		vek32.Add_Inplace(dst, t.ProfileRows[int(r)*t.K:(int(r)+1)*t.K])
	}
	normalize(dst)
	return folded
}

// attrFold writes into dst[:K] the factors of an ad without a row of its
// own from its keys (adKeys): in each group the mean of its keys' rows
// (AttrRows), a key weighted by its rarity (keyWeight; in an attribute's
// group an ad has one value), the groups' means summed with their weights
// (GroupW); lengthened to the median length of the engaged ads' rows
// when shorter (as a predicted row is, predict: a row's length holds the
// engagement an ad has had the time to earn, and the ads that share a
// launch's values may be recent launches themselves); then times the
// new-ad scale (newAd). So a new creative reads what the users of its
// campaign's ads engage with, where the campaign's rows predict an
// engaged ad's row better than its release date's do. It reports whether
// the fold has any weight (dst stays zero when none has).
func (t *spectralTable) attrFold(dst []float32, keys []adKey) bool {
	dst = dst[:t.K]
	clear(dst)
	if t.GroupW == nil {
		if !t.attrFoldByCount(dst, keys) {
			return false
		}
	} else {
		sums := make([]float32, len(t.Groups))
		for _, k := range keys {
			if r, ok := t.attr[k.key]; ok {
				sums[t.AttrGroup[r]] += keyWeight(t.AttrN[r], t.engaged)
			}
		}
		folded := false
		for _, k := range keys {
			r, ok := t.attr[k.key]
			if !ok {
				continue
			}
			g := t.AttrGroup[r]
			w := t.GroupW[g] * keyWeight(t.AttrN[r], t.engaged) / sums[g]
			if w <= 0 {
				continue
			}
			folded = true
			for j, v := range t.AttrRows[int(r)*t.K : (int(r)+1)*t.K] {
				dst[j] += w * v
			}
		}
		if !folded {
			return false
		}
	}
	if n := vek32.Norm(dst); n > 0 && n < t.typical {
		vek32.MulNumber_Inplace(dst, t.typical/n)
	}
	vek32.MulNumber_Inplace(dst, t.newAdScale())
	return true
}

// keyWeight is the weight of a key shared by n of the engaged ads in its
// group's mean (attrFold, fitGroupWeights): log(1 + engaged/n), as
// inverse document frequency weighs a word, so that a word every ad has
// counts for little.
func keyWeight(n int32, engaged int) float32 {
	return float32(math.Log1p(float64(engaged) / float64(max(n, 1))))
}

// attrFoldByCount writes into dst the fold of a table without key groups
// (GroupW nil): the mean of the keys' rows, each weighted by the inverse
// of the number of engaged ads that share it. It reports whether any key
// had a row.
func (t *spectralTable) attrFoldByCount(dst []float32, keys []adKey) bool {
	var sum float32
	for _, k := range keys {
		r, ok := t.attr[k.key]
		if !ok {
			continue
		}
		w := 1 / float32(t.AttrN[r])
		sum += w
		for j, v := range t.AttrRows[int(r)*t.K : (int(r)+1)*t.K] {
			dst[j] += w * v
		}
	}
	if sum == 0 {
		return false
	}
	vek32.MulNumber_Inplace(dst, 1/sum)
	return true
}

// newAdScale returns the scale of a new ad's factors (newAd; 0 reads 1).
func (t *spectralTable) newAdScale() float32 {
	if t.newAd > 0 {
		return t.newAd
	}
	return 1
}

// withNewAdScale returns a copy of t whose new ads' factors (attrFold,
// predict) are scaled by s; the copy shares t's rows.
func (t *spectralTable) withNewAdScale(s float32) *spectralTable {
	c := *t
	c.newAd = s
	return &c
}

// fitAttr sets t.Attr, t.AttrRows and t.AttrN from the fitted rows of
// the engaged ads (rows below engaged; adIdx gives each row's ad): each
// key of those ads (keys) gets the mean of the rows of the ads that have
// it; then the key groups and their weights (fitGroupWeights).
func (t *spectralTable) fitAttr(adIdx []uint32, engaged int, keys func(ad uint32) []adKey) {
	sums := newRowSums[uint64](t.K)
	group := make(map[uint64]string)
	for r := range engaged {
		for _, k := range keys(adIdx[r]) {
			sums.add(k.key, t.Rows[r*t.K:(r+1)*t.K])
			group[k.key] = k.group
		}
	}
	t.Attr, t.AttrRows, t.AttrN = sums.means(1)
	names := make(map[string]int32)
	for _, g := range group {
		names[g] = 0
	}
	t.Groups = slices.Sorted(maps.Keys(names))
	for i, g := range t.Groups {
		names[g] = int32(i)
	}
	t.AttrGroup = make([]int32, len(t.Attr))
	for i, key := range t.Attr {
		t.AttrGroup[i] = names[group[key]]
	}
	t.buildIndex()
	t.GroupW = t.fitGroupWeights(adIdx, engaged, keys)
}

// groupFitAds bounds the engaged ads fitGroupWeights reads.
const groupFitAds = 20000

// fitGroupWeights fits each key group's weight in a new ad's fold: the
// non-negative least squares of an engaged ad's row on its groups' means
// (attrFold's, each key's row with the ad's own left out, so that a
// value only this ad has says nothing), over up to groupFitAds of the
// engaged ads (every n-th). A group whose rows point where the ad's users
// are (a campaign, a brand, the words of the text) gets a large weight,
// one whose values are shared by chance (a release date) a small one.
// t.index must be built.
func (t *spectralTable) fitGroupWeights(adIdx []uint32, engaged int, keys func(ad uint32) []adKey) []float32 {
	g, k := len(t.Groups), t.K
	if g == 0 || engaged < 2 {
		return nil
	}
	step := max(1, engaged/groupFitAds)
	a, b := make([]float64, g*g), make([]float64, g)
	means, sums := make([]float32, g*k), make([]float32, g)
	loo := make([]float32, k)
	for r := 0; r < engaged; r += step {
		row := t.Rows[r*k : (r+1)*k]
		clear(means)
		clear(sums)
		ks := keys(adIdx[r])
		for pass := range 2 {
			for _, key := range ks {
				i, ok := t.attr[key.key]
				if !ok || t.AttrN[i] < 2 {
					continue
				}
				gi, n := t.AttrGroup[i], t.AttrN[i]
				w := keyWeight(n-1, engaged-1)
				if pass == 0 {
					sums[gi] += w
					continue
				}
				// The key's mean over the other ads that have it.
				vek32.MulNumber_Into(loo, t.AttrRows[int(i)*k:(int(i)+1)*k], float32(n))
				vek32.Sub_Inplace(loo, row)
				vek32.MulNumber_Inplace(loo, w/(float32(n-1)*sums[gi]))
				vek32.Add_Inplace(means[int(gi)*k:(int(gi)+1)*k], loo)
			}
		}
		for i := range g {
			mi := means[i*k : (i+1)*k]
			b[i] += float64(vek32.Dot(mi, row))
			for j := range g {
				a[i*g+j] += float64(vek32.Dot(mi, means[j*k:(j+1)*k]))
			}
		}
	}
	return nnls(a, b, g)
}

// nnls solves min ||Xw - y||² subject to w >= 0 from the normal equations
// a = XᵀX [n, n] and b = Xᵀy, with a ridge of 1e-6 of a's mean diagonal,
// by an active set: the least squares over the free variables, the most
// negative of them fixed at zero, until none is negative.
func nnls(a, b []float64, n int) []float32 {
	ridge := 0.0
	for i := range n {
		ridge += a[i*n+i]
	}
	ridge = 1e-6*ridge/float64(n) + 1e-12
	free := make([]bool, n)
	for i := range free {
		free[i] = a[i*n+i] > 0
	}
	out := make([]float32, n)
	for {
		var idx []int
		for i, f := range free {
			if f {
				idx = append(idx, i)
			}
		}
		clear(out)
		if len(idx) == 0 {
			return out
		}
		m := mat.NewSymDense(len(idx), nil)
		v := mat.NewVecDense(len(idx), nil)
		for p, i := range idx {
			v.SetVec(p, b[i])
			for q, j := range idx {
				m.SetSym(p, q, a[i*n+j])
			}
			m.SetSym(p, p, a[i*n+i]+ridge)
		}
		var ch mat.Cholesky
		var w mat.VecDense
		if !ch.Factorize(m) || ch.SolveVecTo(&w, v) != nil {
			return out
		}
		worst, at := 0.0, -1
		for p, i := range idx {
			if x := w.AtVec(p); x < worst {
				worst, at = x, i
			}
			out[i] = float32(max(w.AtVec(p), 0))
		}
		if at < 0 {
			return out
		}
		free[at] = false
	}
}

// rowSums sums rows of K floats by key, counting them (fitAttr,
// fitProfile).
type rowSums[K cmp.Ordered] struct {
	k      int
	sums   map[K][]float32
	counts map[K]int32
}

func newRowSums[K cmp.Ordered](k int) *rowSums[K] {
	return &rowSums[K]{k: k, sums: make(map[K][]float32), counts: make(map[K]int32)}
}

// add adds row to key's sum.
func (r *rowSums[K]) add(key K, row []float32) {
	sum := r.sums[key]
	if sum == nil {
		sum = make([]float32, r.k)
		r.sums[key] = sum
	}
	vek32.Add_Inplace(sum, row)
	r.counts[key]++
}

// means returns, in increasing order, the keys with at least minCount
// rows, their mean rows [len(keys), K] and their counts.
func (r *rowSums[K]) means(minCount int32) (keys []K, rows []float32, counts []int32) {
	for key, n := range r.counts {
		if n >= minCount {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	rows, counts = make([]float32, len(keys)*r.k), make([]int32, len(keys))
	for i, key := range keys {
		counts[i] = r.counts[key]
		vek32.MulNumber_Into(rows[i*r.k:(i+1)*r.k], r.sums[key], 1/float32(counts[i]))
	}
	return keys, rows, counts
}

// fold writes into dst[:K] the L2-normalised fold-in of rows (each row
// weighted by w times its Fold weight; a row of -1 is skipped) and reports
// whether any row was folded (dst stays zero when none is).
func (t *spectralTable) fold(dst []float32, rows []int32, w []float32) bool {
	dst = dst[:t.K]
	clear(dst)
	folded := false
	for i, r := range rows {
		if r < 0 {
			continue
		}
		folded = true
		s := w[i] * t.Fold[r]
		for j, v := range t.Rows[int(r)*t.K : (int(r)+1)*t.K] {
			dst[j] += s * v
		}
	}
	normalize(dst)
	return folded
}

// spectralFit holds what shapes a fit of the spectral factors: the
// Spectral* fields of a Config (Config.spectralFit).
type spectralFit struct {
	k            int     // factors per row (Spectral)
	halfLifeDays float64 // an engagement's half-life; <= 0: no decay (SpectralHalfLifeDays)
	content      float64 // content's weight; <= 0: none (SpectralContent)
	minProfile   int     // users a profile row needs; <= 0: none (SpectralProfile)
	profileDays  float64 // a user's half-life in the profile rows (SpectralProfileDays)
}

// spectralFit returns the fit c's Spectral* fields describe.
func (c Config) spectralFit() spectralFit {
	return spectralFit{k: c.Spectral, halfLifeDays: c.SpectralHalfLifeDays, content: c.SpectralContent,
		minProfile: c.SpectralProfile, profileDays: c.SpectralProfileDays}
}

// spectralEntry is one entry of the matrix fitSpectral factorises: row u
// (a user, or a content pseudo-user after the users), ad row a, weight w.
type spectralEntry struct {
	u, a int32
	w    float64
	ts   int64
}

// fitSpectral computes the spectral factors of the user-ad engagements of
// store visible at asOf (see spectralTable), k per ad, by subspace iteration
// from a seeded random start, with a Rayleigh-Ritz step that orders the
// factors by eigenvalue. With content (Config.SpectralContent > 0), every
// ad of the store with content also has a row: each of its content buckets
// (content(ad), text and attribute buckets in one space) is a pseudo-user
// that engages with it at weight alpha spread over its buckets, so that the
// factorisation also reads what ads share in text and attributes, and an
// ad without engagement yet gets its row from its content (the buckets'
// degree normalisation weighs a bucket down the more ads share it, as
// inverse document frequency does). With minProfile > 0, users' profile
// buckets (content of a user) get rows too (fitProfile, each user weighed
// by how recently it arrived, profileDays). With prev (the table of the version a run resumes
// from) of the same k, the factors are rotated onto prev's on the ads both
// know (orthogonal Procrustes), so that an ad's factors stay put from one
// version to the next (a served vector kept by a client, or two versions
// compared, read in the same coordinates); otherwise each factor's largest
// entry is made positive. Deterministic for the same edges and seed.
func fitSpectral(ctx gocontext.Context, store *graph.Store, sm *graph.Sampler, fit spectralFit, asOf int64, seed uint64, prev *spectralTable,
	content func(ad graph.NodeID) []int32, keys func(ad graph.NodeID) []adKey) (*spectralTable, error) {
	k, alpha := fit.k, fit.content
	nUsers, nAds := store.NumNodes(graph.NodeUser), store.NumNodes(graph.NodeAd)
	userRow, adRow := make([]int32, nUsers), make([]int32, nAds)
	for i := range userRow {
		userRow[i] = -1
	}
	for i := range adRow {
		adRow[i] = -1
	}
	var ents []spectralEntry
	var adIdx, userIdx []uint32
	var first []int64
	nu := int32(0)
	decay := func(int64) float64 { return 1 }
	if fit.halfLifeDays > 0 {
		halfMS := fit.halfLifeDays * float64((24 * time.Hour).Milliseconds())
		decay = func(ts int64) float64 { return math.Exp2(-float64(max(asOf-ts, 0)) / halfMS) }
	}
	store.ForEachEdge(store.MinTS(), asOf+1, func(src graph.NodeID, e graph.Edge) bool {
		if src.Type != graph.NodeUser || e.Nbr.Type != graph.NodeAd || int(src.Idx) >= nUsers || int(e.Nbr.Idx) >= nAds {
			return true
		}
		p := sm.HistoryPrior(e.Type)
		if p <= 0 {
			return true
		}
		if userRow[src.Idx] < 0 {
			userRow[src.Idx] = nu
			userIdx = append(userIdx, src.Idx)
			nu++
		}
		if adRow[e.Nbr.Idx] < 0 {
			adRow[e.Nbr.Idx] = int32(len(adIdx))
			adIdx = append(adIdx, e.Nbr.Idx)
			first = append(first, e.TS)
		}
		first[adRow[e.Nbr.Idx]] = min(first[adRow[e.Nbr.Idx]], e.TS)
		w := float64(p) * decay(e.TS)
		ents = append(ents, spectralEntry{userRow[src.Idx], adRow[e.Nbr.Idx], w, e.TS})
		return true
	})
	engaged := len(adIdx)
	if content != nil && alpha > 0 {
		bucketRow := make(map[int32]int32)
		for idx := range uint32(nAds) {
			bs := content(graph.NodeID{Type: graph.NodeAd, Idx: idx})
			if len(bs) == 0 {
				continue
			}
			if adRow[idx] < 0 {
				adRow[idx] = int32(len(adIdx))
				adIdx = append(adIdx, idx)
				first = append(first, asOf+1)
			}
			w := alpha / float64(len(bs))
			for _, b := range bs {
				r, ok := bucketRow[b]
				if !ok {
					r = nu
					bucketRow[b] = r
					nu++
				}
				ents = append(ents, spectralEntry{r, adRow[idx], w, 0})
			}
		}
	}
	na := len(adIdx)
	t := &spectralTable{K: k, IDs: make([]string, na), Rows: make([]float32, na*k), Fold: make([]float32, na), first: first}
	if na > engaged {
		t.Content = make([]bool, na)
		for r := engaged; r < na; r++ {
			t.Content[r] = true
		}
	}
	for r, idx := range adIdx {
		t.IDs[r] = store.Ref(graph.NodeID{Type: graph.NodeAd, Idx: idx}).ID
	}
	p := min(k, na)
	if p == 0 {
		t.buildIndex()
		return t, nil
	}
	du, da := make([]float64, nu), make([]float64, na)
	for _, e := range ents {
		du[e.u] += e.w
		da[e.a] += e.w
	}
	for i := range ents {
		ents[i].w /= math.Sqrt(du[ents[i].u] * da[ents[i].a])
	}
	for a, d := range da {
		t.Fold[a] = float32(1 / math.Sqrt(d))
	}
	// mul sets dst = A src (users x p), or with t dst = A^T src (ads x p).
	mul := func(dst, src *mat.Dense, t bool) {
		dd, sd := dst.RawMatrix().Data, src.RawMatrix().Data
		clear(dd)
		for _, e := range ents {
			i, j := int(e.u), int(e.a)
			if t {
				i, j = j, i
			}
			dr := dd[i*p : (i+1)*p]
			for c, v := range sd[j*p : (j+1)*p] {
				dr[c] += e.w * v
			}
		}
	}
	b := mat.NewDense(int(max(nu, 1)), p, nil)
	y := mat.NewDense(na, p, nil)
	rng := rand.New(rand.NewPCG(seed, 0x5eed5bec))
	q := mat.NewDense(na, p, nil)
	for i := range q.RawMatrix().Data {
		q.RawMatrix().Data[i] = rng.NormFloat64()
	}
	// orth replaces m by the thin Q of its QR factorisation (LAPACK's
	// Householder QR, then the first p columns of Q).
	var tau, work []float64
	orth := func(m *mat.Dense) {
		g := m.RawMatrix()
		tau = slices.Grow(tau[:0], p)[:p]
		work = slices.Grow(work[:0], 1)[:1]
		lapack64.Geqrf(g, tau, work, -1)
		work = slices.Grow(work[:0], int(work[0]))[:int(work[0])]
		lapack64.Geqrf(g, tau, work, len(work))
		lapack64.Orgqr(g, tau, work[:1], -1)
		work = slices.Grow(work[:0], int(work[0]))[:int(work[0])]
		lapack64.Orgqr(g, tau, work, len(work))
	}
	orth(q)
	for range spectralIters {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		mul(b, q, false)
		mul(y, b, true)
		orth(y)
		q, y = y, q
	}
	// Rayleigh-Ritz: the eigenvectors of q^T A^T A q, largest first.
	mul(b, q, false)
	var m mat.SymDense
	m.SymOuterK(1, b.T())
	var eig mat.EigenSym
	if !eig.Factorize(&m, true) {
		return nil, fmt.Errorf("spectral factors: eigen decomposition failed")
	}
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	vals := eig.Values(nil) // ascending
	// Factor j is the j-th largest eigenvector scaled by the square root
	// of its eigenvalue (the singular value of A), so that the broad
	// structure outweighs the fine; then every row is divided by the
	// longest row's norm. A row's direction says whom the ad reaches, its
	// length how much of the engagement it holds: a user's fold-in scores
	// an ad its history shares many users with above a rare ad that shares
	// a few (unit rows lose that, and with it the test windows' ads, which
	// are mostly popular ones: docs/evaluation-log.md, "Spectral factors").
	rev := mat.NewDense(p, p, nil)
	for j := range p {
		s := math.Sqrt(max(vals[p-1-j], 0))
		for i := range p {
			rev.Set(i, j, s*vecs.At(i, p-1-j))
		}
	}
	var f mat.Dense
	f.Mul(q, rev)
	longest := 0.0
	for i := range na {
		longest = max(longest, floats.Norm(f.RawRowView(i), 2))
	}
	if longest > 0 {
		f.Scale(1/longest, &f)
	}
	if !alignSpectral(&f, t.IDs, prev) {
		for j := range p {
			big := 0.0
			for i := range na {
				if v := f.At(i, j); math.Abs(v) > math.Abs(big) {
					big = v
				}
			}
			if big < 0 {
				for i := range na {
					f.Set(i, j, -f.At(i, j))
				}
			}
		}
	}
	for i := range na {
		for j := range p {
			t.Rows[i*k+j] = float32(f.At(i, j))
		}
	}
	t.scaleContentRows()
	if keys != nil {
		t.fitAttr(adIdx, engaged, func(ad uint32) []adKey { return keys(graph.NodeID{Type: graph.NodeAd, Idx: ad}) })
	}
	if content != nil && fit.minProfile > 0 {
		t.fitProfile(ents, userIdx, func(u uint32) []int32 { return content(graph.NodeID{Type: graph.NodeUser, Idx: u}) }, fit.minProfile, fit.profileDays, asOf)
	}
	t.buildIndex()
	return t, nil
}

// fitProfile sets t.Profile and t.ProfileRows from the fitted rows: every
// user of userIdx (user row i is userIdx[i] in ents, whose weights are
// the normalised matrix's) folds in its engaged ads' rows, and each of
// the users' profile buckets (buckets(u)) shared by at least minUsers of
// them gets the mean of their unit fold-ins.
func (t *spectralTable) fitProfile(ents []spectralEntry, userIdx []uint32, buckets func(u uint32) []int32, minUsers int,
	halfLifeDays float64, asOf int64) {
	k := t.K
	folds := make([]float32, len(userIdx)*k)
	start := make([]int64, len(userIdx))
	for i := range start {
		start[i] = math.MaxInt64
	}
	for _, e := range ents {
		if int(e.u) < len(userIdx) {
			start[e.u] = min(start[e.u], e.ts)
		}
	}
	halfMS := halfLifeDays * 86400e3
	for _, e := range ents {
		if int(e.u) >= len(userIdx) {
			continue // a content pseudo-user
		}
		dst, w := folds[int(e.u)*k:(int(e.u)+1)*k], float32(e.w)
		for j, v := range t.Rows[int(e.a)*k : (int(e.a)+1)*k] {
			dst[j] += w * v
		}
	}
	sums := newRowSums[int32](k)
	for i, u := range userIdx {
		f := folds[i*k : (i+1)*k]
		if vek32.Norm(f) == 0 {
			continue
		}
		normalize(f)
		if halfMS > 0 {
			vek32.MulNumber_Inplace(f, float32(math.Exp2(-float64(max(asOf-start[i], 0))/halfMS)))
		}
		for _, b := range buckets(u) {
			sums.add(b, f)
		}
	}
	t.Profile, t.ProfileRows, _ = sums.means(int32(minUsers))
}

// scaleContentRows gives every content-only row the median norm of the
// engaged rows (engagedMedian): a row's length says how much of the
// engagement its ad holds, which a new ad has not had the chance to earn,
// so it is tried at a typical ad's length (as the prior's fresh-ad floor
// does) and its direction, from its content, decides whom it reaches.
// Without engaged rows the rows stay as fitted.
func (t *spectralTable) scaleContentRows() {
	median := t.engagedMedian()
	if median == 0 {
		return
	}
	k := t.K
	for i := range t.IDs {
		if !t.contentOnly(int32(i)) {
			continue
		}
		row := t.Rows[i*k : (i+1)*k]
		if n := vek32.Norm(row); n > 0 {
			vek32.MulNumber_Inplace(row, median/n)
		}
	}
}

// alignSpectral rotates the factors f (rows by ids) onto prev's on the ads
// both know, the orthogonal rotation that brings them closest (orthogonal
// Procrustes: R = U V^T for f_c^T prev_c = U S V^T). It reports whether it
// did: prev must have f's width and share at least one ad.
func alignSpectral(f *mat.Dense, ids []string, prev *spectralTable) bool {
	na, kk := f.Dims()
	if prev == nil || prev.K < kk || prev.index == nil {
		return false
	}
	var fc, pc []float64 // the shared ads' rows, of f and of prev
	for i, id := range ids[:na] {
		if r := prev.row(id); r >= 0 {
			fc = append(fc, f.RawRowView(i)...)
			for _, v := range prev.Rows[int(r)*prev.K : int(r)*prev.K+kk] {
				pc = append(pc, float64(v))
			}
		}
	}
	if len(fc) == 0 {
		return false
	}
	var c mat.Dense
	c.Mul(mat.NewDense(len(fc)/kk, kk, fc).T(), mat.NewDense(len(pc)/kk, kk, pc))
	var svd mat.SVD
	if !svd.Factorize(&c, mat.SVDFull) {
		return false
	}
	var u, v, r mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	r.Mul(&u, v.T())
	var out mat.Dense
	out.Mul(f, &r)
	f.Copy(&out)
	return true
}

// writeSpectral writes t to path with gob and syncs it.
func writeSpectral(path string, t *spectralTable) error {
	return writeSynced(path, func(f *os.File) error {
		enc := gob.NewEncoder(f)
		if err := enc.Encode(spectralMagic); err != nil {
			return err
		}
		return enc.Encode(t)
	})
}

// readSpectral reads a table written by writeSpectral and checks its shape
// against k factors and, when it has a predictor, dim inputs
// (Config.EmbedDim).
func readSpectral(path string, k, dim int) (*spectralTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open spectral factors: %w", err)
	}
	defer f.Close()
	dec := gob.NewDecoder(f)
	var magic string
	if err := dec.Decode(&magic); err != nil || magic != spectralMagic {
		return nil, fmt.Errorf("read %s: %w: bad header", path, ErrCorrupt)
	}
	var t spectralTable
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("read %s: %w: %v", path, ErrCorrupt, err)
	}
	bad := func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }
	if t.K != k || len(t.Rows) != len(t.IDs)*k || len(t.Fold) != len(t.IDs) || slices.ContainsFunc(t.Rows, bad) ||
		(len(t.Content) != 0 && len(t.Content) != len(t.IDs)) ||
		len(t.ProfileRows) != len(t.Profile)*k || slices.ContainsFunc(t.ProfileRows, bad) ||
		len(t.AttrRows) != len(t.Attr)*k || len(t.AttrN) != len(t.Attr) || slices.ContainsFunc(t.AttrRows, bad) ||
		slices.ContainsFunc(t.AttrN, func(n int32) bool { return n <= 0 }) ||
		(t.GroupW != nil && (len(t.GroupW) != len(t.Groups) || len(t.AttrGroup) != len(t.Attr) ||
			slices.ContainsFunc(t.GroupW, func(w float32) bool { return bad(w) || w < 0 }) ||
			slices.ContainsFunc(t.AttrGroup, func(g int32) bool { return g < 0 || int(g) >= len(t.Groups) }))) {
		return nil, fmt.Errorf("read %s: %w: %d factors of %d ads, want %d", path, ErrCorrupt, t.K, len(t.IDs), k)
	}
	if (t.PredDim != 0 && t.PredDim != dim) || len(t.Pred) != t.PredDim*k || slices.ContainsFunc(t.Pred, bad) {
		return nil, fmt.Errorf("read %s: %w: predictor of %d values, %d inputs", path, ErrCorrupt, len(t.Pred), t.PredDim)
	}
	t.buildIndex()
	return &t, nil
}

// spectralPredAds bounds the ads fitSpectralPredictor embeds.
const spectralPredAds = 4096

// fitSpectralPredictor fits t.Pred: the ridge regression of an ad's
// factors on its encoder embedding as a new ad's, each of up to
// spectralPredAds ads of the table (every n-th row) embedded by embed from
// its teacher view as of just before its first engagement (no engagement
// neighbours, no history, zero activity: what an ad is when it arrives),
// so that an ad without factors gets the ones its content and structure
// predict rather than none, and does not fall behind the ads that have
// them. Without enough ads (fewer than twice the inputs) it leaves Pred
// nil.
func fitSpectralPredictor(ctx gocontext.Context, t *spectralTable, store *graph.Store, sm *graph.Sampler, dim int, seed uint64,
	embed func(sgs []*graph.Subgraph) ([][]float32, error)) error {
	na := len(t.IDs)
	if na < 2*dim || len(t.first) != na {
		return nil
	}
	step := max(1, na/spectralPredAds)
	var rows []int
	var sgs []*graph.Subgraph
	for r := 0; r < na; r += step {
		if r%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		id, ok := store.Lookup(graph.Ref{Type: graph.NodeAd, ID: t.IDs[r]})
		if !ok {
			continue
		}
		rows = append(rows, r)
		sgs = append(sgs, sm.Sample(id, t.first[r]-1, graph.ViewTeacher, seedFor(seed, 11, uint64(r))))
	}
	embs, err := embed(sgs)
	if err != nil {
		return fmt.Errorf("spectral predictor: %w", err)
	}
	k := t.K
	x, y := mat.NewDense(len(rows), dim, nil), mat.NewDense(len(rows), k, nil)
	for i, r := range rows {
		for j, v := range embs[i][:dim] {
			x.Set(i, j, float64(v))
		}
		for j, v := range t.Rows[r*k : (r+1)*k] {
			y.Set(i, j, float64(v))
		}
	}
	p, err := ridge(x, y, spectralRidge)
	if err != nil {
		return fmt.Errorf("spectral predictor: %w", err)
	}
	t.Pred, t.PredDim = make([]float32, dim*k), dim
	for i := range dim {
		for j := range k {
			t.Pred[i*k+j] = float32(p.At(i, j))
		}
	}
	return nil
}

// spectralRidge is the ridge penalty of fitSpectralPredictor, relative to
// the mean diagonal of XᵀX.
const spectralRidge = 0.01

// ridge returns the ridge regression of y on x: argmin_P |xP - y|² +
// λ|P|², with λ = rel times the mean diagonal of xᵀx.
func ridge(x, y *mat.Dense, rel float64) (*mat.Dense, error) {
	_, d := x.Dims()
	var g mat.SymDense
	g.SymOuterK(1, x.T())
	lambda := 0.0
	for i := range d {
		lambda += g.At(i, i)
	}
	lambda = rel*lambda/float64(d) + 1e-12
	for i := range d {
		g.SetSym(i, i, g.At(i, i)+lambda)
	}
	var chol mat.Cholesky
	if !chol.Factorize(&g) {
		return nil, fmt.Errorf("ridge: normal equations not positive definite")
	}
	var xty, p mat.Dense
	xty.Mul(x.T(), y)
	if err := chol.SolveTo(&p, &xty); err != nil {
		return nil, err
	}
	return &p, nil
}

// predict writes into dst[:K] the factors t.Pred predicts from emb (its
// first PredDim coordinates), at the median length of the engaged ads'
// rows, as a content row is (scaleContentRows): the regression says whom
// a new ad is for, not how much engagement it will earn, and its shrunken
// output would otherwise rank every new ad below the engaged ones for a
// user with factors. False when t has no predictor.
func (t *spectralTable) predict(dst, emb []float32) bool {
	if t.PredDim == 0 {
		return false
	}
	d := nativeDense{w: t.Pred, in: t.PredDim, out: t.K}
	d.apply(dst, emb[:t.PredDim], 1)
	if n := vek32.Norm(dst[:t.K]); n > 0 && t.typical > 0 {
		vek32.MulNumber_Inplace(dst[:t.K], t.newAdScale()*t.typical/n)
	}
	return true
}

// Refit returns m with its spectral factors fitted again, as training fits
// them, on store's events up to asOf (the rows, the profile rows and the
// new ads' predictor; the encoder's weights and the prototypes are m's):
// what the model would serve had its factors been fitted at asOf. Scoring
// a time after asOf with it sees no later engagement through the factors
// (retrieval.Calibrate). A model without spectral factors is returned as
// is. The factors are not aligned to m's (a fresh fit's own orientation).
func (m *Model) Refit(ctx gocontext.Context, store *graph.Store, asOf int64) (*Model, error) {
	if m.feat.spec == nil {
		return m, nil
	}
	c := *m
	cfg, seed := m.cfg.Model, m.cfg.Train.Seed
	feat, err := newFeaturizer(cfg)
	if err != nil {
		return nil, err
	}
	sm := graph.NewSampler(store, m.cfg.Train.Sampler)
	spec, err := fitSpectral(ctx, store, sm, cfg.spectralFit(), asOf, seed, nil, feat.contentBuckets(store), feat.adKeysOf(store))
	if err != nil {
		return nil, fmt.Errorf("refit spectral factors: %w", err)
	}
	ne := m.native
	if ne == nil {
		if ne, err = newNativeEncoder(m.ctx, cfg); err != nil {
			return nil, fmt.Errorf("refit spectral factors: %w", err)
		}
	}
	// The table is set before the predictor's embeddings: the featurizer
	// caches each node's row of it with the node's features.
	feat.spec = spec
	if err := fitPredictorNative(ctx, spec, store, sm, feat, ne, cfg, seed); err != nil {
		return nil, err
	}
	c.feat = feat
	return &c, nil
}
