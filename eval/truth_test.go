package eval

import (
	"context"
	"testing"

	"github.com/hir-ads/hir/dataset"
)

// TestTruthProtocol runs the truth protocol on a small world written by
// dataset.Synth. The token assignment used is the planted fine level itself,
// so its NMI and purity against the fine level must be 1, and its purity
// against the coarser levels 1 (fine interests nest in them).
func TestTruthProtocol(t *testing.T) {
	dir := synthDir(t, dataset.SynthOptions{Users: 300, Ads: 300, Seed: 3, Coarse: 4, Mid: 8, Fine: 24, Days: 20})
	ctx := context.Background()
	var truth *Truth
	tokens := func(context.Context) ([]map[string]int, error) { return truth.Levels[2:], nil } // the fine level
	cfg := Config{Data: dir, Protocol: ProtocolTruth, Methods: []string{"popularity", "content"}, TokenLevels: tokens}
	raw, err := dataset.ReadTruth(dir + "/" + dataset.TruthFile)
	if err != nil {
		t.Fatal(err)
	}
	truth = TruthFromDataset(raw)
	cfg.Truth = truth
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Markdown())
	if rep.Truth == nil || len(rep.Truth.Levels) != 3 {
		t.Fatalf("truth report %+v, want one token level against 3 planted levels", rep.Truth)
	}
	for _, l := range rep.Truth.Levels {
		if l.Purity != 1 || (l.TruthLevel == 2 && l.NMI < 0.999999) || l.Entities == 0 {
			t.Errorf("level agreement %+v: want purity 1 (and NMI 1 on the fine level)", l)
		}
	}
	var pop, content float64
	for _, r := range rep.Truth.InterestRecall {
		switch r.Method {
		case "popularity":
			pop = r.Metrics["interest_recall@20"]
		case "content":
			content = r.Metrics["interest_recall@20"]
		}
	}
	// Ad text is drawn from per-interest vocabularies: content finds the
	// user's interests better than global popularity.
	if content <= pop {
		t.Errorf("interest_recall@20: content %.3f, popularity %.3f; want content ahead", content, pop)
	}
}
