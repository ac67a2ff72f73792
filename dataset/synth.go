package dataset

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/hir-ads/hir/graph"
)

// DayMS is one day in milliseconds.
const DayMS int64 = 86_400_000

// Shape of the synthetic world that SynthOptions does not expose.
const (
	// DefaultSynthStartMS is the default start of the window: 2023-11-14T22:13:20Z.
	DefaultSynthStartMS int64 = 1_700_000_000_000

	// Arrival of users and ads: startShare exist at the start, coldShare
	// arrive in the last coldWindow of the window (cold start), the rest
	// arrive uniformly before it.
	startShare = 0.60
	coldShare  = 0.15
	coldWindow = 0.20

	// Impression targeting: the user's own fine interest, another fine
	// interest under the same mid interest, the same coarse interest, and
	// random exploration (the remainder, 30%).
	targetFine   = 0.50
	targetMid    = 0.15
	targetCoarse = 0.05

	// followUpRatio is the expected number of follow-up events (click, cart,
	// purchase, fires, interested, not_interested) per impression, used to
	// turn EventsPerUser into an impression rate.
	followUpRatio = 0.065
)

// clickRate is the click probability of an impression by relation between the
// ad's fine interest and the user's interests: none, same coarse, same mid,
// same fine. The mix of impressions makes the overall rate about 3%.
var clickRate = [4]float64{0.004, 0.012, 0.025, 0.05}

// ErrBadOptions reports invalid SynthOptions.
var ErrBadOptions = errors.New("bad synth options")

// SynthOptions configures Synth. Zero fields take their defaults.
type SynthOptions struct {
	Users int    `json:"users"` // default 10000
	Ads   int    `json:"ads"`   // default 10000
	Seed  uint64 `json:"seed"`  // no default: 0 is a seed like any other
	// Coarse, Mid and Fine are the sizes of the interest hierarchy levels
	// (default 8, 64, 512); Coarse <= Mid <= Fine.
	Coarse int `json:"coarse"`
	Mid    int `json:"mid"`
	Fine   int `json:"fine"`
	Days   int `json:"days"` // length of the window; default 30
	// Advertisers (default Ads/50), Campaigns (default max(Advertisers,
	// Ads/10)) and Products (default max(Campaigns, Ads/2)), at least 1 each,
	// with Advertisers <= Campaigns <= Products.
	Advertisers int `json:"advertisers"`
	Campaigns   int `json:"campaigns"`
	Products    int `json:"products"`
	// EventsPerUser is the mean number of engagement events per user over
	// the window (default 50); structure events come on top.
	EventsPerUser float64 `json:"events_per_user"`
	// StartMS is the start of the window in unix ms (default DefaultSynthStartMS).
	StartMS int64 `json:"start_ms"`
}

// WithDefaults returns o with zero fields set to their defaults, or an error
// wrapping ErrBadOptions.
func (o SynthOptions) WithDefaults() (SynthOptions, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Users, 10000)
	def(&o.Ads, 10000)
	def(&o.Coarse, 8)
	def(&o.Mid, 64)
	def(&o.Fine, 512)
	def(&o.Days, 30)
	def(&o.Advertisers, max(1, o.Ads/50))
	def(&o.Campaigns, max(o.Advertisers, o.Ads/10))
	def(&o.Products, max(o.Campaigns, o.Ads/2))
	if o.EventsPerUser == 0 {
		o.EventsPerUser = 50
	}
	if o.StartMS == 0 {
		o.StartMS = DefaultSynthStartMS
	}
	const maxCount = 1 << 30
	for _, c := range []struct {
		name string
		v    int
	}{{"users", o.Users}, {"ads", o.Ads}, {"coarse", o.Coarse}, {"mid", o.Mid}, {"fine", o.Fine},
		{"days", o.Days}, {"advertisers", o.Advertisers}, {"campaigns", o.Campaigns}, {"products", o.Products}} {
		if c.v < 1 || c.v > maxCount {
			return o, fmt.Errorf("%w: %s = %d, want 1..%d", ErrBadOptions, c.name, c.v, maxCount)
		}
	}
	switch {
	case o.Coarse > o.Mid || o.Mid > o.Fine:
		return o, fmt.Errorf("%w: want coarse <= mid <= fine, got %d/%d/%d", ErrBadOptions, o.Coarse, o.Mid, o.Fine)
	case o.Advertisers > o.Campaigns || o.Campaigns > o.Products:
		return o, fmt.Errorf("%w: want advertisers <= campaigns <= products, got %d/%d/%d", ErrBadOptions, o.Advertisers, o.Campaigns, o.Products)
	case o.Days > 36500:
		return o, fmt.Errorf("%w: days = %d, want at most 36500", ErrBadOptions, o.Days)
	case math.IsNaN(o.EventsPerUser) || o.EventsPerUser < 0 || o.EventsPerUser > 1e6:
		return o, fmt.Errorf("%w: events per user = %v, want 0..1e6", ErrBadOptions, o.EventsPerUser)
	case o.StartMS < 0 || o.StartMS+int64(o.Days)*DayMS > 7258118400000:
		return o, fmt.Errorf("%w: window starting at %d ms is outside years 1970-2200", ErrBadOptions, o.StartMS)
	}
	return o, nil
}

