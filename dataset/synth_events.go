package dataset

import (
	"bufio"
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/hir-ads/hir/graph"
)

// sev is a synthetic event: refs are dense indices with their type.
type sev struct {
	ts         int64
	src, dst   int32
	srcT, dstT graph.NodeType
	t          graph.EdgeType
}

func compareSev(a, b sev) int {
	// Structure before engagement at the same instant, then a total order.
	return cmp.Or(cmp.Compare(a.ts, b.ts),
		cmp.Compare(engagementRank(a.t), engagementRank(b.t)),
		cmp.Compare(a.t, b.t),
		cmp.Compare(a.srcT, b.srcT), cmp.Compare(a.src, b.src),
		cmp.Compare(a.dstT, b.dstT), cmp.Compare(a.dst, b.dst))
}

func engagementRank(t graph.EdgeType) int {
	if t.IsStructure() {
		return 0
	}
	return 1
}

// dayChunk holds one day's events, sorted. Events are kept compact (24 bytes)
// and encoded only by the writer, so buffered days cost little memory.
type dayChunk struct {
	day int
	evs []sev
}

// genDay generates the events of day d into ch.
func (w *world) genDay(ctx context.Context, d int, ch *dayChunk) error {
	ch.day = d
	ch.evs = ch.evs[:0]
	lo := w.startMS + int64(d)*DayMS
	hi := lo + DayMS
	if d == 0 {
		lo = math.MinInt64 // nothing arrives earlier, but be safe
	}
	add := func(ts int64, srcT graph.NodeType, src int32, t graph.EdgeType, dstT graph.NodeType, dst int32) {
		ch.evs = append(ch.evs, sev{ts: ts, src: src, dst: dst, srcT: srcT, dstT: dstT, t: t})
	}

	// Structure of the entities arriving today.
	for _, a := range w.advsAll.between(0, lo, hi) {
		add(w.advArrival[a], graph.NodePixel, a, graph.EdgeOfAdvertiser, graph.NodeAdvertiser, a)
	}
	for _, c := range w.campsAll.between(0, lo, hi) {
		add(w.campArrival[c], graph.NodeCampaign, c, graph.EdgeOfAdvertiser, graph.NodeAdvertiser, w.campAdv[c])
	}
	for _, p := range w.prodsAll.between(0, lo, hi) {
		ts := w.prodArrival[p]
		add(ts, graph.NodeProduct, p, graph.EdgeInCategory, graph.NodeCategory, w.fineParent[w.prodFine(p)])
		add(ts, graph.NodeProduct, p, graph.EdgeOfBrand, graph.NodeBrand, w.campAdv[w.prodCamp[p]])
	}
	for _, ad := range w.adsAll.between(0, lo, hi) {
		ts := w.adArrival[ad]
		add(ts, graph.NodeAd, ad, graph.EdgeInCampaign, graph.NodeCampaign, w.adCamp[ad])
		add(ts, graph.NodeAd, ad, graph.EdgePromotes, graph.NodeProduct, w.adProd[ad])
		add(ts, graph.NodeAd, ad, graph.EdgeInCategory, graph.NodeCategory, w.fineParent[w.adFine(ad)])
	}
	lo = w.startMS + int64(d)*DayMS

	// Engagement: each user's impressions and their funnel.
	pcg := rand.NewPCG(0, 0)
	r := rand.New(pcg)
	for u := range w.o.Users {
		if u%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		from := max(lo, w.userArrival[u])
		if from >= hi || w.userRate[u] == 0 {
			continue
		}
		pcg.Seed(w.o.Seed, streamDay+uint64(d)<<32+uint64(u))
		n := poisson(r, w.userRate[u]*float64(hi-from))
		fines := w.userFine[w.userStart[u]:w.userStart[u+1]]
		weights := w.userW[w.userStart[u]:w.userStart[u+1]]
		uid := int32(u)
		for range n {
			ts := from + r.Int64N(hi-from)
			ad, ok := w.pickAd(r, fines, weights, ts)
			if !ok {
				continue
			}
			rel := w.relation(fines, w.adFine(ad))
			add(ts, graph.NodeUser, uid, graph.EdgeImpression, graph.NodeAd, ad)
			if rel == 0 && r.Float64() < 0.06 {
				add(min(ts+2000+r.Int64N(30000), hi-1), graph.NodeUser, uid, graph.EdgeNotInterested, graph.NodeAd, ad)
				continue
			}
			if r.Float64() >= clickRate[rel]*float64(w.adQuality[ad]) {
				continue
			}
			ts = min(ts+1000+r.Int64N(60000), hi-1)
			add(ts, graph.NodeUser, uid, graph.EdgeClick, graph.NodeAd, ad)
			if rel == 3 && r.Float64() < 0.05 {
				add(min(ts+5000+r.Int64N(60000), hi-1), graph.NodeUser, uid, graph.EdgeInterested, graph.NodeAd, ad)
			}
			cartRate, buyRate := 0.12, 0.02
			if rel >= 2 {
				cartRate, buyRate = 0.3, 0.03
			}
			cart := r.Float64() < cartRate
			if cart {
				ts = min(ts+30000+r.Int64N(20*60000), hi-1)
				add(ts, graph.NodeUser, uid, graph.EdgeAddToCart, graph.NodeAd, ad)
				buyRate = 0.3
			}
			if r.Float64() < buyRate {
				ts = min(ts+60000+r.Int64N(2*3600000), hi-1)
				add(ts, graph.NodeUser, uid, graph.EdgePurchase, graph.NodeAd, ad)
				add(min(ts+1000, hi-1), graph.NodeUser, uid, graph.EdgeFires, graph.NodePixel, w.campAdv[w.adCamp[ad]])
			}
		}
	}

	slices.SortFunc(ch.evs, compareSev)
	return nil
}

