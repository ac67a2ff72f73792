package model

import (
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Checkpoint file names inside DIR/models/vN/.
const (
	FileConfig     = "config.json"     // CheckpointConfig
	FileWeights    = "weights.gob"     // model variables (encoder, prototypes, engagement head)
	FileOptimizer  = "optimizer.gob"   // optimizer state, for --resume only
	FilePrototypes = "prototypes.json" // normalised prototypes per level, for non-GoMLX readers
	FileMetrics    = "metrics.json"    // TrainMetrics
	// FileCalibration holds the version's Calibration, written after
	// training (WriteCalibration); a version may have none.
	FileCalibration = "calibration.json"
	FileChecksums   = "checksums.json" // SHA-256 of the files above, written last
	modelsDir       = "models"
	weightsMagic    = "hir-weights-v1"

	// tmpPrefix names a version directory being written and
	// candidatePrefix a candidate written but not yet accepted; neither is
	// a version ([CleanStale] removes what a crash leaves of them).
	tmpPrefix       = ".tmp-"
	candidatePrefix = ".candidate-"
	damagedPrefix   = ".damaged-" // Quarantine
)

// CheckpointConfig is the self-description stored in config.json.
type CheckpointConfig struct {
	Version string      `json:"version"`
	Model   Config      `json:"model"`
	Train   TrainConfig `json:"train"`
}

// Checkpoint describes a saved model version.
type Checkpoint struct {
	Version string       // "vN"
	Dir     string       // DIR/models/vN
	Metrics TrainMetrics // as in metrics.json
}

// isModelScope reports whether a variable belongs to the model (not the optimizer).
func isModelScope(scope string) bool {
	for _, s := range []string{scopeEncoder, scopePrototypes, scopeEngage} {
		if strings.HasPrefix(scope, context.ScopeSeparator+s) {
			return true
		}
	}
	return false
}

// saveVariables writes the variables selected by keep to path with gob.
func saveVariables(ctx *context.Context, path string, keep func(scope string) bool) error {
	type entry struct {
		scope, name string
		t           *tensors.Tensor
	}
	var vars []entry
	for v := range ctx.IterVariables() {
		if !keep(v.Scope()) {
			continue
		}
		t, err := v.Value()
		if err != nil {
			return fmt.Errorf("read variable %s: %w", v.ScopeAndName(), err)
		}
		vars = append(vars, entry{v.Scope(), v.Name(), t})
	}
	sort.Slice(vars, func(i, j int) bool {
		return vars[i].scope+"/"+vars[i].name < vars[j].scope+"/"+vars[j].name
	})
	return writeSynced(path, func(f *os.File) error {
		enc := gob.NewEncoder(f)
		err := enc.Encode(weightsMagic)
		if err == nil {
			err = enc.Encode(len(vars))
		}
		for _, v := range vars {
			if err != nil {
				break
			}
			if err = enc.Encode(v.scope); err == nil {
				if err = enc.Encode(v.name); err == nil {
					err = v.t.GobSerialize(enc)
				}
			}
		}
		return err
	})
}

// writeSynced creates path, lets write fill it, and syncs and closes it.
func writeSynced(path string, write func(f *os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// loadVariables reads a file written by saveVariables into ctx.
func loadVariables(ctx *context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open weights: %w", err)
	}
	defer f.Close()
	dec := gob.NewDecoder(f)
	var magic string
	var n int
	if err := dec.Decode(&magic); err != nil || magic != weightsMagic {
		return fmt.Errorf("read %s: %w: bad header", path, ErrCorrupt)
	}
	if err := dec.Decode(&n); err != nil || n < 0 || n > 1<<20 {
		return fmt.Errorf("read %s: %w: bad count", path, ErrCorrupt)
	}
	for i := range n {
		var scope, name string
		if err := dec.Decode(&scope); err != nil {
			return fmt.Errorf("read %s variable %d: %w: %v", path, i, ErrCorrupt, err)
		}
		if err := dec.Decode(&name); err != nil {
			return fmt.Errorf("read %s variable %d: %w: %v", path, i, ErrCorrupt, err)
		}
		t, err := tensors.GobDeserialize(dec)
		if err != nil {
			return fmt.Errorf("read %s variable %s/%s: %w: %v", path, scope, name, ErrCorrupt, err)
		}
		if v := ctx.GetVariableByScopeAndName(scope, name); v != nil {
			if err := v.SetValue(t); err != nil {
				return fmt.Errorf("set variable %s/%s: %w", scope, name, err)
			}
			continue
		}
		ctx.InAbsPath(scope).VariableWithValue(name, t)
	}
	return nil
}

// listVersions returns the version numbers under dir/models, ascending.
func listVersions(dataDir string) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(dataDir, modelsDir))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list model versions: %w", err)
	}
	var out []int
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "v") {
			continue
		}
		if n, err := strconv.Atoi(e.Name()[1:]); err == nil && n > 0 {
			if _, err := os.Stat(filepath.Join(dataDir, modelsDir, e.Name(), FileConfig)); err == nil {
				out = append(out, n)
			}
		}
	}
	sort.Ints(out)
	return out, nil
}