// SynthSummary reports what Synth wrote.
type SynthSummary struct {
	Summary
	Options     SynthOptions `json:"options"`       // with defaults applied
	Dir         string       `json:"dir"`           // output directory
	ColdStartMS int64        `json:"cold_start_ms"` // users and ads arriving at or after this are cold
	ColdUsers   int          `json:"cold_users"`
	ColdAds     int          `json:"cold_ads"`
}

// String returns the summary as one line of JSON.
func (s SynthSummary) String() string {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%+v", map[string]any{"error": err.Error()})
	}
	return string(b)
}

// Synth generates a synthetic ads world (see the package documentation) and
// writes entities.jsonl, events.jsonl (sorted by time) and truth.json into
// outDir, creating it if needed. Each file is written under a temporary name
// and renamed when complete. The output depends only on opts: the same options
// give byte-identical files. Event generation runs on GOMAXPROCS goroutines.
func Synth(ctx context.Context, opts SynthOptions, outDir string) (SynthSummary, error) {
	o, err := opts.WithDefaults()
	if err != nil {
		return SynthSummary{}, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return SynthSummary{}, fmt.Errorf("create synth directory: %w", err)
	}
	w := newWorld(o)
	sum := SynthSummary{Options: o, Dir: outDir, ColdStartMS: w.coldMS}
	for _, a := range w.userArrival {
		if a >= w.coldMS {
			sum.ColdUsers++
		}
	}
	for _, a := range w.adArrival {
		if a >= w.coldMS {
			sum.ColdAds++
		}
	}
	c := newCounter("synth", Discard)
	if err := writeAtomic(filepath.Join(outDir, EntitiesFile), func(bw *bufio.Writer) error {
		return w.writeEntities(ctx, bw, c)
	}); err != nil {
		return SynthSummary{}, fmt.Errorf("write entities: %w", err)
	}
	if err := writeAtomic(filepath.Join(outDir, EventsFile), func(bw *bufio.Writer) error {
		return w.writeEvents(ctx, bw, c)
	}); err != nil {
		return SynthSummary{}, fmt.Errorf("write events: %w", err)
	}
	if err := writeAtomic(filepath.Join(outDir, TruthFile), w.writeTruth); err != nil {
		return SynthSummary{}, fmt.Errorf("write truth: %w", err)
	}
	sum.Summary = c.summary()
	return sum, nil
}