// pickAd chooses the ad of an impression at ts: mostly from the user's
// interests (weighted), otherwise at random among the ads alive at ts.
func (w *world) pickAd(r *rand.Rand, fines []int32, weights []float32, ts int64) (int32, bool) {
	x := r.Float64()
	if x < targetFine+targetMid+targetCoarse {
		f := fines[len(fines)-1]
		y := r.Float32()
		for i, wt := range weights {
			if y < wt {
				f = fines[i]
				break
			}
			y -= wt
		}
		// Fall back to coarser levels when no ad of the level is alive yet.
		m := w.fineParent[f]
		if x < targetFine {
			if ads := w.adsByFine.alive(int(f), ts); len(ads) > 0 {
				return ads[r.IntN(len(ads))], true
			}
		}
		if x < targetFine+targetMid {
			if ads := w.adsByMid.alive(int(m), ts); len(ads) > 0 {
				return ads[r.IntN(len(ads))], true
			}
		}
		if ads := w.adsByCoarse.alive(int(w.midParent[m]), ts); len(ads) > 0 {
			return ads[r.IntN(len(ads))], true
		}
	}
	ads := w.adsAll.alive(0, ts)
	if len(ads) == 0 {
		return 0, false
	}
	return ads[r.IntN(len(ads))], true
}

// relation grades how close fine interest f is to the user's interests:
// 3 same fine, 2 same mid, 1 same coarse, 0 unrelated.
func (w *world) relation(fines []int32, f int32) int {
	best := 0
	for _, uf := range fines {
		switch {
		case uf == f:
			return 3
		case w.fineParent[uf] == w.fineParent[f]:
			best = max(best, 2)
		case w.fineCoarse(uf) == w.fineCoarse(f):
			best = max(best, 1)
		}
	}
	return best
}

// poisson draws from a Poisson distribution with mean lambda.
func poisson(r *rand.Rand, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda > 30 {
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*r.NormFloat64())))
	}
	l := math.Exp(-lambda)
	k, p := 0, r.Float64()
	for p > l {
		k++
		p *= r.Float64()
	}
	return k
}

// appendSev encodes event i of day d; its id is "e<day>-<i>".
func appendSev(b []byte, d, i int, e *sev) []byte {
	b = append(b, `{"id":"e`...)
	b = strconv.AppendInt(b, int64(d), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","src":`...)
	b = append(b, refOpen[e.srcT]...)
	b = strconv.AppendInt(b, int64(e.src), 10)
	b = append(b, `"},"dst":`...)
	b = append(b, refOpen[e.dstT]...)
	b = strconv.AppendInt(b, int64(e.dst), 10)
	b = append(b, `"}`...)
	b = append(b, edgeNames[e.t]...)
	b = strconv.AppendInt(b, e.ts, 10)
	return append(b, `,"weight":1}`+"\n"...)
}

// writeEvents generates the days on GOMAXPROCS workers and encodes and writes
// them in order; at most 2*GOMAXPROCS days are buffered at a time.
func (w *world) writeEvents(ctx context.Context, bw *bufio.Writer, c *counter) error {
	workers := max(1, runtime.GOMAXPROCS(0))
	inFlight := 2 * workers
	g, gctx := errgroup.WithContext(ctx)
	done := make([]chan *dayChunk, w.o.Days)
	for d := range done {
		done[d] = make(chan *dayChunk, 1)
	}
	// The dispatcher hands out buffers in day order, so the earliest day not
	// yet written always has a buffer and a worker: no deadlock.
	jobs := make(chan *dayChunk)
	free := make(chan *dayChunk, inFlight)
	for range inFlight {
		free <- &dayChunk{}
	}
	g.Go(func() error {
		defer close(jobs)
		for d := range w.o.Days {
			var ch *dayChunk
			select {
			case ch = <-free:
			case <-gctx.Done():
				return gctx.Err()
			}
			ch.day = d
			select {
			case jobs <- ch:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range workers {
		g.Go(func() error {
			for ch := range jobs {
				if err := w.genDay(gctx, ch.day, ch); err != nil {
					return err
				}
				done[ch.day] <- ch
			}
			return nil
		})
	}
	g.Go(func() error {
		var scratch []byte
		for d := range w.o.Days {
			var ch *dayChunk
			select {
			case ch = <-done[d]:
			case <-gctx.Done():
				return gctx.Err()
			}
			var counts [graph.NumEdgeTypes]int
			for i := range ch.evs {
				scratch = appendSev(scratch[:0], d, i, &ch.evs[i])
				if _, err := bw.Write(scratch); err != nil {
					return err
				}
				counts[ch.evs[i].t]++
			}
			for t, n := range counts {
				if n > 0 {
					c.sum.Events += n
					c.sum.EventsByType[graph.EdgeType(t).String()] += n
					if graph.EdgeType(t).IsStructure() {
						c.sum.Structure += n
					} else {
						c.sum.Engagement += n
					}
				}
			}
			if len(ch.evs) > 0 {
				c.sum.MinTS = min(c.sum.MinTS, ch.evs[0].ts)
				c.sum.MaxTS = max(c.sum.MaxTS, ch.evs[len(ch.evs)-1].ts)
			}
			free <- ch
		}
		return nil
	})
	return g.Wait()
}
