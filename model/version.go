package model

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// writeVersion saves the context as the next version under dataDir.
func writeVersion(mctx *context.Context, cfg TrainConfig, dataDir string, metrics TrainMetrics) (*Checkpoint, error) {
	vs, err := listVersions(dataDir)
	if err != nil {
		return nil, err
	}
	next := 1
	if len(vs) > 0 {
		next = vs[len(vs)-1] + 1
	}
	version := "v" + strconv.Itoa(next)
	metrics.Version = version
	root := filepath.Join(dataDir, modelsDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create models dir: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-"+version+"-")
	if err != nil {
		return nil, fmt.Errorf("create version dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := saveVariables(mctx, filepath.Join(tmp, FileWeights), isModelScope); err != nil {
		return nil, err
	}
	if err := saveVariables(mctx, filepath.Join(tmp, FileOptimizer), func(s string) bool { return !isModelScope(s) }); err != nil {
		return nil, err
	}
	protos, err := readPrototypes(mctx, cfg.Model)
	if err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(tmp, FilePrototypes), protos); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(tmp, FileMetrics), metrics); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(tmp, FileConfig), CheckpointConfig{Version: version, Model: cfg.Model, Train: cfg}); err != nil {
		return nil, err
	}
	dir := filepath.Join(root, version)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("publish %s: %w", version, err)
	}
	return &Checkpoint{Version: version, Dir: dir, Metrics: metrics}, nil
}

// readPrototypes returns the L2-normalised prototypes of every level.
func readPrototypes(mctx *context.Context, c Config) ([][][]float32, error) {
	out := make([][][]float32, len(c.Prototypes))
	for l, k := range c.Prototypes {
		v := mctx.GetVariableByScopeAndName(context.ScopeSeparator+scopePrototypes, fmt.Sprintf("level_%d", l))
		if v == nil {
			return nil, fmt.Errorf("read prototypes level %d: %w: missing", l, ErrCorrupt)
		}
		t, err := v.Value()
		if err != nil {
			return nil, fmt.Errorf("read prototypes level %d: %w", l, err)
		}
		flat := tensors.MustCopyFlatData[float32](t)
		e := c.EmbedDim
		out[l] = make([][]float32, k)
		for i := range k {
			row := slices.Clone(flat[i*e : (i+1)*e])
			normalize(row)
			out[l][i] = row
		}
	}
	return out, nil
}

func normalize(v []float32) {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
}
