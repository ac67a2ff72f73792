package eval

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spy records what the harness shows a method and fails the test on any
// event later than allowed. It ranks items by id.
type spy struct {
	t        *testing.T
	name     string
	asOf     int64
	fitMaxTS int64
	observed int64 // latest observed event time
	queries  int
	exact    string
}

func (s *spy) Name() string { return s.name }

func (s *spy) Fit(_ context.Context, v *TrainView) error {
	s.asOf = v.AsOf
	for _, in := range v.Interactions {
		s.fitMaxTS = max(s.fitMaxTS, in.TS)
	}
	for _, ev := range v.Structure {
		s.fitMaxTS = max(s.fitMaxTS, ev.TS)
	}
	return nil
}

func (s *spy) Observe(in Interaction) {
	if in.TS < s.observed {
		s.t.Errorf("observed event at %d after one at %d", in.TS, s.observed)
	}
	s.observed = in.TS
}

func (s *spy) TopK(_ context.Context, q *Query, dst []int32) ([]int32, error) {
	s.queries++
	if s.observed > q.AsOf {
		s.t.Errorf("query at %d after observing an event at %d", q.AsOf, s.observed)
	}
	for _, in := range q.History {
		if in.TS > q.AsOf {
			s.t.Errorf("query at %d sees history event at %d", q.AsOf, in.TS)
		}
		if in.User != q.User {
			s.t.Errorf("query of user %d sees history of user %d", q.User, in.User)
		}
	}
	dst = dst[:0]
	for i := int32(0); len(dst) < q.K && i < 1<<20; i++ {
		if int(i) >= len(q.exclude) {
			break
		}
		if !q.Excluded(i) {
			dst = append(dst, i)
		}
	}
	return dst, nil
}

func (s *spy) Exact() string { return s.exact }

// reversed ranks by descending id: its overlap with spy is known.
type reversed struct{ spy }

func (r *reversed) TopK(_ context.Context, q *Query, dst []int32) ([]int32, error) {
	dst = dst[:0]
	for i := int32(len(q.exclude)) - 1; len(dst) < q.K && i >= 0; i-- {
		if !q.Excluded(i) {
			dst = append(dst, i)
		}
	}
	return dst, nil
}

func TestEvaluateNoFutureLeak(t *testing.T) {
	d := makeSynth(2, 150, 10, 6).data(t)
	for _, proto := range []string{ProtocolChrono, ProtocolReplay} {
		for _, window := range []string{"test", "validation"} {
			t.Run(proto+"/"+window, func(t *testing.T) {
				s := &spy{t: t, name: "spy"}
				rep, err := Evaluate(context.Background(), Config{Protocol: proto, Window: window, Methods: []string{}, Extra: []Recommender{s}}, d)
				if err != nil {
					t.Fatal(err)
				}
				if s.fitMaxTS > s.asOf || s.asOf != rep.Window.AsOf {
					t.Errorf("fit saw time %d with AsOf %d, window cut %d", s.fitMaxTS, s.asOf, rep.Window.AsOf)
				}
				if first := d.Interactions[rep.Window.TrainEnd].TS; s.fitMaxTS >= first {
					t.Errorf("fit saw time %d, not before the first window event %d", s.fitMaxTS, first)
				}
				if res := rep.Get("spy", SliceAll); res == nil || res.Queries != s.queries || s.queries == 0 {
					t.Errorf("report says %+v queries, spy answered %d", res, s.queries)
				}
			})
		}
	}
}

func TestEvaluateOverlap(t *testing.T) {
	d := makeSynth(3, 60, 10, 4).data(t)
	exact := &spy{t: t, name: "exact"}
	same := &spy{t: t, name: "same", exact: "exact"}
	rev := &reversed{spy{t: t, name: "reversed", exact: "exact"}}
	rep, err := Evaluate(context.Background(), Config{Methods: []string{}, Ks: []int{10}, Extra: []Recommender{exact, same, rev}}, d)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Get("same", SliceAll).Metrics["recall_vs_exact@10"]; got != 1 {
		t.Errorf("recall_vs_exact@10 of an identical method = %v, want 1", got)
	}
	// 40 items minus at most a few excluded: the first and last ten never meet.
	if got := rep.Get("reversed", SliceAll).Metrics["recall_vs_exact@10"]; got != 0 {
		t.Errorf("recall_vs_exact@10 of the reversed ranking = %v, want 0", got)
	}
	if _, ok := rep.Get("exact", SliceAll).Metrics["recall_vs_exact@10"]; ok {
		t.Error("the exact method reports an overlap with itself")
	}
	bad := &spy{t: t, name: "orphan", exact: "missing"}
	if _, err := Evaluate(context.Background(), Config{Methods: []string{}, Extra: []Recommender{bad}}, d); !errors.Is(err, ErrBadConfig) {
		t.Errorf("approximating a missing method: error %v, want ErrBadConfig", err)
	}
}

