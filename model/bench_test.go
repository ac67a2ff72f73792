package model

import (
	gocontext "context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hir-ads/hir/graph"
)

// BenchmarkTrainLoader reports training anchors/s with the pipelined loader
// and with the synchronous loop, and their ratio, on the default model.
func BenchmarkTrainLoader(b *testing.B) {
	w := newSynthWorld(b, 300, 300, 6, 20, 5)
	rate := func(sync bool) float64 {
		var cfg TrainConfig
		cfg.Steps = 20
		cfg.EvalEvery = 1000
		cfg.Synchronous = sync
		start := time.Now()
		if _, err := Train(gocontext.Background(), w.store, cfg, b.TempDir(), nil); err != nil {
			b.Fatal(err)
		}
		return float64(3*cfg.WithDefaults().Pairs*cfg.Steps) / time.Since(start).Seconds()
	}
	b.ReportAllocs()
	var pipe, syn float64
	for b.Loop() {
		pipe = rate(false)
		syn = rate(true)
	}
	b.ReportMetric(pipe, "anchors/s_pipelined")
	b.ReportMetric(syn, "anchors/s_sync")
	b.ReportMetric(pipe/syn, "speedup")
}

// BenchmarkEmbed reports inference embeddings/s at batch 1 to 256 and the
// checkpoint size, for the native forward pass (what Load runs on the
// pure-Go backend), for it on a model without the pooled history content,
// and for GoMLX running the encoder (LoadGoMLX).
func BenchmarkEmbed(b *testing.B) {
	w := newSynthWorld(b, 300, 300, 6, 20, 5)
	dir := b.TempDir()
	var cfg TrainConfig
	cfg.Steps = 1
	ck, err := Train(gocontext.Background(), w.store, cfg, dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	size := int64(0)
	for _, f := range []string{FileWeights, FileConfig, FilePrototypes, FileMetrics} {
		if st, err := os.Stat(filepath.Join(ck.Dir, f)); err == nil {
			size += st.Size()
		}
	}
	native, err := load(dir, true)
	if err != nil {
		b.Fatal(err)
	}
	gomlx, err := LoadGoMLX(dir)
	if err != nil {
		b.Fatal(err)
	}
	// The same model without the pooled history content (Config.History):
	// what pooling the anchor's history costs per embedding.
	offDir := b.TempDir()
	cfg.Model.History = -1
	if _, err := Train(gocontext.Background(), w.store, cfg, offDir, nil); err != nil {
		b.Fatal(err)
	}
	noHistory, err := load(offDir, true)
	if err != nil {
		b.Fatal(err)
	}
	for _, fc := range []struct {
		name string
		m    *Model
	}{{"native", native}, {"native-history=off", noHistory}, {"gomlx", gomlx}} {
		for _, n := range []int{1, 4, 16, 64, 256} {
			b.Run(fmt.Sprintf("%s/batch=%d", fc.name, n), func(b *testing.B) {
				benchEmbed(b, w, fc.m, n, size)
			})
		}
	}
}

func benchEmbed(b *testing.B, w *synthWorld, m *Model, n int, size int64) {
	ids := make([]graph.NodeID, n)
	for i := range ids {
		ids[i] = w.ads[i%len(w.ads)]
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Embed(gocontext.Background(), w.store, ids, w.store.MaxTS()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "embeddings/s")
	b.ReportMetric(float64(size), "checkpoint_bytes")
}

// BenchmarkTrainStep reports training anchors/s, steps/s and anchors per
// CPU second of the default model and training config over a few steps (the
// loader pipelined, as Train runs it by default), with random negative
// anchors (negatives=0, the default) and with the queue of negatives
// instead (negatives=1024). Profile with -cpuprofile.
func BenchmarkTrainStep(b *testing.B) {
	w := newSynthWorld(b, 300, 300, 6, 20, 5)
	for _, neg := range []int{0, 1024} {
		b.Run(fmt.Sprintf("negatives=%d", neg), func(b *testing.B) {
			var cfg TrainConfig
			cfg.Steps = 6
			cfg.EvalEvery = 1000
			cfg.Negatives = neg
			cfg = cfg.WithDefaults()
			anchors := 3 * cfg.Pairs
			if neg > 0 {
				anchors = 2 * cfg.Pairs
			}
			b.ReportAllocs()
			var secs, cpu float64
			for b.Loop() {
				start, cpu0 := time.Now(), processCPUSeconds()
				if _, err := Train(gocontext.Background(), w.store, cfg, b.TempDir(), nil); err != nil {
					b.Fatal(err)
				}
				secs, cpu = time.Since(start).Seconds(), processCPUSeconds()-cpu0
			}
			b.ReportMetric(float64(anchors*cfg.Steps)/secs, "anchors/s")
			b.ReportMetric(float64(cfg.Steps)/secs, "steps/s")
			// On a shared machine wall time depends on the neighbours; CPU
			// time (user + system, all threads) much less.
			b.ReportMetric(float64(anchors*cfg.Steps)/cpu, "anchors/cpu-s")
			b.ReportMetric(float64(cfg.Steps)/cpu, "steps/cpu-s")
		})
	}
}

// processCPUSeconds is the user + system CPU time of this process so far.
func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
