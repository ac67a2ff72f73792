package retrieval

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hir-ads/hir/model"
)

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTrainingHistory: the training curve joins the versions up to the served
// one (by number: v10 comes after v3), oldest first, skipping versions
// without metrics, and keeps the last logged usage entropy.
func TestTrainingHistory(t *testing.T) {
	dir := t.TempDir()
	write := func(v string, m *model.TrainMetrics) string {
		vd := filepath.Join(dir, "models", v)
		if err := os.MkdirAll(vd, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vd, model.FileConfig), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if m != nil {
			if err := os.WriteFile(filepath.Join(vd, model.FileMetrics), mustMarshal(t, m), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return vd
	}
	auc := &model.ValMetrics{Total: 2.5, AUC: 0.61}
	v1 := write("v1", &model.TrainMetrics{History: []model.StepMetrics{
		{Step: 10, Total: 3, UsageEntropy: []float64{0.9, 0.8}},
		{Step: 20, Total: 2.8, UsageEntropy: []float64{0.85, 0.75}, Validation: auc},
	}})
	write("v2", nil) // no metrics.json: no points
	v3 := write("v3", &model.TrainMetrics{History: []model.StepMetrics{{Step: 30, Total: 2.6, UsageEntropy: []float64{0.8, 0.7}}}})
	write("v10", &model.TrainMetrics{History: []model.StepMetrics{{Step: 40, Total: 2.4}}})
	for _, tc := range []struct {
		name    string
		dir     string
		steps   []int
		entropy []float32
	}{
		{"no checkpoint directory", "", nil, nil},
		{"first version", v1, []int{10, 20}, []float32{0.85, 0.75}},
		{"later versions excluded", v3, []int{10, 20, 30}, []float32{0.8, 0.7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			points, entropy := trainingHistory(tc.dir, slog.New(slog.DiscardHandler))
			var steps []int
			for _, p := range points {
				steps = append(steps, p.Step)
			}
			if !slices.Equal(steps, tc.steps) || !slices.Equal(entropy, tc.entropy) {
				t.Errorf("trainingHistory(%q) = steps %v, entropy %v; want %v, %v", tc.dir, steps, entropy, tc.steps, tc.entropy)
			}
			for _, p := range points {
				if p.Step == 20 && (p.ValAUC == nil || *p.ValAUC != 0.61 || p.ValLoss == nil || *p.ValLoss != 2.5) {
					t.Errorf("point at step 20 = %+v, want validation loss 2.5 and AUC 0.61", p)
				}
			}
		})
	}
}
