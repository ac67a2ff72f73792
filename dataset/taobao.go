package dataset

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hir-ads/hir/graph"
)

// beijing is the time zone the Taobao data sets were recorded in.
var beijing = time.FixedZone("UTC+8", 8*3600)

// dmrBaseMS is the synthetic time of the first DMR row:
// 2017-05-06T00:00:00+08:00, the first day of the Taobao ad data set.
const dmrBaseMS = 1494000000000

// Profile columns of the Taobao user_profile table, in DMR order.
var taobaoProfileCols = []string{"cms_segid", "cms_group_id", "final_gender_code", "age_level",
	"pvalue_level", "shopping_level", "occupation", "new_user_class_level"}

// DMR column layout (PaddleRec alimama_sampled_train.txt).
const (
	dmrCols    = 267
	dmrProfile = 250 // userid then the 8 profile columns
	dmrAd      = 259 // adgroup_id, cate_id, campaign_id, customer, brand
	dmrPrice   = 264
	dmrPID     = 265
	dmrClk     = 266
)

// sourceFiles returns src itself, or the regular files in directory src whose
// names end in one of exts, sorted by name.
func sourceFiles(src string, exts ...string) ([]string, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{src}, nil
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), ".gz")
		if !e.Type().IsRegular() || !slices.ContainsFunc(exts, func(x string) bool { return strings.HasSuffix(name, x) }) {
			continue
		}
		files = append(files, filepath.Join(src, e.Name()))
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no %s files in %s", ErrNoData, strings.Join(exts, " or "), src)
	}
	slices.Sort(files)
	return files, nil
}

// emitter deduplicates entities and emits them once, before their events.
type emitter struct {
	sink Sink
	seen [graph.NumNodeTypes]map[string]struct{}
}

func newEmitter(sink Sink) *emitter {
	e := &emitter{sink: sink}
	for i := range e.seen {
		e.seen[i] = map[string]struct{}{}
	}
	return e
}

// first reports whether r has not been seen before, and marks it seen.
func (e *emitter) first(r graph.Ref) bool {
	if _, ok := e.seen[r.Type][r.ID]; ok {
		return false
	}
	e.seen[r.Type][r.ID] = struct{}{}
	return true
}

// entity emits ent unless an entity with its ref was emitted before.
func (e *emitter) entity(ent *graph.Entity) error {
	if !e.first(ent.Ref()) {
		return nil
	}
	if err := ent.Validate(); err != nil {
		return fmt.Errorf("entity %s: %w", ent.Ref(), err)
	}
	return e.sink.Entity(ent)
}

func (e *emitter) event(id string, src, dst graph.Ref, t graph.EdgeType, ts int64) error {
	ev := graph.Event{ID: id, Src: src, Dst: dst, Type: t, TS: ts, Weight: 1}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("event %s %s -> %s: %w", t, src, dst, err)
	}
	return e.sink.Event(&ev)
}

// adRow is one impression of the Taobao ad data set.
type adRow struct {
	id                                  string // event id
	ts                                  int64  // unix ms
	user                                string
	profile                             map[string]string
	ad, cate, campaign, customer, brand string // raw ids; "" when absent
	priceKey, price                     string
	click                               bool
}

// adRow emits one impression, preceded by the entities and structure edges
// of whatever it is the first to mention.
func (e *emitter) adRow(r *adRow) error {
	if r.user == "" || r.ad == "" {
		return badRecord("missing user or adgroup id")
	}
	user := graph.Ref{Type: graph.NodeUser, ID: "u" + r.user}
	ad := graph.Ref{Type: graph.NodeAd, ID: "a" + r.ad}
	if err := e.entity(&graph.Entity{Type: user.Type, ID: user.ID, Attrs: r.profile}); err != nil {
		return err
	}
	if e.first(ad) {
		if err := e.newAd(ad, r); err != nil {
			return err
		}
	}
	t := graph.EdgeImpression
	if r.click {
		t = graph.EdgeClick
	}
	return e.event(r.id, user, ad, t, r.ts)
}

