package eval

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/graph"
)

// synthDir writes a dataset.Synth world of opts into a test directory and
// returns the directory.
func synthDir(t *testing.T, opts dataset.SynthOptions) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := dataset.Synth(context.Background(), opts, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// synthWorld is a small planted-cluster world: each user engages mostly with
// ads of one cluster, and an ad's text carries its cluster's words. Some users
// and ads only appear in the last fifth of the time range (cold).
type synthWorld struct {
	entities []graph.Entity
	events   []graph.Event
}

func makeSynth(seed uint64, users, itemsPerCluster, clusters int) *synthWorld {
	rng := rand.New(rand.NewPCG(seed, 99))
	w := &synthWorld{}
	const day = int64(24 * 3600 * 1000)
	t0 := int64(1_700_000_000_000)
	span := 100 * day
	nItems := itemsPerCluster * clusters
	itemArrival := make([]int64, nItems)
	for i := range nItems {
		c := i % clusters
		w.entities = append(w.entities, graph.Entity{Type: graph.NodeAd, ID: fmt.Sprintf("a%d", i),
			Text: fmt.Sprintf("topic%d theme%d gadget item number%d", c, c, i)})
		if (i/clusters)%10 == 3 { // a tenth of the ads launch late
			itemArrival[i] = t0 + span*90/100
		} else {
			itemArrival[i] = t0
		}
		w.events = append(w.events, graph.Event{Src: graph.Ref{Type: graph.NodeAd, ID: fmt.Sprintf("a%d", i)},
			Dst: graph.Ref{Type: graph.NodeCategory, ID: fmt.Sprintf("c%d", c)}, Type: graph.EdgeInCategory, TS: itemArrival[i], Weight: 1})
	}
	for c := range clusters {
		w.entities = append(w.entities, graph.Entity{Type: graph.NodeCategory, ID: fmt.Sprintf("c%d", c), Text: fmt.Sprintf("category%d", c)})
	}
	for u := range users {
		c := u % clusters
		uid := fmt.Sprintf("u%d", u)
		w.entities = append(w.entities, graph.Entity{Type: graph.NodeUser, ID: uid})
		start := t0
		n := 12 + rng.IntN(20)
		if u%6 == 5 { // late users: few interactions, all at the end
			start = t0 + span*82/100
			n = 2 + rng.IntN(6)
		}
		for k := range n {
			ts := start + rng.Int64N(t0+span-start)
			var item int
			typ := graph.EdgeClick
			switch r := rng.Float64(); {
			case r < 0.75: // in-cluster, skewed to low ranks
				item = c + clusters*min(itemsPerCluster-1, int(rng.ExpFloat64()*float64(itemsPerCluster)/4))
			case r < 0.9:
				item = rng.IntN(nItems)
				typ = graph.EdgeImpression
			default:
				item = rng.IntN(nItems)
				typ = graph.EdgeNotInterested
			}
			if ts < itemArrival[item] {
				ts = itemArrival[item] + rng.Int64N(t0+span-itemArrival[item])
			}
			w.events = append(w.events, graph.Event{ID: fmt.Sprintf("e%d-%d", u, k),
				Src: graph.Ref{Type: graph.NodeUser, ID: uid}, Dst: graph.Ref{Type: graph.NodeAd, ID: fmt.Sprintf("a%d", item)},
				Type: typ, TS: ts, Weight: 1})
		}
	}
	return w
}

func (w *synthWorld) data(t testing.TB) *Data {
	t.Helper()
	var c Collector
	for i := range w.entities {
		if err := c.Entity(&w.entities[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range w.events {
		if err := c.Event(&w.events[i]); err != nil {
			t.Fatal(err)
		}
	}
	d, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sharedData returns the shared data directory (HIR_SHARED_DATA, default
// ../../shared/data from this package) or skips the test.
func sharedData(t testing.TB, sub string) string {
	t.Helper()
	dir := os.Getenv("HIR_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	dir = filepath.Join(dir, sub)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared data %s not present: %v", dir, err)
	}
	return dir
}
