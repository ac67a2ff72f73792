package model

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// StepMetrics is one progress record (a JSON line when not on a terminal).
type StepMetrics struct {
	Step       int       `json:"step"`
	Total      float64   `json:"loss"`
	Distill    []float64 `json:"distill"`
	Hierarchy  float64   `json:"hierarchy"`
	Engagement float64   `json:"engagement"`
	Align      float64   `json:"align"`
	ColdAlign  float64   `json:"cold_align"`
	// UsageEntropy is, per level, the entropy of the teacher's hard cluster
	// usage over the last LogEvery steps, divided by log(K): 1 is uniform.
	UsageEntropy []float64   `json:"usage_entropy"`
	AnchorsPerS  float64     `json:"anchors_per_s"`
	Validation   *ValMetrics `json:"validation,omitempty"`
}

// ValMetrics are the losses on the validation window and the engagement AUC.
type ValMetrics struct {
	Total      float64   `json:"loss"`
	Distill    []float64 `json:"distill"`
	Hierarchy  float64   `json:"hierarchy"`
	Engagement float64   `json:"engagement"`
	Align      float64   `json:"align"`
	ColdAlign  float64   `json:"cold_align"`
	AUC        float64   `json:"engagement_auc"`
	Pairs      int       `json:"pairs"`
}

// TrainMetrics summarise a run; they are stored in metrics.json.
type TrainMetrics struct {
	Version     string `json:"version"`
	GlobalStep  int    `json:"global_step"`
	Steps       int    `json:"steps"`
	TrainEvents int    `json:"train_events"`
	ValEvents   int    `json:"val_events"`
	SplitTS     int64  `json:"split_ts"`
	// SpectralAds and SpectralSeconds: the ads given spectral factors
	// (Config.Spectral) and the seconds their fit took, before the first
	// step (not in Seconds).
	SpectralAds     int           `json:"spectral_ads,omitempty"`
	SpectralSeconds float64       `json:"spectral_seconds,omitempty"`
	Seconds         float64       `json:"seconds"`
	AnchorsPerS     float64       `json:"anchors_per_s"`
	First           *StepMetrics  `json:"first,omitempty"`
	Last            *StepMetrics  `json:"last,omitempty"`
	Validation      *ValMetrics   `json:"validation,omitempty"`
	History         []StepMetrics `json:"history,omitempty"`
}

func scalarOf(t *tensors.Tensor) float64 {
	switch v := t.Value().(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	return math.NaN()
}

func readStepOutputs(outs []*tensors.Tensor, levels int) StepMetrics {
	sm := StepMetrics{Total: scalarOf(outs[outTotal]), Engagement: scalarOf(outs[outEngage]),
		Hierarchy: scalarOf(outs[outHier]), Align: scalarOf(outs[outAlign]), ColdAlign: scalarOf(outs[outColdAlign]),
		Distill: make([]float64, levels)}
	for l := range levels {
		sm.Distill[l] = scalarOf(outs[outFirstDistill+l])
	}
	return sm
}

func accumulate(acc *StepMetrics, sm StepMetrics, n *int) {
	acc.Total += sm.Total
	acc.Engagement += sm.Engagement
	acc.Hierarchy += sm.Hierarchy
	acc.Align += sm.Align
	acc.ColdAlign += sm.ColdAlign
	if acc.Distill == nil {
		acc.Distill = make([]float64, len(sm.Distill))
	}
	for i, d := range sm.Distill {
		acc.Distill[i] += d
	}
	*n++
}

func average(acc StepMetrics, n int) StepMetrics {
	if n == 0 {
		return acc
	}
	f := 1 / float64(n)
	out := StepMetrics{Total: acc.Total * f, Engagement: acc.Engagement * f, Hierarchy: acc.Hierarchy * f, Align: acc.Align * f,
		ColdAlign: acc.ColdAlign * f}
	for _, d := range acc.Distill {
		out.Distill = append(out.Distill, d*f)
	}
	return out
}

// usageEntropy is the entropy of counts divided by log(len(counts)).
func usageEntropy(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	if total == 0 || len(counts) < 2 {
		return 0
	}
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(total)
			h -= p * math.Log(p)
		}
	}
	return h / math.Log(float64(len(counts)))
}

