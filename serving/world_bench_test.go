package serving

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/rank"
	"github.com/hir-ads/hir/retrieval"
)

// BenchmarkRetrieveWorld measures retrieval.Engine.Retrieve in process on
// the trained world of a data directory (HIR_BENCH_DATA=DIR: `hir synth`
// + `hir import` + `hir train`, and one `hir serve` start so that the
// generation files are persisted): known users (not new, served their
// generation embedding), k = 100, unfiltered and under a category filter
// keeping about 1% of the ads, and fresh users (a never-seen id with five
// click context events, embedded on every request, one at a time, from the
// teacher view and from the narrow student view), and known users at the model version's
// calibrated prior weight, as hir serve weighs them. It reports per-query latency percentiles
// and recall@100 against the exact top-100 (Exhaustive: every allowed ad
// re-ranked by the same score) of the same queries.
//
//	HIR_BENCH_DATA=/tmp/w100k/data go test ./serving -run '^$' -bench RetrieveWorld -benchtime 2000x -benchmem
//
// HIR_BENCH_EXHAUSTIVE_MAX=N sets index.SearchOptions.ExhaustiveMax and
// HIR_BENCH_RESIDUAL_FIRST=1 its ResidualFirst, HIR_BENCH_SPLIT_OVER=N its
// SplitOver (-1: postings taken whole), HIR_BENCH_WORKERS=N its Workers
// (1: one goroutine a query), HIR_BENCH_BAND=X its ErrorBand (0
// or -1: every doc scored exactly), HIR_BENCH_CANDIDATE_FACTOR=N its
// CandidateFactor, HIR_BENCH_WHOLE_SHARE=X its WholeShare (-1: no
// candidates from the whole-embedding cells); HIR_BENCH_PRIOR=W adds
// known users at prior weight W, unfiltered and under the 1% filter.
func BenchmarkRetrieveWorld(b *testing.B) {
	dir := os.Getenv("HIR_BENCH_DATA")
	if dir == "" {
		b.Skip("set HIR_BENCH_DATA to a trained data directory")
	}
	ctx := context.Background()
	log, store, _, err := OpenStore(ctx, eventlog.Options{Dir: filepath.Join(dir, "log")}, graph.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	vdir, err := model.LatestVersionDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.Load(vdir)
	if err != nil {
		b.Fatal(err)
	}
	// HIR_BENCH_EXHAUSTIVE_MAX overrides SearchOptions.ExhaustiveMax: the
	// largest allowed set re-ranked whole instead of through the tokens.
	// HIR_BENCH_RESIDUAL_FIRST=1 sets SearchOptions.ResidualFirst.
	var search index.SearchOptions
	if v := os.Getenv("HIR_BENCH_EXHAUSTIVE_MAX"); v != "" {
		if search.ExhaustiveMax, err = strconv.Atoi(v); err != nil {
			b.Fatalf("HIR_BENCH_EXHAUSTIVE_MAX: %v", err)
		}
	}
	search.ResidualFirst = os.Getenv("HIR_BENCH_RESIDUAL_FIRST") == "1"
	if v := os.Getenv("HIR_BENCH_SPLIT_OVER"); v != "" {
		if search.SplitOver, err = strconv.Atoi(v); err != nil {
			b.Fatalf("HIR_BENCH_SPLIT_OVER: %v", err)
		}
	}
	if v := os.Getenv("HIR_BENCH_WORKERS"); v != "" {
		if search.Workers, err = strconv.Atoi(v); err != nil {
			b.Fatalf("HIR_BENCH_WORKERS: %v", err)
		}
	}
	if v := os.Getenv("HIR_BENCH_CANDIDATE_FACTOR"); v != "" {
		if search.CandidateFactor, err = strconv.Atoi(v); err != nil {
			b.Fatalf("HIR_BENCH_CANDIDATE_FACTOR: %v", err)
		}
	}
	if v := os.Getenv("HIR_BENCH_WHOLE_SHARE"); v != "" {
		share, err := strconv.ParseFloat(v, 32)
		if err != nil {
			b.Fatalf("HIR_BENCH_WHOLE_SHARE: %v", err)
		}
		search.WholeShare = float32(share)
	}
	if v := os.Getenv("HIR_BENCH_BAND"); v != "" {
		band, err := strconv.ParseFloat(v, 32)
		if err != nil {
			b.Fatalf("HIR_BENCH_BAND: %v", err)
		}
		search.ErrorBand = float32(band)
	}
	// Two engines on the same files: request-time users embedded from the
	// teacher view and from the narrow student view.
	engine := func(narrow, calibrated bool) (*retrieval.Engine, *retrieval.Served) {
		served, err := retrieval.Open(ctx, m, store, vdir, store.MaxTS(), retrieval.BuildOptions{Search: search})
		if err != nil {
			b.Fatal(err)
		}
		eng, err := retrieval.NewEngine(store, retrieval.Options{Rank: rank.DefaultOptions(), Weights: rank.DefaultWeights(),
			NoKeywords: true, NarrowRequestView: narrow, CalibratedPrior: calibrated})
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.Publish(ctx, served); err != nil {
			b.Fatal(err)
		}
		return eng, served
	}
	eng, served := engine(false, false)
	defer eng.Close()
	narrowEng, _ := engine(true, false)
	defer narrowEng.Close()
	// As hir serve does: the model version's calibrated prior weight.
	calEng, _ := engine(false, true)
	defer calEng.Close()
	// Known users that are not new: served their generation embedding.
	var users []graph.Ref
	asOf := store.MaxTS()
	for i := range store.NumNodes(graph.NodeUser) {
		id := graph.NodeID{Type: graph.NodeUser, Idx: uint32(i)}
		if d := store.Degree(id, asOf); !eng.Options().Rank.NewUser.Is(d) && d == store.Degree(id, served.AsOf()) {
			users = append(users, store.Ref(id))
		}
		if len(users) == 1000 {
			break
		}
	}
	if len(users) == 0 {
		b.Fatal("no known user that is not new")
	}
	ads := served.IndexSize()
	onePct := onePercentFilter(b, served, ads)
	// Fresh users: a never-seen id with the five newest ad engagements of
	// a known user as click context events, embedded on every request.
	fresh := make([]retrieval.Request, len(users))
	for i, u := range users {
		id, _ := store.Lookup(u)
		ref := graph.Ref{Type: graph.NodeUser, ID: "fresh-" + u.ID}
		r := retrieval.Request{User: &ref, K: 100, ExcludeSeen: true}
		store.Neighbors(id, asOf, func(ed graph.Edge) bool {
			if ed.Nbr.Type == graph.NodeAd && rank.Engaged(ed) {
				r.ContextEvents = append(r.ContextEvents, graph.Event{Src: ref, Dst: store.Ref(ed.Nbr), Type: graph.EdgeClick, TS: ed.TS, Weight: 1})
			}
			return len(r.ContextEvents) < 5
		})
		fresh[i] = r
	}
	type benchCase struct {
		name    string
		filter  *index.Filter
		weights retrieval.WeightOverrides
		fresh   bool
	}
	// HIR_BENCH_PRIOR=W adds known users at prior weight W (a model
	// version's calibrated weight without its calibration).
	var extra []benchCase
	if v := os.Getenv("HIR_BENCH_PRIOR"); v != "" {
		w, err := strconv.ParseFloat(v, 32)
		if err != nil {
			b.Fatalf("HIR_BENCH_PRIOR: %v", err)
		}
		prior := float32(w)
		pw := retrieval.WeightOverrides{Prior: &prior}
		extra = []benchCase{{"filter=none/prior=" + v, nil, pw, false}, {"filter=1%/prior=" + v, onePct, pw, false}}
	}
	var engines, zero = retrieval.WeightOverrides{}, float32(0)
	for _, fc := range append([]benchCase{
		{"filter=none", nil, engines, false},
		{"filter=1%", onePct, engines, false},
		{"filter=none/similarity-only", nil, retrieval.WeightOverrides{Prior: &zero, CoEngagement: &zero, NewAdShare: &zero}, false},
		{"filter=none/no-new-ad-share", nil, retrieval.WeightOverrides{NewAdShare: &zero}, false},
		{"filter=none/calibrated-prior", nil, engines, false},
		{"fresh/filter=none", nil, engines, true},
		{"fresh/narrow/filter=none", nil, engines, true},
	}, extra...) {
		b.Run(fc.name, func(b *testing.B) {
			eng := eng
			switch {
			case strings.Contains(fc.name, "narrow"):
				eng = narrowEng
			case strings.Contains(fc.name, "calibrated"):
				eng = calEng
			}
			req := func(i int) retrieval.Request {
				if fc.fresh {
					return fresh[i%len(fresh)]
				}
				u := users[i%len(users)]
				return retrieval.Request{User: &u, K: 100, ExcludeSeen: true, Filter: fc.filter, Weights: fc.weights}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			i, reranked, exact := 0, 0, 0
			perQuery := make([]int, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				res, err := eng.Retrieve(ctx, req(i))
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				reranked += res.Stats.Candidates
				perQuery = append(perQuery, res.Stats.Candidates)
				exact += res.Stats.Exact
				i++
			}
			b.StopTimer()
			b.ReportMetric(float64(reranked)/float64(i), "candidates/op")
			b.ReportMetric(float64(exact)/float64(i), "exact/op")
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) }
			b.ReportMetric(pct(0.5), "p50_µs")
			b.ReportMetric(pct(0.99), "p99_µs")
			slices.Sort(perQuery)
			b.ReportMetric(float64(perQuery[min(len(perQuery)-1, len(perQuery)*99/100)]), "candidates_p99")
			b.ReportMetric(float64(ads), "ads")
			// Recall@100 against the exact top-100 of the same score.
			var hit, total int
			for i := range min(200, len(users)) {
				r := req(i)
				got, err := eng.Retrieve(ctx, r)
				if err != nil {
					b.Fatal(err)
				}
				r.Exhaustive = true
				exact, err := eng.Retrieve(ctx, r)
				if err != nil {
					b.Fatal(err)
				}
				in := map[uint32]bool{}
				for _, c := range got.Candidates {
					in[c.Ad] = true
				}
				for _, c := range exact.Candidates {
					if in[c.Ad] {
						hit++
					}
				}
				total += len(exact.Candidates)
			}
			b.ReportMetric(float64(hit)/float64(max(total, 1)), "recall@100")
		})
	}
}

