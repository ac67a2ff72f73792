package retrieval

import (
	"log/slog"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hir-ads/hir/model"
)

// MaxHistoryPoints bounds a training curve ([ModelStatus].History).
const MaxHistoryPoints = 500

// TrainingPoint is one logged step of a model version's training.
type TrainingPoint struct {
	Version      string
	Step         int
	Loss         float32
	UsageEntropy []float32 // per prototype level; nil when not logged
	// ValLoss and ValAUC are the validation figures logged at the step
	// (nil: none).
	ValLoss, ValAUC *float32
}

// ModelStatus describes the generation serving ([Engine.Model]).
type ModelStatus struct {
	Version   string
	TrainedAt time.Time
	IndexSize int
	Metrics   map[string]float64
	// History is the training curve of the versions up to this one in its
	// models directory, oldest first, at most MaxHistoryPoints (the
	// latest); UsageEntropy is the last logged usage entropy per level.
	History      []TrainingPoint
	UsageEntropy []float32
}

// historyCache holds the training curve of the last generation asked
// about. Safe for concurrent use.
type historyCache struct {
	mu      sync.Mutex
	gen     *generation // mu must be held
	points  []TrainingPoint
	entropy []float32
}

// Model describes the generation serving now, with its training curve
// (read from the models directory once per generation). It loads the
// served state once; ErrNoGeneration before the first publication.
func (e *Engine) Model() (*ModelStatus, error) {
	s := e.cur.Load()
	if s == nil {
		return nil, ErrNoGeneration
	}
	g := s.gen
	st := &ModelStatus{Version: g.Version, TrainedAt: g.TrainedAt, IndexSize: s.IndexSize(), Metrics: g.Metrics}
	st.History, st.UsageEntropy = e.history.get(g, e.logger)
	return st, nil
}

func (c *historyCache) get(g *generation, logger *slog.Logger) ([]TrainingPoint, []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != g {
		c.gen = g
		c.points, c.entropy = trainingHistory(g.Dir, logger)
	}
	return c.points, c.entropy
}

// versionNumber returns N of "vN", 0 when v is not one.
func versionNumber(v string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(v, "v"))
	if err != nil || !strings.HasPrefix(v, "v") {
		return 0
	}
	return n
}

// trainingHistory reads the training curve of the version in dir: the
// logged steps of every version up to it in its models directory (dir's
// parent), oldest first, at most MaxHistoryPoints (the latest), and the
// last logged usage entropy per level. A generation without a checkpoint
// directory ("") has none.
func trainingHistory(dir string, logger *slog.Logger) ([]TrainingPoint, []float32) {
	points := []TrainingPoint{}
	var entropy []float32
	if dir == "" {
		return points, nil
	}
	dirs, err := model.VersionDirs(filepath.Dir(filepath.Dir(dir)))
	if err != nil {
		logger.Warn("list model versions for the training history", "err", err)
		return points, nil
	}
	upTo := versionNumber(filepath.Base(dir))
	for _, vdir := range dirs {
		v := filepath.Base(vdir)
		if upTo > 0 && versionNumber(v) > upTo {
			break
		}
		m, err := model.ReadMetrics(vdir)
		if err != nil {
			continue // a version without metrics adds no points
		}
		for _, st := range m.History {
			if !finite(st.Total) {
				continue
			}
			p := TrainingPoint{Version: v, Step: st.Step, Loss: float32(st.Total)}
			if len(st.UsageEntropy) > 0 {
				p.UsageEntropy = make([]float32, len(st.UsageEntropy))
				for i, x := range st.UsageEntropy {
					p.UsageEntropy[i] = float32(x)
				}
				entropy = p.UsageEntropy
			}
			if vm := st.Validation; vm != nil {
				if finite(vm.Total) {
					l := float32(vm.Total)
					p.ValLoss = &l
				}
				if finite(vm.AUC) {
					a := float32(vm.AUC)
					p.ValAUC = &a
				}
			}
			points = append(points, p)
		}
	}
	if n := len(points); n > MaxHistoryPoints {
		points = points[n-MaxHistoryPoints:]
	}
	return points, entropy
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