// LatestVersionDir returns DIR/models/vN for the highest complete N, or
// ErrNoCheckpoint.
func LatestVersionDir(dataDir string) (string, error) {
	vs, err := listVersions(dataDir)
	if err != nil {
		return "", err
	}
	if len(vs) == 0 {
		return "", fmt.Errorf("find model in %s: %w", dataDir, ErrNoCheckpoint)
	}
	return filepath.Join(dataDir, modelsDir, "v"+strconv.Itoa(vs[len(vs)-1])), nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
		if serr := f.Sync(); err == nil {
			err = serr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// writeChecksums writes FileChecksums into dir: the SHA-256 of each of
// the model's files there.
func writeChecksums(dir string) error {
	return writeChecksumsTo(dir, filepath.Join(dir, FileChecksums))
}

// writeChecksumsTo writes dir's checksums (see writeChecksums) to path.
func writeChecksumsTo(dir, path string) error {
	sums := map[string]string{}
	names := []string{FileConfig, FileWeights, FileOptimizer, FilePrototypes, FileMetrics}
	for _, opt := range []string{FileSpectral, FileCalibration} { // only some versions have them
		if _, err := os.Stat(filepath.Join(dir, opt)); err == nil {
			names = append(names, opt)
		}
	}
	for _, name := range names {
		sum, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		sums[name] = sum
	}
	return writeJSON(path, sums)
}

// Calibration is what a version's serving weights were calibrated to
// (retrieval.Calibrate): the new-ad scale, the weight of the users'
// popularity coordinate and the engagement prior's weight that ranked the
// engagements at or after Cut best, scored as of just before it.
type Calibration struct {
	// NewAdScale is the chosen scale of new ads' spectral factors
	// ([Model.WithNewAdScale]), applied when the version loads; 0: none
	// chosen (1).
	NewAdScale float32 `json:"new_ad_scale,omitempty"`
	// NewAdPoints are its candidates' scores, by scale (PriorWeight and
	// the co-engagement weight 0: the embeddings alone).
	NewAdPoints []CalibrationPoint `json:"new_ad_points,omitempty"`
	// PopularityWeight is the chosen weight of a user's popularity
	// coordinate in the embeddings' score (retrieval.Engine.PopularityWeight);
	// nil: none chosen (1).
	PopularityWeight *float32 `json:"popularity_weight,omitempty"`
	// PopularityPoints are its candidates' scores (the embeddings alone,
	// at NewAdScale).
	PopularityPoints []CalibrationPoint `json:"popularity_points,omitempty"`
	// PriorWeight is the chosen weight of the engagement prior.
	PriorWeight float32 `json:"prior_weight"`
	// CoEngagementWeight is the co-engagement weight it was chosen with.
	CoEngagementWeight float32 `json:"coengagement_weight"`
	// Cut is the time (unix ms) the scoring was as of; the events at or
	// after it were ranked.
	Cut int64 `json:"cut"`
	// Users is the number of users whose events were ranked, K the cut-off
	// of the metrics.
	Users int `json:"users"`
	K     int `json:"k"`
	// Points are the candidates' scores, by prior weight.
	Points []CalibrationPoint `json:"points"`
}

// CalibrationPoint is one candidate's scores over the users: a prior
// weight's (Calibration.Points), a new-ad scale's
// (Calibration.NewAdPoints) or a popularity weight's
// (Calibration.PopularityPoints).
type CalibrationPoint struct {
	NewAdScale float32 `json:"new_ad_scale,omitempty"`
	// Popularity is the popularity weight of a Calibration.PopularityPoints
	// candidate (nil elsewhere).
	Popularity  *float32 `json:"popularity_weight,omitempty"`
	PriorWeight float32  `json:"prior_weight"`
	// Recall and NDCG are the mean recall@K and NDCG@K over the users,
	// ColdRecall the mean recall@K of the new ads (no engagement before
	// the cut) over the users who engaged with one (ColdUsers).
	Recall     float64 `json:"recall"`
	NDCG       float64 `json:"ndcg"`
	ColdRecall float64 `json:"cold_recall"`
	ColdUsers  int     `json:"cold_users"`
	// Score is the criterion, Recall + NDCG + ColdRecall; Low and High
	// bound its 95% bootstrap interval over the users, DiffLow and
	// DiffHigh that of its difference with the default candidate's
	// (the same resamples; zero for the default itself).
	Score    float64 `json:"score"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
	DiffLow  float64 `json:"diff_low"`
	DiffHigh float64 `json:"diff_high"`
}

// String gives the point as logs show it: the candidate's settings (the
// popularity weight only where set) and its scores (the criterion and its
// intervals only where computed).
func (p CalibrationPoint) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "new_ad_scale=%g", p.NewAdScale)
	if p.Popularity != nil {
		fmt.Fprintf(&b, " popularity_weight=%g", *p.Popularity)
	}
	fmt.Fprintf(&b, " prior_weight=%g recall=%.4f ndcg=%.4f", p.PriorWeight, p.Recall, p.NDCG)
	if p.High > 0 { // a point with the criterion's interval (a calibration written before it has none)
		fmt.Fprintf(&b, " cold_recall=%.4f (%d users) score=%.4f [%.4f, %.4f] diff [%+.4f, %+.4f]",
			p.ColdRecall, p.ColdUsers, p.Score, p.Low, p.High, p.DiffLow, p.DiffHigh)
	}
	return b.String()
}

// WriteCalibration adds c to the version directory dir as FileCalibration
// and updates its checksums, each file written aside and renamed into
// place, so that a crash leaves either the version as it was or the
// version with c; a calibration file that the checksums do not list is
// never read ([Model.Calibration]).
func WriteCalibration(dir string, c Calibration) error {
	tmp := filepath.Join(dir, tmpPrefix+FileCalibration)
	if err := writeJSON(tmp, c); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, FileCalibration)); err != nil {
		return fmt.Errorf("write calibration: %w", err)
	}
	tmp = filepath.Join(dir, tmpPrefix+FileChecksums)
	if err := writeChecksumsTo(dir, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, FileChecksums)); err != nil {
		return fmt.Errorf("write calibration: %w", err)
	}
	return syncDir(dir)
}

// readCalibration returns dir's calibration when its checksums list one
// (they were verified), else nil.
func readCalibration(dir string) (*Calibration, error) {
	var sums map[string]string
	if err := readJSON(filepath.Join(dir, FileChecksums), &sums); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	if _, ok := sums[FileCalibration]; !ok {
		return nil, nil
	}
	var c Calibration
	if err := readJSON(filepath.Join(dir, FileCalibration), &c); err != nil {
		return nil, err
	}
	if !(c.PriorWeight >= 0) || !(c.CoEngagementWeight >= 0) || !(c.NewAdScale >= 0) || math.IsInf(float64(c.NewAdScale), 0) ||
		(c.PopularityWeight != nil && !(*c.PopularityWeight >= 0)) {
		return nil, fmt.Errorf("read %s: %w: weights %v, %v, new-ad scale %v", FileCalibration, ErrCorrupt, c.PriorWeight, c.CoEngagementWeight, c.NewAdScale)
	}
	return &c, nil
}

// VerifyChecksums checks the files of version directory dir against its
// FileChecksums, naming the first that differs (ErrCorrupt) or is missing.
// A version written without checksums passes.
func VerifyChecksums(dir string) error {
	var sums map[string]string
	err := readJSON(filepath.Join(dir, FileChecksums), &sums)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("verify %s: %w", dir, err)
	}
	for _, name := range slices.Sorted(maps.Keys(sums)) {
		path := filepath.Join(dir, name)
		got, err := fileSHA256(path)
		if err != nil {
			return fmt.Errorf("verify %s: %w", dir, err)
		}
		if got != sums[name] {
			return fmt.Errorf("verify %s: %w: checksum mismatch", path, ErrCorrupt)
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("checksum: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checksum %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// spectralHalfLifeBefore is the half-life, in days, of the spectral
// factors' fit before Config.SpectralHalfLifeDays existed.
const spectralHalfLifeBefore = 60

// readCheckpointConfig reads a version's config.json. A feature the file
// predates keeps the value that turns it off (-1), as the version was
// trained without it, and a spectral fit it predates the half-life it was
// fitted with (spectralHalfLifeBefore), so that a refit (calibration) fits
// as the version did. A version whose encoder took the spectral factors as
// inputs (factors, but no spectral_weight) is refused with ErrBadConfig.
func readCheckpointConfig(dir string) (CheckpointConfig, error) {
	var cc CheckpointConfig
	cc.Model.IDRows, cc.Model.Activity, cc.Model.History, cc.Model.Spectral = -1, -1, -1, -1
	cc.Model.SpectralWeight = -1
	cc.Model.SpectralHalfLifeDays = spectralHalfLifeBefore
	if err := readJSON(filepath.Join(dir, FileConfig), &cc); err != nil {
		return cc, err
	}
	if cc.Model.Spectral > 0 && cc.Model.SpectralWeight == -1 {
		return cc, fmt.Errorf("%w: %s was trained with spectral factors as encoder inputs, a form no longer served; train a new version",
			ErrBadConfig, dir)
	}
	return cc, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w: %v", filepath.Base(path), ErrCorrupt, err)
	}
	return nil
}

// ReadMetrics reads the training metrics (metrics.json) of the checkpoint
// in dir.
func ReadMetrics(dir string) (TrainMetrics, error) {
	var m TrainMetrics
	err := readJSON(filepath.Join(dir, FileMetrics), &m)
	return m, err
}

// VersionDirs returns DIR/models/vN of every complete version N under
// dataDir, oldest first.
func VersionDirs(dataDir string) ([]string, error) {
	vs, err := listVersions(dataDir)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(vs))
	for _, n := range vs {
		out = append(out, filepath.Join(dataDir, modelsDir, "v"+strconv.Itoa(n)))
	}
	return out, nil
}