// newAd emits an ad seen for the first time, the campaign, advertiser,
// category and brand it links to, and the structure edges between them.
func (e *emitter) newAd(ad graph.Ref, r *adRow) error {
	type link struct {
		raw    string
		t      graph.NodeType
		prefix string
		attr   string
		edge   graph.EdgeType
	}
	links := []link{
		{r.campaign, graph.NodeCampaign, "cp", "campaign", graph.EdgeInCampaign},
		{r.cate, graph.NodeCategory, "c", "category", graph.EdgeInCategory},
		{r.brand, graph.NodeBrand, "b", "brand", graph.EdgeOfBrand},
	}
	attrs := map[string]string{}
	for _, l := range links {
		if l.raw == "" {
			continue
		}
		attrs[l.attr] = l.prefix + l.raw
		if err := e.entity(&graph.Entity{Type: l.t, ID: l.prefix + l.raw}); err != nil {
			return err
		}
	}
	if r.customer != "" {
		attrs["advertiser"] = "adv" + r.customer
	}
	if r.price != "" {
		attrs[r.priceKey] = r.price
	}
	if err := e.sink.Entity(&graph.Entity{Type: ad.Type, ID: ad.ID, Attrs: attrs}); err != nil {
		return err
	}
	for _, l := range links {
		if l.raw == "" {
			continue
		}
		if err := e.event("", ad, graph.Ref{Type: l.t, ID: l.prefix + l.raw}, l.edge, r.ts); err != nil {
			return err
		}
	}
	if r.campaign == "" || r.customer == "" {
		return nil
	}
	adv := graph.Ref{Type: graph.NodeAdvertiser, ID: "adv" + r.customer}
	if err := e.entity(&graph.Entity{Type: adv.Type, ID: adv.ID}); err != nil {
		return err
	}
	// A campaign belongs to one advertiser: link it once. The seen set of
	// NodeInvalid (never an entity type) records linked campaigns.
	camp := graph.Ref{Type: graph.NodeCampaign, ID: "cp" + r.campaign}
	if !e.first(graph.Ref{Type: graph.NodeInvalid, ID: camp.ID}) {
		return nil
	}
	return e.event("", camp, adv, graph.EdgeOfAdvertiser, r.ts)
}

// importTaobaoAd imports FuxiCTR CSV and PaddleRec DMR extracts of the Taobao
// ad display/click data set.
func importTaobaoAd(ctx context.Context, src string, sink Sink) (Summary, error) {
	files, err := sourceFiles(src, ".csv", ".txt")
	if err != nil {
		return Summary{}, fmt.Errorf("open taobao-ad source: %w", err)
	}
	em := newEmitter(sink)
	dmrRow := 0
	for _, path := range files {
		var header map[string]int // nil until a FuxiCTR header is read
		isDMR := false
		lineNo := 0
		err := eachLine(ctx, path, func(line []byte) error {
			lineNo++
			f := strings.Split(string(line), ",")
			if lineNo == 1 {
				if len(f) == dmrCols {
					isDMR = true
				} else {
					header = map[string]int{}
					for i, name := range f {
						header[strings.TrimSpace(name)] = i
					}
					if _, ok := header["clk"]; !ok {
						return badRecord("first line is neither a header with a clk column nor a %d-column DMR row", dmrCols)
					}
					if _, ok := header["adgroup_id"]; !ok {
						return badRecord("header has no adgroup_id column")
					}
					return nil
				}
			}
			var r adRow
			if isDMR {
				if err := parseDMR(f, dmrRow, &r); err != nil {
					return err
				}
				dmrRow++
			} else if err := parseFuxiCTR(f, header, &r); err != nil {
				return err
			}
			return em.adRow(&r)
		})
		if err != nil {
			return Summary{}, err
		}
	}
	return Summary{}, nil
}

func parseDMR(f []string, row int, r *adRow) error {
	if len(f) != dmrCols {
		return badRecord("got %d comma-separated fields, want %d", len(f), dmrCols)
	}
	for _, i := range []int{dmrProfile, dmrAd, dmrAd + 1, dmrAd + 2, dmrAd + 3, dmrAd + 4} {
		if !isDigits(f[i]) {
			return badRecord("column %d: id %q is not an integer", i, f[i])
		}
	}
	*r = adRow{
		id:       "d" + strconv.Itoa(row),
		ts:       dmrBaseMS + int64(row)*1000,
		user:     f[dmrProfile],
		profile:  map[string]string{},
		ad:       f[dmrAd],
		cate:     f[dmrAd+1],
		campaign: f[dmrAd+2],
		customer: f[dmrAd+3],
		brand:    f[dmrAd+4],
		priceKey: "price_norm",
		price:    f[dmrPrice],
	}
	if r.brand == "0" { // 0 encodes a missing brand
		r.brand = ""
	}
	for i, col := range taobaoProfileCols {
		r.profile[col] = f[dmrProfile+1+i]
	}
	switch f[dmrClk] {
	case "0":
	case "1":
		r.click = true
	default:
		return badRecord("clk %q is not 0 or 1", f[dmrClk])
	}
	return nil
}

