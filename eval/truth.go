package eval

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/graph"
)

// Truth is the planted structure of a synthetic data set (from truth.json),
// keyed by external ids.
type Truth struct {
	// ItemInterest is each ad's planted fine interest.
	ItemInterest map[string]int
	// UserInterests are each user's planted fine interests.
	UserInterests map[string][]int
	// Levels are the planted hierarchy's labelings of the ads, coarsest
	// first (coarse, mid, fine), keyed by ad id: numbered as token levels
	// are everywhere (level 0 is the coarsest).
	Levels []map[string]int
}

// TruthFromDataset converts the planted structure written by dataset.Synth:
// ads' fine interests, users' interests, and the ads' fine, mid and coarse
// labels as the planted levels.
func TruthFromDataset(t *dataset.Truth) *Truth {
	out := &Truth{
		ItemInterest:  make(map[string]int),
		UserInterests: make(map[string][]int),
		Levels:        []map[string]int{{}, {}, {}}, // coarse, mid, fine
	}
	for _, e := range t.Entities {
		switch e.Type {
		case graph.NodeAd:
			out.ItemInterest[e.ID] = e.Fine
			out.Levels[0][e.ID], out.Levels[1][e.ID], out.Levels[2][e.ID] = e.Coarse, e.Mid, e.Fine
		case graph.NodeUser:
			ins := make([]int, 0, len(e.Interests))
			for _, in := range e.Interests {
				ins = append(ins, in.Fine)
			}
			if len(ins) == 0 && e.Fine >= 0 {
				ins = append(ins, e.Fine)
			}
			out.UserInterests[e.ID] = ins
		}
	}
	return out
}

// TokenLevels assigns each ad a token (cluster) per level of our hierarchy,
// coarsest first (level l is the API's token level l). It returns one map per level from ad id to code; an ad may be
// missing from a level.
type TokenLevels func(ctx context.Context) ([]map[string]int, error)

// TruthReport scores recovered structure against the planted one.
type TruthReport struct {
	// Levels compares each token level with each planted level.
	Levels []LevelAgreement `json:"levels,omitempty"`
	// InterestRecall is, by method, the mean over test users of the share
	// of the user's planted interests covered by the interests of the
	// method's top-K ads (key "interest_recall@K").
	InterestRecall []Result `json:"interest_recall,omitempty"`
}

// LevelAgreement is the agreement of one token level with one planted level.
type LevelAgreement struct {
	TokenLevel int     `json:"token_level"`
	TruthLevel int     `json:"truth_level"`
	Entities   int     `json:"entities"`
	Clusters   int     `json:"clusters"`
	NMI        float64 `json:"nmi"`
	Purity     float64 `json:"purity"`
}

// Agreement returns the normalised mutual information (arithmetic-mean
// normalisation) and the purity of a clustering pred against labels truth,
// both given per element. NMI is 1 for identical partitions up to renaming
// and 0 for independent ones; it is defined as 1 when both partitions have
// a single block. Purity is the share of elements whose cluster's majority
// label is their own.
func Agreement(truth, pred []int) (nmi, purity float64, err error) {
	if len(truth) != len(pred) {
		return 0, 0, fmt.Errorf("%w: %d labels but %d clusters", ErrBadConfig, len(truth), len(pred))
	}
	n := float64(len(truth))
	if n == 0 {
		return 0, 0, nil
	}
	type cell struct{ c, t int }
	joint := map[cell]float64{}
	ct, cp := map[int]float64{}, map[int]float64{}
	for i := range truth {
		joint[cell{pred[i], truth[i]}]++
		ct[truth[i]]++
		cp[pred[i]]++
	}
	entropy := func(m map[int]float64) float64 {
		var h float64
		for _, c := range m {
			h -= c / n * math.Log(c/n)
		}
		return h
	}
	var mi float64
	best := map[int]float64{}
	for k, c := range joint {
		mi += c / n * math.Log(c*n/(cp[k.c]*ct[k.t]))
		best[k.c] = max(best[k.c], c)
	}
	for _, c := range best {
		purity += c
	}
	ht, hp := entropy(ct), entropy(cp)
	switch {
	case ht == 0 && hp == 0:
		nmi = 1
	case ht+hp > 0:
		nmi = max(0, 2*mi/(ht+hp))
	}
	return nmi, purity / n, nil
}

// levelAgreements compares every token level with every planted level on
// the ads present in both.
func levelAgreements(tokens []map[string]int, truth *Truth) ([]LevelAgreement, error) {
	var out []LevelAgreement
	for tl, tok := range tokens {
		for pl, lab := range truth.Levels {
			ids := make([]string, 0, len(tok))
			for id := range tok {
				if _, ok := lab[id]; ok {
					ids = append(ids, id)
				}
			}
			slices.Sort(ids)
			t, p := make([]int, len(ids)), make([]int, len(ids))
			clusters := map[int]bool{}
			for i, id := range ids {
				t[i], p[i] = lab[id], tok[id]
				clusters[p[i]] = true
			}
			nmi, pur, err := Agreement(t, p)
			if err != nil {
				return nil, err
			}
			out = append(out, LevelAgreement{TokenLevel: tl, TruthLevel: pl, Entities: len(ids), Clusters: len(clusters), NMI: nmi, Purity: pur})
		}
	}
	return out, nil
}

// interestRecall returns the share of interests covered by the interests of
// the first k ranked items.
func interestRecall(ranked []int32, itemInterest []int, interests map[int]bool, k int) float64 {
	if len(interests) == 0 {
		return 0
	}
	got := map[int]bool{}
	for _, it := range ranked[:min(k, len(ranked))] {
		if in := itemInterest[it]; in >= 0 && interests[in] {
			got[in] = true
		}
	}
	return float64(len(got)) / float64(len(interests))
}

func (t *TruthReport) markdown() string {
	var b strings.Builder
	if len(t.Levels) > 0 {
		b.WriteString("| token level | planted level | ads | clusters | NMI | purity |\n|---:|---:|---:|---:|---:|---:|\n")
		for _, l := range t.Levels {
			fmt.Fprintf(&b, "| %d | %d | %d | %d | %.4f | %.4f |\n", l.TokenLevel, l.TruthLevel, l.Entities, l.Clusters, l.NMI, l.Purity)
		}
	}
	if len(t.InterestRecall) > 0 {
		var keys []string
		for k := range t.InterestRecall[0].Metrics {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { // "x@10" before "x@100"
			if c := cmp.Compare(len(a), len(b)); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		b.WriteString("\n| method | users |")
		for _, k := range keys {
			b.WriteString(" " + k + " |")
		}
		b.WriteString("\n|---|---:|" + strings.Repeat("---:|", len(keys)) + "\n")
		for _, r := range t.InterestRecall {
			fmt.Fprintf(&b, "| %s | %d |", r.Method, r.Queries)
			for _, k := range keys {
				fmt.Fprintf(&b, " %.4f |", r.Metrics[k])
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