// onePercentFilter returns the filter keeping closest to (at least) 1% of
// the ads among those naming the first values of one attribute of the
// synthetic world (brand, advertiser, campaign, category) in index order.
func onePercentFilter(b *testing.B, s *retrieval.Served, ads int) *index.Filter {
	var best *index.Filter
	bestN := 0
	for _, a := range []struct{ key, prefix string }{{index.AttrBrand, "b"}, {index.AttrAdvertiser, "adv"},
		{index.AttrCampaign, "cp"}, {index.AttrCategory, "cat"}} {
		var in []string
		for v := 0; v < 10000; v++ {
			in = append(in, a.prefix+strconv.Itoa(v))
			f := &index.Filter{Attr: a.key, In: slices.Clone(in)}
			n, err := s.Allowed(f)
			if err != nil {
				b.Fatal(err)
			}
			if n*100 >= ads {
				if best == nil || n < bestN {
					best, bestN = f, n
				}
				break
			}
		}
	}
	if best == nil {
		b.Fatal(fmt.Sprintf("no filter reaches 1%% of %d ads", ads))
	}
	b.Logf("filter %s in %d values: %d of %d ads (%.2f%%)", best.Attr, len(best.In), bestN, ads, 100*float64(bestN)/float64(ads))
	return best
}