func parseFuxiCTR(f []string, header map[string]int, r *adRow) error {
	if len(f) != len(header) {
		return badRecord("got %d comma-separated fields, want %d as in the header", len(f), len(header))
	}
	col := func(name string) string {
		if i, ok := header[name]; ok {
			return strings.TrimSpace(f[i])
		}
		return ""
	}
	user := col("userid")
	if user == "" {
		user = col("user")
	}
	*r = adRow{
		user:     user,
		profile:  map[string]string{},
		ad:       col("adgroup_id"),
		cate:     col("cate_id"),
		campaign: col("campaign_id"),
		customer: col("customer"),
		brand:    col("brand"),
		priceKey: "price",
		price:    col("price"),
	}
	for _, id := range []string{r.user, r.ad, r.cate, r.campaign, r.customer, r.brand} {
		if id != "" && !isDigits(id) {
			return badRecord("id %q is not an integer", id)
		}
	}
	for _, c := range taobaoProfileCols {
		if v := col(c); v != "" {
			r.profile[c] = v
		}
	}
	switch col("clk") {
	case "0":
	case "1":
		r.click = true
	default:
		return badRecord("clk %q is not 0 or 1", col("clk"))
	}
	ts, err := parseTaobaoTime(col("time_stamp"))
	if err != nil {
		return err
	}
	r.ts = ts
	r.id = "t" + r.user + "-" + r.ad + "-" + strconv.FormatInt(ts/1000, 10)
	return nil
}

// parseTaobaoTime parses unix seconds or "2006-01-02 15:04:05" in Beijing time.
func parseTaobaoTime(s string) (int64, error) {
	if isDigits(s) {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil || sec > 1<<40 {
			return 0, badRecord("time stamp %q out of range", s)
		}
		return sec * 1000, nil
	}
	t, err := time.ParseInLocation(time.DateTime, s, beijing)
	if err != nil {
		return 0, badRecord("time stamp %q is neither unix seconds nor %q", s, time.DateTime)
	}
	return t.UnixMilli(), nil
}

// Taobao UserBehavior behaviour types.
var behaviorEdges = map[string]graph.EdgeType{
	"pv":   graph.EdgeImpression,
	"cart": graph.EdgeAddToCart,
	"fav":  graph.EdgeInterested,
	"buy":  graph.EdgePurchase,
}

// importTaobaoBehavior imports UserBehavior.csv files.
func importTaobaoBehavior(ctx context.Context, src string, sink Sink) (Summary, error) {
	files, err := sourceFiles(src, ".csv")
	if err != nil {
		return Summary{}, fmt.Errorf("open taobao-behavior source: %w", err)
	}
	em := newEmitter(sink)
	for _, path := range files {
		err := eachLine(ctx, path, func(line []byte) error {
			f, err := splitN(line, ',', 5)
			if err != nil {
				return err
			}
			for i := range f {
				f[i] = bytes.TrimSpace(f[i])
			}
			for i, what := range []string{"user id", "item id", "category id", "timestamp"} {
				j := []int{0, 1, 2, 4}[i]
				if !isDigits(string(f[j])) {
					return badRecord("%s %q is not an integer", what, f[j])
				}
			}
			et, ok := behaviorEdges[string(f[3])]
			if !ok {
				return badRecord("behavior %q is not pv, cart, fav or buy", f[3])
			}
			ts, err := parseTaobaoTime(string(f[4]))
			if err != nil {
				return err
			}
			user := graph.Ref{Type: graph.NodeUser, ID: "u" + string(f[0])}
			item := graph.Ref{Type: graph.NodeAd, ID: "i" + string(f[1])}
			cat := graph.Ref{Type: graph.NodeCategory, ID: "c" + string(f[2])}
			if err := em.entity(&graph.Entity{Type: user.Type, ID: user.ID}); err != nil {
				return err
			}
			if err := em.entity(&graph.Entity{Type: cat.Type, ID: cat.ID}); err != nil {
				return err
			}
			if em.first(item) {
				if err := sink.Entity(&graph.Entity{Type: item.Type, ID: item.ID, Attrs: map[string]string{"category": cat.ID}}); err != nil {
					return err
				}
				if err := em.event("", item, cat, graph.EdgeInCategory, ts); err != nil {
					return err
				}
			}
			id := "b" + string(f[0]) + "-" + string(f[1]) + "-" + string(f[4]) + "-" + string(f[3])
			return em.event(id, user, item, et, ts)
		})
		if err != nil {
			return Summary{}, err
		}
	}
	return Summary{}, nil
}
