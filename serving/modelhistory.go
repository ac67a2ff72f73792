package serving

import (
	"errors"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/retrieval"
)

// maxHistoryPoints bounds GET /v1/model's training curve.
const maxHistoryPoints = 500

// isNotFound reports whether err means an unknown entity, token or route.
func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, retrieval.ErrNotFound)
}

// msTime converts unix milliseconds to a UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// modelHistory is the training curve of one generation.
type modelHistory struct {
	gen     *retrieval.Generation
	points  []api.TrainingPoint
	entropy []float32
}

// versionNumber returns N of "vN", 0 when v is not one.
func versionNumber(v string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(v, "v"))
	if err != nil || !strings.HasPrefix(v, "v") {
		return 0
	}
	return n
}

// historyFor returns the training curve of gen: the logged steps of every
// version up to gen's in its models directory (gen.Dir's parent), oldest
// first, at most maxHistoryPoints (the latest), and the last logged usage
// entropy per level. A generation without a checkpoint directory has none.
// It is read once per generation.
func (s *Server) historyFor(gen *retrieval.Generation) *modelHistory {
	s.explorerCache.historyMtx.Lock()
	defer s.explorerCache.historyMtx.Unlock()
	if h := s.explorerCache.history; h != nil && h.gen == gen {
		return h
	}
	h := &modelHistory{gen: gen, points: []api.TrainingPoint{}}
	s.explorerCache.history = h
	if gen.Dir == "" {
		return h
	}
	dirs, err := model.VersionDirs(filepath.Dir(filepath.Dir(gen.Dir)))
	if err != nil {
		s.logger.Warn("list model versions for the training history", "err", err)
		return h
	}
	upTo := versionNumber(filepath.Base(gen.Dir))
	for _, dir := range dirs {
		v := filepath.Base(dir)
		if upTo > 0 && versionNumber(v) > upTo {
			break
		}
		m, err := model.ReadMetrics(dir)
		if err != nil {
			continue // a version without metrics adds no points
		}
		for _, st := range m.History {
			if !finite(st.Total) {
				continue
			}
			p := api.TrainingPoint{Version: v, Step: st.Step, Loss: float32(st.Total)}
			if len(st.UsageEntropy) > 0 {
				e := make([]float32, len(st.UsageEntropy))
				for i, x := range st.UsageEntropy {
					e[i] = float32(x)
				}
				p.UsageEntropy = &e
				h.entropy = e
			}
			if vm := st.Validation; vm != nil {
				if finite(vm.Total) {
					l := float32(vm.Total)
					p.ValLoss = &l
				}
				if finite(vm.AUC) {
					a := float32(vm.AUC)
					p.ValAuc = &a
				}
			}
			h.points = append(h.points, p)
		}
	}
	if n := len(h.points); n > maxHistoryPoints {
		h.points = h.points[n-maxHistoryPoints:]
	}
	return h
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
