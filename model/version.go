package model

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// writeVersion saves the context as the next version under dataDir:
// DIR/models/vN, or with cfg.Candidate the candidate directory
// DIR/models/.candidate-vN that [Accept] publishes as vN and [Discard]
// removes. Every file and the directory are synced before the rename that
// publishes them, so a crash leaves either the whole version or a
// temporary directory that [CleanStale] removes.
func writeVersion(mctx *context.Context, cfg TrainConfig, spec *spectralTable, dataDir string, metrics TrainMetrics) (*Checkpoint, error) {
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
	tmp, err := os.MkdirTemp(root, tmpPrefix+version+"-")
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
	if spec != nil {
		if err := writeSpectral(filepath.Join(tmp, FileSpectral), spec); err != nil {
			return nil, err
		}
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
	if err := writeChecksums(tmp); err != nil {
		return nil, err
	}
	if err := syncDir(tmp); err != nil {
		return nil, err
	}
	dir := filepath.Join(root, version)
	if cfg.Candidate {
		dir = filepath.Join(root, candidatePrefix+version)
		if err := os.RemoveAll(dir); err != nil { // a candidate left by a crash
			return nil, fmt.Errorf("publish candidate %s: %w", version, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("publish %s: %w", version, err)
	}
	if err := syncDir(root); err != nil {
		return nil, err
	}
	return &Checkpoint{Version: version, Dir: dir, Metrics: metrics}, nil
}

// Accept publishes the candidate version c (written by [Train] with
// TrainConfig.Candidate) as DIR/models/vN, the version [LatestVersionDir]
// and the next resumed training find, and updates c.Dir. It fails when vN
// exists (another process published that version meanwhile).
func Accept(c *Checkpoint) error {
	root := filepath.Dir(c.Dir)
	if filepath.Base(c.Dir) != candidatePrefix+c.Version {
		return fmt.Errorf("accept %s: %s is not a candidate directory", c.Version, c.Dir)
	}
	dir := filepath.Join(root, c.Version)
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("accept %s: %s exists", c.Version, dir)
	}
	if err := os.Rename(c.Dir, dir); err != nil {
		return fmt.Errorf("accept %s: %w", c.Version, err)
	}
	if err := syncDir(root); err != nil {
		return err
	}
	c.Dir = dir
	return nil
}

// Discard removes the candidate version c (a rejected or failed round).
// It refuses to remove a published version.
func Discard(c *Checkpoint) error {
	if filepath.Base(c.Dir) != candidatePrefix+c.Version {
		return fmt.Errorf("discard %s: %s is not a candidate directory", c.Version, c.Dir)
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("discard %s: %w", c.Version, err)
	}
	return nil
}

// CleanStale removes what an interrupted writer leaves under
// DIR/models: unfinished version directories, candidates never accepted,
// and unfinished atomic writes (names containing ".tmp") inside version
// directories. It returns the paths removed. Run it when no other process
// writes to the data directory (at start-up).
func CleanStale(dataDir string) ([]string, error) {
	root := filepath.Join(dataDir, modelsDir)
	ents, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("clean models dir: %w", err)
	}
	var removed []string
	remove := func(path string) error {
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("clean models dir: %w", err)
		}
		removed = append(removed, path)
		return nil
	}
	for _, e := range ents {
		path := filepath.Join(root, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), tmpPrefix), strings.HasPrefix(e.Name(), candidatePrefix):
			if err := remove(path); err != nil {
				return removed, err
			}
		case e.IsDir():
			files, err := os.ReadDir(path)
			if err != nil {
				return removed, fmt.Errorf("clean models dir: %w", err)
			}
			for _, f := range files {
				if strings.Contains(f.Name(), ".tmp") {
					if err := remove(filepath.Join(path, f.Name())); err != nil {
						return removed, err
					}
				}
			}
		}
	}
	return removed, nil
}

// Quarantine moves version directory dir (DIR/models/vN) aside, to
// DIR/models/.damaged-vN-<unix time>, where neither LatestVersionDir nor
// CleanStale nor Prune looks; it returns the new path. For a version that
// does not load: the previous one serves and the next round resumes from
// it, and the damaged files stay for inspection.
func Quarantine(dir string) (string, error) {
	to := filepath.Join(filepath.Dir(dir), fmt.Sprintf("%s%s-%d", damagedPrefix, filepath.Base(dir), time.Now().Unix()))
	if err := os.Rename(dir, to); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", dir, err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return "", err
	}
	return to, nil
}

// Prune removes the oldest published versions under DIR/models so that
// at most keep remain, never the version directory in serving (which may
// be empty). keep < 1 keeps every version. It returns the directories
// removed.
func Prune(dataDir string, keep int, serving string) ([]string, error) {
	if keep < 1 {
		return nil, nil
	}
	vs, err := listVersions(dataDir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, v := range vs[:max(0, len(vs)-keep)] {
		dir := filepath.Join(dataDir, modelsDir, "v"+strconv.Itoa(v))
		if serving != "" && sameDir(dir, serving) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			return removed, fmt.Errorf("prune model versions: %w", err)
		}
		removed = append(removed, dir)
	}
	return removed, nil
}

func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// syncDir fsyncs directory dir, making the entries created or renamed in it
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
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
		mask := interestMask(c)
		out[l] = make([][]float32, k)
		for i := range k {
			row := slices.Clone(flat[i*e : (i+1)*e])
			for j := range row {
				row[j] *= mask[j]
			}
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
