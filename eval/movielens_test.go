package eval

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestMovieLens runs every baseline on MovieLens-100K (20% test window)
// under the chrono and replay protocols. It checks the split and that every
// method is far above a random ranking (random recall@100 < 100/(1682-737) <
// 0.11 for every user), and that each report is internally consistent. Set
// HIR_EVAL_OUT to a directory to keep the reports (JSON and Markdown).
func TestMovieLens(t *testing.T) {
	if testing.Short() {
		t.Skip("MovieLens run skipped in -short mode")
	}
	dir := sharedData(t, "movielens-100k")
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, proto := range []string{ProtocolChrono, ProtocolReplay} {
		t.Run(proto, func(t *testing.T) {
			rep, err := Run(context.Background(), Config{Data: dir, Protocol: proto, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + rep.Markdown())
			if rep.Stats.Interactions != 100000 || rep.Stats.Items != 1682 || rep.Stats.Users != 943 {
				t.Errorf("stats = %+v, want 100000 ratings of 1682 movies by 943 users", rep.Stats)
			}
			if want := 80000; rep.Stats.TrainInteractions < want || rep.Stats.TrainInteractions > want+200 {
				t.Errorf("train interactions = %d, want about %d", rep.Stats.TrainInteractions, want)
			}
			metric := "recall@100"
			if proto == ProtocolReplay {
				metric = "hit@100"
			}
			for _, m := range MethodNames() {
				all := rep.Get(m, SliceAll)
				if all == nil || all.Queries < 100 {
					t.Fatalf("%s: result %+v, want over 100 queries", m, all)
				}
				if got := all.Metrics[metric]; got < 0.12 {
					t.Errorf("%s %s = %.4f, not above random", m, metric, got)
				}
			}
			for _, res := range rep.Results {
				prev := -1.0
				for _, k := range rep.Ks {
					hit := res.Metrics[MetricKey(MetricHitRate, k)]
					if hit < prev || hit > 1 {
						t.Errorf("%s/%s hit@%d = %v after %v: want non-decreasing in [0,1]", res.Method, res.Slice, k, hit, prev)
					}
					prev = hit
					if r, ok := res.Metrics[MetricKey(MetricRecall, k)]; ok && r > hit {
						t.Errorf("%s/%s recall@%d = %v above hit rate %v", res.Method, res.Slice, k, r, hit)
					}
				}
			}
			if out := os.Getenv("HIR_EVAL_OUT"); out != "" {
				if err := rep.WriteJSON(filepath.Join(out, "movielens-"+proto+".json")); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(out, "movielens-"+proto+".md"), []byte(rep.Markdown()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
