package graph

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// benchEvents streams n synthetic engagement events between users and ads:
// time increasing, except that latePct percent of events are late by up to
// an hour.
func benchEvents(n, users, ads, latePct int, seed uint64, fn func(Event)) {
	rng := rand.New(rand.NewPCG(seed, 1))
	uids := make([]string, users)
	for i := range uids {
		uids[i] = "u" + strconv.Itoa(i)
	}
	aids := make([]string, ads)
	for i := range aids {
		aids[i] = "a" + strconv.Itoa(i)
	}
	ts := int64(1_700_000_000_000)
	for range n {
		ts += int64(rng.IntN(600))
		t := ts
		if rng.IntN(100) < latePct {
			t -= rng.Int64N(3_600_000)
		}
		et := EdgeImpression
		if rng.IntN(5) == 0 {
			et = EdgeType(2 + rng.IntN(6))
		}
		fn(Event{Src: Ref{Type: NodeUser, ID: uids[rng.IntN(users)]}, Dst: Ref{Type: NodeAd, ID: aids[rng.IntN(ads)]},
			Type: et, TS: t, Weight: 1})
	}
}

func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkStoreMemory measures heap bytes per stored edge direction for 1M
// events between 10k users and 50k ads (nodes registered beforehand, so the
// figure is adjacency only), as appended and after Compact.
func BenchmarkStoreMemory(b *testing.B) {
	const events, users, ads = 1_000_000, 10_000, 50_000
	for b.Loop() {
		s := NewStore(Options{})
		for i := range users {
			if _, err := s.Intern(Ref{Type: NodeUser, ID: "u" + strconv.Itoa(i)}); err != nil {
				b.Fatal(err)
			}
		}
		for i := range ads {
			if _, err := s.Intern(Ref{Type: NodeAd, ID: "a" + strconv.Itoa(i)}); err != nil {
				b.Fatal(err)
			}
		}
		before := heapBytes()
		benchEvents(events, users, ads, 10, 1, func(ev Event) {
			if _, err := s.AddEvent(ev); err != nil {
				b.Fatal(err)
			}
		})
		appended := heapBytes()
		s.Compact()
		compacted := heapBytes()
		runtime.KeepAlive(s)
		b.ReportMetric(float64(appended-before)/(2*events), "B/edge-dir")
		b.ReportMetric(float64(compacted-before)/(2*events), "B/edge-dir-compacted")
	}
}

func BenchmarkAddEvent(b *testing.B) {
	const n = 1 << 20
	for _, late := range []int{0, 10} {
		b.Run("late="+strconv.Itoa(late)+"%", func(b *testing.B) {
			evs := make([]Event, 0, n)
			benchEvents(n, 10_000, 50_000, late, 2, func(ev Event) { evs = append(evs, ev) })
			span := evs[n-1].TS - evs[0].TS + 2*3_600_000
			s := NewStore(Options{})
			b.ReportAllocs()
			i := 0
			start := time.Now()
			for b.Loop() {
				ev := evs[i%n]
				ev.TS += int64(i/n) * span // later rounds follow the earlier ones in time
				if _, err := s.AddEvent(ev); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(2*i)/time.Since(start).Seconds(), "edge-dirs/s")
			b.ReportMetric(float64(i)/time.Since(start).Seconds(), "events/s")
		})
	}
}

func BenchmarkSample(b *testing.B) {
	const users, ads = 5_000, 20_000
	s := NewStore(Options{})
	benchEvents(300_000, users, ads, 10, 3, func(ev Event) {
		if _, err := s.AddEvent(ev); err != nil {
			b.Fatal(err)
		}
	})
	for a := range ads {
		ev := Event{Src: Ref{Type: NodeAd, ID: "a" + strconv.Itoa(a)}, Dst: Ref{Type: NodeCampaign, ID: "c" + strconv.Itoa(a%500)},
			Type: EdgeInCampaign, TS: 1_600_000_000_000, Weight: 1}
		if _, err := s.AddEvent(ev); err != nil {
			b.Fatal(err)
		}
	}
	s.Compact()
	asOf := s.MaxTS()
	sm := NewSampler(s, SamplerOptions{})
	for _, view := range []View{ViewTeacher, ViewStudent} {
		b.Run("view="+view.String(), func(b *testing.B) {
			b.ReportAllocs()
			i, tokens := 0, 0
			start := time.Now()
			for b.Loop() {
				g := sm.Sample(NodeID{NodeUser, uint32(i % users)}, asOf, view, uint64(i))
				tokens += g.Len
				i++
			}
			b.ReportMetric(float64(i)/time.Since(start).Seconds(), "subgraphs/s")
			b.ReportMetric(float64(tokens)/float64(i), "tokens/subgraph")
		})
	}
}
