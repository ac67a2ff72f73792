package index

import (
	"math"
	"math/rand/v2"
	"slices"
)

// refHNSW is a textbook HNSW (Malkov & Yashunin 2018, algorithms 1, 2 and
// 4: beam search with ef, heuristic neighbour selection, 2M links on layer
// 0) over L2-normalised vectors with dot-product similarity. It exists only
// as a working HNSW baseline for the benchmarks, because
// github.com/coder/hnsw v0.6.1 has search and heap bugs that cap its recall
// (see docs/benchmarks.md). Not safe for concurrent use.
type refHNSW struct {
	vecs     [][]float32
	m, efC   int
	ml       float64
	links    [][][]uint32 // links[node][level]
	entry    uint32
	maxLevel int
	rng      *rand.Rand
	visited  []uint32 // generation stamps
	gen      uint32
}

type simCand struct {
	id  uint32
	sim float32
}

func newRefHNSW(vecs [][]float32, m, efC int, seed uint64) *refHNSW {
	h := &refHNSW{vecs: vecs, m: m, efC: efC, ml: 1 / math.Log(float64(m)),
		links: make([][][]uint32, len(vecs)), maxLevel: -1,
		rng: rand.New(rand.NewPCG(seed, 3)), visited: make([]uint32, len(vecs))}
	for i := range vecs {
		h.insert(uint32(i))
	}
	return h
}

// heap helpers: best-first (max sim at 0) when max, worst-first when !max.
func heapUp(h []simCand, i int, max bool) {
	for i > 0 {
		p := (i - 1) / 2
		if (h[i].sim > h[p].sim) != max || h[i].sim == h[p].sim {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func heapDown(h []simCand, i int, max bool) {
	for {
		l, best := 2*i+1, i
		if l < len(h) && (h[l].sim > h[best].sim) == max && h[l].sim != h[best].sim {
			best = l
		}
		if r := l + 1; r < len(h) && (h[r].sim > h[best].sim) == max && h[r].sim != h[best].sim {
			best = r
		}
		if best == i {
			return
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
}

func heapPush(h []simCand, c simCand, max bool) []simCand {
	h = append(h, c)
	heapUp(h, len(h)-1, max)
	return h
}

func heapPop(h []simCand, max bool) (simCand, []simCand) {
	top := h[0]
	h[0] = h[len(h)-1]
	h = h[:len(h)-1]
	heapDown(h, 0, max)
	return top, h
}

// searchLayer is algorithm 2: beam search of width ef from eps; it returns
// the ef most similar nodes found, most similar first.
func (h *refHNSW) searchLayer(q []float32, eps []simCand, ef, level int) []simCand {
	h.gen++
	if h.gen == 0 {
		clear(h.visited)
		h.gen = 1
	}
	var cands, res []simCand // cands: max-heap; res: min-heap (worst on top)
	for _, e := range eps {
		h.visited[e.id] = h.gen
		cands = heapPush(cands, e, true)
		res = heapPush(res, e, false)
		if len(res) > ef {
			_, res = heapPop(res, false)
		}
	}
	for len(cands) > 0 {
		var c simCand
		c, cands = heapPop(cands, true)
		if len(res) >= ef && c.sim < res[0].sim {
			break
		}
		if level >= len(h.links[c.id]) {
			continue
		}
		for _, nb := range h.links[c.id][level] {
			if h.visited[nb] == h.gen {
				continue
			}
			h.visited[nb] = h.gen
			s := Dot(q, h.vecs[nb])
			if len(res) < ef || s > res[0].sim {
				cands = heapPush(cands, simCand{nb, s}, true)
				res = heapPush(res, simCand{nb, s}, false)
				if len(res) > ef {
					_, res = heapPop(res, false)
				}
			}
		}
	}
	slices.SortFunc(res, func(a, b simCand) int {
		if a.sim > b.sim {
			return -1
		}
		if a.sim < b.sim {
			return 1
		}
		return int(a.id) - int(b.id)
	})
	return res
}

// selectNeighbours is algorithm 4 (heuristic): keep a candidate only if it
// is more similar to the base than to every neighbour kept so far. cands
// must be sorted most similar first.
func (h *refHNSW) selectNeighbours(cands []simCand, m int) []uint32 {
	out := make([]uint32, 0, m)
	for _, c := range cands {
		if len(out) == m {
			break
		}
		ok := true
		for _, r := range out {
			if Dot(h.vecs[c.id], h.vecs[r]) > c.sim {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, c.id)
		}
	}
	return out
}

func (h *refHNSW) maxLinks(level int) int {
	if level == 0 {
		return 2 * h.m
	}
	return h.m
}

// insert is algorithm 1.
func (h *refHNSW) insert(id uint32) {
	q := h.vecs[id]
	lvl := int(-math.Log(1-h.rng.Float64()) * h.ml)
	h.links[id] = make([][]uint32, lvl+1)
	if h.maxLevel < 0 {
		h.entry, h.maxLevel = id, lvl
		return
	}
	eps := []simCand{{h.entry, Dot(q, h.vecs[h.entry])}}
	for l := h.maxLevel; l > lvl; l-- {
		eps = h.searchLayer(q, eps, 1, l)[:1]
	}
	for l := min(lvl, h.maxLevel); l >= 0; l-- {
		w := h.searchLayer(q, eps, h.efC, l)
		nbs := h.selectNeighbours(w, h.m)
		h.links[id][l] = nbs
		for _, nb := range nbs {
			ls := append(h.links[nb][l], id)
			if len(ls) > h.maxLinks(l) {
				base := h.vecs[nb]
				cs := make([]simCand, len(ls))
				for i, x := range ls {
					cs[i] = simCand{x, Dot(base, h.vecs[x])}
				}
				slices.SortFunc(cs, func(a, b simCand) int {
					if a.sim > b.sim {
						return -1
					}
					if a.sim < b.sim {
						return 1
					}
					return 0
				})
				ls = h.selectNeighbours(cs, h.maxLinks(l))
			}
			h.links[nb][l] = ls
		}
		eps = w
	}
	if lvl > h.maxLevel {
		h.entry, h.maxLevel = id, lvl
	}
}

// search returns the k most similar nodes found with beam width max(ef, k).
func (h *refHNSW) search(q []float32, k, ef int) []simCand {
	if h.maxLevel < 0 {
		return nil
	}
	eps := []simCand{{h.entry, Dot(q, h.vecs[h.entry])}}
	for l := h.maxLevel; l > 0; l-- {
		eps = h.searchLayer(q, eps, 1, l)[:1]
	}
	res := h.searchLayer(q, eps, max(ef, k), 0)
	return res[:min(k, len(res))]
}

// bytes returns the memory held by the link lists (4 B per link plus
// slice headers), excluding the vectors.
func (h *refHNSW) bytes() int {
	n := 0
	for _, ls := range h.links {
		n += 24
		for _, l := range ls {
			n += 24 + 4*cap(l)
		}
	}
	return n
}