// writeAtomic writes path through a buffered temporary file renamed on success.
func writeAtomic(path string, fill func(*bufio.Writer) error) (err error) {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 4<<20)
	if err = fill(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Random streams: every random decision draws from a PCG seeded with the
// options' seed and one of these, so parts of the world are independent.
const (
	streamVocab uint64 = iota + 1
	streamWorld
	streamText
	streamDay = 1 << 40 // + day<<32 | user
)

// Id prefixes of synthetic entities, indexed by graph.NodeType.
var synthPrefix = [graph.NumNodeTypes]string{
	graph.NodeUser: "u", graph.NodeAd: "a", graph.NodeCampaign: "cp", graph.NodeAdvertiser: "adv",
	graph.NodeProduct: "p", graph.NodeCategory: "cat", graph.NodeBrand: "b", graph.NodePixel: "px",
}

// SynthID returns the external id Synth gives the entity of type t with dense
// index idx (for example "a17" for ad 17). truth.json uses the same ids.
func SynthID(t graph.NodeType, idx int) string {
	if !t.Valid() {
		return ""
	}
	return synthPrefix[t] + strconv.Itoa(idx)
}

// arrivalIndex groups entities and sorts each group by arrival time, so the
// entities alive at time ts are a prefix of the group.
type arrivalIndex struct {
	start []int32 // [groups+1]
	ids   []int32
	arr   []int64 // arrival of ids[i]
}

func newArrivalIndex(groups int, group func(i int) int, arrival []int64) arrivalIndex {
	x := arrivalIndex{start: make([]int32, groups+1), ids: make([]int32, len(arrival)), arr: make([]int64, len(arrival))}
	for i := range arrival {
		x.start[group(i)+1]++
	}
	for g := range groups {
		x.start[g+1] += x.start[g]
	}
	next := slices.Clone(x.start[:groups])
	for i := range arrival {
		g := group(i)
		x.ids[next[g]] = int32(i)
		next[g]++
	}
	for g := range groups {
		ids := x.ids[x.start[g]:x.start[g+1]]
		slices.SortFunc(ids, func(a, b int32) int { return cmp.Or(cmp.Compare(arrival[a], arrival[b]), cmp.Compare(a, b)) })
		for i, id := range ids {
			x.arr[int(x.start[g])+i] = arrival[id]
		}
	}
	return x
}

// alive returns the members of group g that arrived at or before ts.
func (x *arrivalIndex) alive(g int, ts int64) []int32 {
	lo, hi := x.start[g], x.start[g+1]
	arr := x.arr[lo:hi]
	n, _ := slices.BinarySearchFunc(arr, ts+1, func(a, t int64) int { return cmp.Compare(a, t) })
	return x.ids[lo : int(lo)+n]
}

// between returns the members of group g that arrived in [from, to).
func (x *arrivalIndex) between(g int, from, to int64) []int32 {
	lo, hi := x.start[g], x.start[g+1]
	arr := x.arr[lo:hi]
	i, _ := slices.BinarySearch(arr, from)
	j, _ := slices.BinarySearch(arr, to)
	return x.ids[int(lo)+i : int(lo)+j]
}

// world is the generated world, read-only once built.
type world struct {
	o                     SynthOptions
	startMS, endMS        int64
	coldMS                int64
	midParent, fineParent []int32 // coarse of each mid, mid of each fine

	vocabCoarse, vocabMid, vocabFine [][]string
	nameCoarse, nameMid, nameFine    []string // each interest's name ("sports", "running", "trail running")
	noise                            []string
	brand                            []string // per advertiser
	regions                          []string

	finePopCum []float64 // cumulative popularity of fine interests

	advFine, campAdv, campFine, prodCamp, adCamp, adProd []int32
	advArrival, campArrival, prodArrival, adArrival      []int64
	adQuality                                            []float32

	userArrival []int64
	userRate    []float64 // impressions per ms alive
	userStart   []int32   // [Users+1] offsets into userFine, userW
	userFine    []int32
	userW       []float32 // interest weights, descending, summing to 1
	userAge     []uint8

	adsByFine, adsByMid, adsByCoarse, adsAll arrivalIndex
	advsAll, campsAll, prodsAll              arrivalIndex
}

func (w *world) adFine(ad int32) int32    { return w.campFine[w.adCamp[ad]] }
func (w *world) prodFine(p int32) int32   { return w.campFine[w.prodCamp[p]] }
func (w *world) fineCoarse(f int32) int32 { return w.midParent[w.fineParent[f]] }

func (w *world) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(w.o.Seed, stream))
}

// arrival draws an arrival time from the start/warm/cold mixture.
func (w *world) arrival(r *rand.Rand) int64 {
	x := r.Float64()
	switch {
	case x < startShare:
		return w.startMS
	case x < 1-coldShare:
		return w.startMS + r.Int64N(max(1, w.coldMS-w.startMS))
	default:
		return w.coldMS + r.Int64N(max(1, w.endMS-w.coldMS))
	}
}

