package eval

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// topicEmbedder embeds an ad as the one-hot vector of the "topic<c>" word of
// its text (the synthetic world's cluster) and a user as the sum of their
// positive history; it counts observed events.
type topicEmbedder struct {
	dims     int
	cat      *Catalog
	observed int
}

func (e *topicEmbedder) Fit(_ context.Context, v *TrainView) error { e.cat = v.Catalog; return nil }

func (e *topicEmbedder) EmbedItems(_ context.Context, _ int64) ([][]float32, error) {
	out := make([][]float32, e.cat.NumItems())
	for i, text := range e.cat.ItemText {
		var c int
		if _, err := fmt.Sscanf(text, "topic%d", &c); err != nil {
			continue // nil: cannot embed
		}
		out[i] = make([]float32, e.dims)
		out[i][c] = 1
	}
	return out, nil
}

func (e *topicEmbedder) EmbedUser(_ context.Context, q *Query) ([]float32, error) {
	u := make([]float32, e.dims)
	for _, in := range q.History {
		if in.Positive() {
			var c int
			if _, err := fmt.Sscanf(e.cat.ItemText[in.Item], "topic%d", &c); err == nil {
				u[c]++
			}
		}
	}
	return u, nil
}

func (e *topicEmbedder) Observe(Interaction) { e.observed++ }

// bruteForce is an exact Retriever.
type bruteForce struct {
	items [][]float32
	top1  bool // restrict to the user's best dimension (an approximation)
}

func (b *bruteForce) Build(_ context.Context, items [][]float32) error { b.items = items; return nil }

func (b *bruteForce) Search(_ context.Context, u []float32, k int, exclude func(int32) bool) ([]int32, error) {
	best := 0
	for d := range u {
		if u[d] > u[best] {
			best = d
		}
	}
	var ids []int32
	for i, v := range b.items {
		if v == nil || exclude(int32(i)) || (b.top1 && v[best] == 0) {
			continue
		}
		ids = append(ids, int32(i))
	}
	slices.SortStableFunc(ids, func(a, c int32) int {
		sa, sc := dot(u, b.items[a]), dot(u, b.items[c])
		switch {
		case sa > sc:
			return -1
		case sa < sc:
			return 1
		}
		return 0
	})
	return ids[:min(k, len(ids))], nil
}

func TestDenseAndIndexed(t *testing.T) {
	d := makeSynth(6, 160, 10, 8).data(t)
	emb := &topicEmbedder{dims: 8}
	dense := NewDense("dense", emb)
	exactIdx := NewIndexed("index-exact", dense, &bruteForce{})
	approx := NewIndexed("index-top1", dense, &bruteForce{top1: true})
	for _, proto := range []string{ProtocolChrono, ProtocolReplay} {
		t.Run(proto, func(t *testing.T) {
			emb.observed = 0
			rep, err := Evaluate(context.Background(), Config{Protocol: proto, Methods: []string{"popularity"}, Ks: []int{10, 50}, Extra: []Recommender{dense, exactIdx, approx}}, d)
			if err != nil {
				t.Fatal(err)
			}
			key := "recall@10"
			if proto == ProtocolReplay {
				key = "hit@10"
				if emb.observed != rep.Stats.EvalInteractions {
					t.Errorf("embedder observed %d events, want the %d of the window", emb.observed, rep.Stats.EvalInteractions)
				}
			}
			if dv, pv := rep.Get("dense", SliceAll).Metrics[key], rep.Get("popularity", SliceAll).Metrics[key]; dv <= pv {
				t.Errorf("dense %s = %.3f, want above popularity's %.3f (the topic embedding knows the clusters)", key, dv, pv)
			}
			if got := rep.Get("index-exact", SliceAll).Metrics["recall_vs_exact@10"]; got < 0.999 {
				t.Errorf("exact index recall_vs_exact@10 = %v, want 1", got)
			}
			// Restricting to one cluster loses the other clusters of mixed
			// users at K = 50 (a cluster holds 10 ads).
			if got := rep.Get("index-top1", SliceAll).Metrics["recall_vs_exact@50"]; got <= 0 || got >= 1 {
				t.Errorf("top-1 bucket index recall_vs_exact@50 = %v, want strictly between 0 and 1", got)
			}
		})
	}
	// The index cannot be fitted before its exact method.
	if _, err := Evaluate(context.Background(), Config{Methods: []string{}, Extra: []Recommender{NewIndexed("i", NewDense("dense2", emb), &bruteForce{}), NewDense("dense2", emb)}}, d); err == nil {
		t.Error("index fitted before its exact method: got nil error")
	}
}