// validate evaluates the losses and engagement AUC on the validation window,
// with the graph as of the split.
func (tr *trainer) validate(exec *context.Exec) (*ValMetrics, error) {
	if len(tr.val) < tr.cfg.Pairs {
		return nil, nil
	}
	P := tr.cfg.Pairs
	n := min(tr.cfg.ValPairs, len(tr.val)) / P * P
	rng := rand.New(rand.NewPCG(seedFor(tr.cfg.Seed, 3), 5))
	idx := rng.Perm(len(tr.val))[:n]
	slices.Sort(idx)
	L := len(tr.cfg.Model.Prototypes)
	vm := &ValMetrics{Distill: make([]float64, L)}
	var scores []float64
	var labels []bool
	batches := 0
	for b := 0; b+P <= n; b += P {
		evs := make([]event, P)
		for i := range P {
			evs[i] = tr.val[idx[b+i]]
		}
		sb := tr.buildStep(b/P, evs, tr.splitTS-1, 4)
		if sb.err != nil {
			return nil, fmt.Errorf("validation batch: %w", sb.err)
		}
		outs, err := exec.Exec(anySlice(sb.inputs)...)
		if err != nil {
			return nil, fmt.Errorf("validation step: %w", err)
		}
		sm := readStepOutputs(outs, L)
		vm.Total += sm.Total
		vm.Engagement += sm.Engagement
		vm.Hierarchy += sm.Hierarchy
		vm.Align += sm.Align
		vm.ColdAlign += sm.ColdAlign
		for l := range L {
			vm.Distill[l] += sm.Distill[l]
		}
		logits := tensors.MustCopyFlatData[float32](outs[outFirstDistill+2*L])
		for i, lg := range logits {
			if sb.weights[i] > 0 {
				scores = append(scores, float64(lg))
				labels = append(labels, sb.labels[i] > 0.5)
			}
		}
		batches++
	}
	if batches == 0 {
		return nil, nil
	}
	f := 1 / float64(batches)
	vm.Total *= f
	vm.Engagement *= f
	vm.Hierarchy *= f
	vm.Align *= f
	vm.ColdAlign *= f
	for l := range L {
		vm.Distill[l] *= f
	}
	vm.AUC = AUC(scores, labels)
	vm.Pairs = n
	return vm, nil
}

// AUC is the area under the ROC curve of scores for the positive labels
// (ties count one half). It returns NaN without both classes.
func AUC(scores []float64, positive []bool) float64 {
	type sl struct {
		s   float64
		pos bool
	}
	xs := make([]sl, len(scores))
	np := 0
	for i := range scores {
		xs[i] = sl{scores[i], positive[i]}
		if positive[i] {
			np++
		}
	}
	nn := len(xs) - np
	if np == 0 || nn == 0 {
		return math.NaN()
	}
	slices.SortFunc(xs, func(a, b sl) int { return cmp.Compare(a.s, b.s) })
	rankSum := 0.0
	for i := 0; i < len(xs); {
		j := i
		for j < len(xs) && xs[j].s == xs[i].s {
			j++
		}
		avg := float64(i+j+1) / 2 // ranks are 1-based
		for k := i; k < j; k++ {
			if xs[k].pos {
				rankSum += avg
			}
		}
		i = j
	}
	return (rankSum - float64(np)*float64(np+1)/2) / (float64(np) * float64(nn))
}

// Progress receives a training run's metrics as it goes ([Train]): each
// logged window's StepMetrics, then Done when the steps end.
type Progress interface {
	Step(StepMetrics)
	Done()
}

// JSONProgress returns a Progress that writes each window's StepMetrics to
// w as a JSON line.
func JSONProgress(w io.Writer) Progress { return jsonProgress{enc: json.NewEncoder(w)} }

type jsonProgress struct{ enc *json.Encoder }

func (p jsonProgress) Step(m StepMetrics) { _ = p.enc.Encode(m) }
func (jsonProgress) Done()                {}

// noProgress discards the metrics (Train without a Progress).
type noProgress struct{}

func (noProgress) Step(StepMetrics) {}
func (noProgress) Done()            {}