func TestConfigErrors(t *testing.T) {
	d := makeSynth(3, 60, 10, 4).data(t)
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"protocol", Config{Protocol: "nope"}, ErrBadConfig},
		{"window", Config{Window: "train"}, ErrBadConfig},
		{"truth without truth", Config{Protocol: ProtocolTruth}, ErrBadConfig},
		{"cut-off", Config{Ks: []int{0, 10}}, ErrBadConfig},
		{"method", Config{Methods: []string{"svd"}}, ErrUnknownMethod},
		{"fraction", Config{TestFraction: 1.5}, ErrBadConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Evaluate(context.Background(), tc.cfg, d); !errors.Is(err, tc.want) {
				t.Errorf("Evaluate error = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Run(context.Background(), Config{}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("Run without a loader: error %v, want ErrBadConfig", err)
	}
}

// TestBaselinesSynthetic runs every baseline on a planted-cluster world,
// where co-engagement and text both reveal a user's cluster: each
// personalised method must beat popularity, and BPR's loss must fall.
func TestBaselinesSynthetic(t *testing.T) {
	d := makeSynth(4, 240, 20, 8).data(t)
	cfg := Config{BPR: BPROptions{Dim: 16, Epochs: 20, BatchSize: 256, LearningRate: 0.02}}
	rep, err := Evaluate(context.Background(), cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Markdown())
	pop := rep.Get("popularity", SliceAll).Metrics["recall@20"]
	for _, m := range []string{"item-knn", "bpr", "content"} {
		res := rep.Get(m, SliceAll)
		if res == nil {
			t.Fatalf("no %s result", m)
		}
		if got := res.Metrics["recall@20"]; got < pop+0.05 {
			t.Errorf("%s recall@20 = %.3f, want above popularity's %.3f + 0.05", m, got, pop)
		}
	}
	for _, s := range []string{SliceColdUsers, SliceColdItems} {
		if res := rep.Get("popularity", s); res == nil || res.Queries == 0 {
			t.Errorf("slice %s has no queries", s)
		}
	}
	// Content ranks cold items (text is known), popularity cannot.
	if c, p := rep.Get("content", SliceColdItems).Metrics["recall@50"], rep.Get("popularity", SliceColdItems).Metrics["recall@50"]; c <= p {
		t.Errorf("cold-item recall@50: content %.3f, popularity %.3f; want content ahead", c, p)
	}

	replay, err := Evaluate(context.Background(), Config{Protocol: ProtocolReplay, Methods: []string{"popularity", "item-knn", "content"}}, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + replay.Markdown())
	if k, p := replay.Get("item-knn", SliceAll).Metrics["hit@20"], replay.Get("popularity", SliceAll).Metrics["hit@20"]; k <= p {
		t.Errorf("replay hit@20: item-knn %.3f, popularity %.3f; want item-knn ahead", k, p)
	}
	if _, ok := replay.Get("item-knn", SliceAll).Metrics["recall@20"]; ok {
		t.Error("replay reports recall (one relevant item per query: hit rate only)")
	}
}

func TestBPRLossFalls(t *testing.T) {
	d := makeSynth(5, 120, 10, 6).data(t)
	test, _, err := ChronoWindows(d.Interactions, 0.2, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewBPR(BPROptions{Dim: 8, Epochs: 8, BatchSize: 128, LearningRate: 0.05, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Fit(context.Background(), d.View(test)); err != nil {
		t.Fatal(err)
	}
	c := m.LossCurve
	if len(c) != 8 || !(c[len(c)-1] < 0.8*c[0]) || c[0] > 0.7 {
		t.Errorf("BPR loss curve %v: want 8 epochs starting near ln 2 and falling by 20%%", c)
	}
	// Same seed, same data: same factors.
	m2, _ := NewBPR(BPROptions{Dim: 8, Epochs: 8, BatchSize: 128, LearningRate: 0.05, Seed: 7})
	if err := m2.Fit(context.Background(), d.View(test)); err != nil {
		t.Fatal(err)
	}
	for i := range m.items {
		if m.items[i] != m2.items[i] {
			t.Fatalf("BPR with the same seed differs at item weight %d: %v vs %v", i, m.items[i], m2.items[i])
		}
	}
}

var update = flag.Bool("update", false, "rewrite golden files")

// TestReportGolden checks the Markdown and JSON renderings of a fixed report.
func TestReportGolden(t *testing.T) {
	rep := &Report{
		Protocol: "chrono", Data: "toy", Ks: []int{10, 20},
		Window:  Window{Name: "test", AsOf: 1_000_000, TrainEnd: 8, EvalEnd: 10},
		Stats:   Stats{Users: 3, Items: 5, Interactions: 10, TrainInteractions: 8, EvalInteractions: 2, EvalStartMS: 1_000_500, EvalEndMS: 2_000_000, ColdUserMax: 5},
		Methods: []MethodInfo{{Name: "popularity", FitSeconds: 0.001, QuerySeconds: 0.002, QueryMicros: 12.5}},
		Results: []Result{
			{Method: "popularity", Slice: SliceAll, Queries: 2, Metrics: map[string]float64{"recall@10": 0.5, "recall@20": 1, "ndcg@10": 0.25, "ndcg@20": 0.3, "hit@10": 0.5, "hit@20": 1, "mrr": 0.125}},
			{Method: "popularity", Slice: SliceColdUsers, Queries: 1, Metrics: map[string]float64{"recall@10": 0, "recall@20": 1, "ndcg@10": 0, "ndcg@20": 0.2, "hit@10": 0, "hit@20": 1, "mrr": 0.05}},
		},
		Truth: &TruthReport{Levels: []LevelAgreement{{TokenLevel: 0, TruthLevel: 1, Entities: 5, Clusters: 2, NMI: 0.75, Purity: 0.8}}},
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]string{"report.golden.md": rep.Markdown(), "report.golden.json": string(js) + "\n"} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read golden (run with -update): %v", err)
		}
		if got != string(want) {
			t.Errorf("%s differs (run with -update to accept):\ngot:\n%s\nwant:\n%s", name, got, want)
		}
	}
	// Round trip through WriteJSON.
	path := filepath.Join(t.TempDir(), "r.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	var back Report
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &back); err != nil || back.Get("popularity", SliceColdUsers).Metrics["mrr"] != 0.05 {
		t.Errorf("WriteJSON round trip: %v, %+v", err, back.Results)
	}
	if !strings.Contains(rep.Markdown(), fmt.Sprintf("| popularity | %s | 1 |", SliceColdUsers)) {
		t.Error("Markdown lacks the cold-user row")
	}
}