func newWorld(o SynthOptions) *world {
	w := &world{o: o, startMS: o.StartMS, endMS: o.StartMS + int64(o.Days)*DayMS}
	w.coldMS = w.startMS + int64(float64(w.endMS-w.startMS)*(1-coldWindow))

	// Hierarchy: contiguous, balanced blocks.
	w.midParent = make([]int32, o.Mid)
	for m := range o.Mid {
		w.midParent[m] = int32(int64(m) * int64(o.Coarse) / int64(o.Mid))
	}
	w.fineParent = make([]int32, o.Fine)
	for f := range o.Fine {
		w.fineParent[f] = int32(int64(f) * int64(o.Mid) / int64(o.Fine))
	}

	w.makeVocab()

	r := w.rng(streamWorld)
	// Fine interest popularity: a Zipf-like law over a random order.
	perm := r.Perm(o.Fine)
	w.finePopCum = make([]float64, o.Fine)
	total := 0.0
	for f := range o.Fine {
		total += math.Pow(float64(perm[f])+10, -0.8)
		w.finePopCum[f] = total
	}
	for f := range w.finePopCum {
		w.finePopCum[f] /= total
	}
	finesOfCoarse := make([][]int32, o.Coarse)
	finesOfMid := make([][]int32, o.Mid)
	for f := range o.Fine {
		m := w.fineParent[f]
		finesOfMid[m] = append(finesOfMid[m], int32(f))
		finesOfCoarse[w.midParent[m]] = append(finesOfCoarse[w.midParent[m]], int32(f))
	}

	// Supply: advertisers -> campaigns -> products, ads.
	w.advFine = make([]int32, o.Advertisers)
	for a := range w.advFine {
		w.advFine[a] = w.popularFine(r)
	}
	w.campAdv = make([]int32, o.Campaigns)
	w.campFine = make([]int32, o.Campaigns)
	for c := range o.Campaigns {
		a := int32(c)
		if c >= o.Advertisers {
			a = int32(r.IntN(o.Advertisers))
		}
		w.campAdv[c] = a
		f := w.advFine[a]
		if r.Float64() >= 0.6 { // another fine interest under the advertiser's coarse interest
			sib := finesOfCoarse[w.fineCoarse(f)]
			f = sib[r.IntN(len(sib))]
		}
		w.campFine[c] = f
	}
	w.prodCamp = make([]int32, o.Products)
	for p := range o.Products {
		c := int32(p)
		if p >= o.Campaigns {
			c = int32(r.IntN(o.Campaigns))
		}
		w.prodCamp[p] = c
	}
	prodsOfCamp := newArrivalIndex(o.Campaigns, func(p int) int { return int(w.prodCamp[p]) }, make([]int64, o.Products))
	w.adCamp = make([]int32, o.Ads)
	w.adProd = make([]int32, o.Ads)
	w.adArrival = make([]int64, o.Ads)
	w.adQuality = make([]float32, o.Ads)
	for ad := range o.Ads {
		c := int32(ad)
		if ad >= o.Campaigns {
			c = int32(r.IntN(o.Campaigns))
		}
		w.adCamp[ad] = c
		ps := prodsOfCamp.ids[prodsOfCamp.start[c]:prodsOfCamp.start[c+1]]
		w.adProd[ad] = ps[r.IntN(len(ps))]
		w.adArrival[ad] = w.arrival(r)
		w.adQuality[ad] = float32(math.Exp(0.4*r.NormFloat64() - 0.08))
	}
	// Containers arrive with their first ad.
	w.campArrival = make([]int64, o.Campaigns)
	for c := range w.campArrival {
		w.campArrival[c] = math.MaxInt64
	}
	w.prodArrival = make([]int64, o.Products)
	for p := range w.prodArrival {
		w.prodArrival[p] = math.MaxInt64
	}
	for ad, c := range w.adCamp {
		w.campArrival[c] = min(w.campArrival[c], w.adArrival[ad])
		w.prodArrival[w.adProd[ad]] = min(w.prodArrival[w.adProd[ad]], w.adArrival[ad])
	}
	for c := range w.campArrival {
		if w.campArrival[c] == math.MaxInt64 {
			w.campArrival[c] = w.arrival(r)
		}
	}
	for p, c := range w.prodCamp {
		if w.prodArrival[p] == math.MaxInt64 { // a product without ads arrives with its campaign
			w.prodArrival[p] = w.campArrival[c]
		}
	}
	w.advArrival = make([]int64, o.Advertisers)
	for a := range w.advArrival {
		w.advArrival[a] = math.MaxInt64
	}
	for c, a := range w.campAdv {
		w.advArrival[a] = min(w.advArrival[a], w.campArrival[c])
	}

	// Demand: users with 2-4 weighted fine interests.
	w.userArrival = make([]int64, o.Users)
	w.userRate = make([]float64, o.Users)
	w.userStart = make([]int32, o.Users+1)
	w.userAge = make([]uint8, o.Users)
	activity := make([]float64, o.Users)
	exposure := 0.0
	for u := range o.Users {
		k := min(2+r.IntN(3), o.Fine)
		first := len(w.userFine)
		for len(w.userFine)-first < k {
			var f int32
			switch x := r.Float64(); {
			case len(w.userFine) == first || x < 0.3:
				f = w.popularFine(r)
			case x < 0.7:
				sib := finesOfMid[w.fineParent[w.userFine[first]]]
				f = sib[r.IntN(len(sib))]
			default:
				sib := finesOfCoarse[w.fineCoarse(w.userFine[first])]
				f = sib[r.IntN(len(sib))]
			}
			if slices.Contains(w.userFine[first:], f) {
				if o.Fine < 4 || r.IntN(4) == 0 {
					f = int32(r.IntN(o.Fine))
				}
				if slices.Contains(w.userFine[first:], f) {
					continue
				}
			}
			w.userFine = append(w.userFine, f)
			w.userW = append(w.userW, float32(r.ExpFloat64()+0.05))
		}
		ws := w.userW[first:]
		fs := w.userFine[first:]
		sum := float32(0)
		for _, x := range ws {
			sum += x
		}
		for i := range ws {
			ws[i] /= sum
		}
		// Sort interests by weight, descending (insertion sort: k <= 4).
		for i := 1; i < len(ws); i++ {
			for j := i; j > 0 && ws[j] > ws[j-1]; j-- {
				ws[j], ws[j-1] = ws[j-1], ws[j]
				fs[j], fs[j-1] = fs[j-1], fs[j]
			}
		}
		w.userStart[u+1] = int32(len(w.userFine))
		w.userArrival[u] = w.arrival(r)
		activity[u] = math.Exp(0.7 * r.NormFloat64())
		exposure += activity[u] * float64(w.endMS-w.userArrival[u])
		age := int(w.fineCoarse(fs[0])) % len(ageBuckets)
		if r.Float64() < 0.5 {
			age = r.IntN(len(ageBuckets))
		}
		w.userAge[u] = uint8(age)
	}
	impressions := float64(o.Users) * o.EventsPerUser / (1 + followUpRatio)
	for u := range o.Users {
		if exposure > 0 {
			w.userRate[u] = impressions * activity[u] / exposure
		}
	}

	w.adsByFine = newArrivalIndex(o.Fine, func(i int) int { return int(w.adFine(int32(i))) }, w.adArrival)
	w.adsByMid = newArrivalIndex(o.Mid, func(i int) int { return int(w.fineParent[w.adFine(int32(i))]) }, w.adArrival)
	w.adsByCoarse = newArrivalIndex(o.Coarse, func(i int) int { return int(w.fineCoarse(w.adFine(int32(i)))) }, w.adArrival)
	zero := func(int) int { return 0 }
	w.adsAll = newArrivalIndex(1, zero, w.adArrival)
	w.advsAll = newArrivalIndex(1, zero, w.advArrival)
	w.campsAll = newArrivalIndex(1, zero, w.campArrival)
	w.prodsAll = newArrivalIndex(1, zero, w.prodArrival)
	return w
}

var ageBuckets = []string{"18-24", "25-34", "35-44", "45-54", "55+"}

func (w *world) popularFine(r *rand.Rand) int32 {
	i, _ := slices.BinarySearch(w.finePopCum, r.Float64())
	return int32(min(i, len(w.finePopCum)-1))
}
