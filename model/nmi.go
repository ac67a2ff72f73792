package model

import "math"

// NMI returns the normalised mutual information of two labelings of the same
// items, I(a;b)/sqrt(H(a)H(b)), in [0, 1]. It returns 0 when either labeling
// is constant or the lengths differ or are zero.
func NMI(a, b []int) float64 {
	n := len(a)
	if n == 0 || n != len(b) {
		return 0
	}
	ca, cb := map[int]float64{}, map[int]float64{}
	joint := map[[2]int]float64{}
	for i := range a {
		ca[a[i]]++
		cb[b[i]]++
		joint[[2]int{a[i], b[i]}]++
	}
	fn := float64(n)
	ent := func(c map[int]float64) float64 {
		h := 0.0
		for _, v := range c {
			p := v / fn
			h -= p * math.Log(p)
		}
		return h
	}
	ha, hb := ent(ca), ent(cb)
	if ha == 0 || hb == 0 {
		return 0
	}
	mi := 0.0
	for k, v := range joint {
		p := v / fn
		mi += p * math.Log(p/(ca[k[0]]/fn*cb[k[1]]/fn))
	}
	return math.Max(0, math.Min(1, mi/math.Sqrt(ha*hb)))
}
