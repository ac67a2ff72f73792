package graph

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// loadMovieLens reads u.data into events: user -> movie (as an ad) clicks
// weighted by rating/5, with ratings <= 2 as not_interested.
func loadMovieLens(t testing.TB) []Event {
	t.Helper()
	dir := sharedData(t, "movielens-100k")
	f, err := os.Open(filepath.Join(dir, "u.data"))
	if err != nil {
		t.Fatalf("open u.data: %v", err)
	}
	defer f.Close()
	var evs []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			t.Fatalf("u.data line %q: want 4 fields", sc.Text())
		}
		rating, err1 := strconv.Atoi(fs[2])
		sec, err2 := strconv.ParseInt(fs[3], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("u.data line %q: bad number", sc.Text())
		}
		et := EdgeClick
		if rating <= 2 {
			et = EdgeNotInterested
		}
		evs = append(evs, Event{Src: Ref{Type: NodeUser, ID: fs[0]}, Dst: Ref{Type: NodeAd, ID: fs[1]},
			Type: et, TS: sec * 1000, Weight: float32(rating) / 5})
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read u.data: %v", err)
	}
	return evs
}

func TestMovieLens(t *testing.T) {
	evs := loadMovieLens(t)
	s := buildStore(t, Options{}, evs)
	if got := s.NumEvents(); got != 100000 {
		t.Errorf("NumEvents() = %d, want 100000", got)
	}
	if u, a := s.NumNodes(NodeUser), s.NumNodes(NodeAd); u != 943 || a != 1682 {
		t.Errorf("NumNodes = %d users, %d ads, want 943, 1682", u, a)
	}
	ws, err := SplitByTime(s.MinTS(), s.MaxTS(), 0.8, 0.1, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	// Every event lands in exactly one window.
	total := 0
	for _, w := range ws {
		s.ForEachEdge(w.From, w.To, func(NodeID, Edge) bool { total++; return true })
	}
	if total != 100000 {
		t.Errorf("events over the three windows = %d, want 100000", total)
	}
	asOf := ws[0].To - 1
	sm := NewSampler(s, SamplerOptions{})
	n := 20
	if testing.Short() {
		n = 4
	}
	for i := range n {
		for _, view := range []View{ViewTeacher, ViewStudent} {
			g := sm.Sample(NodeID{NodeUser, uint32(i * 40)}, asOf, view, uint64(i))
			checkSubgraph(t, s, g, sm.ViewOptions(view), nil)
		}
	}
}
