package main

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/hir-ads/hir/model"
)

// trainProgress reports a training run of steps steps to w: a progress bar
// when w is a terminal, JSON lines (model.StepMetrics) otherwise.
func trainProgress(w io.Writer, steps int) model.Progress {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &barProgress{w: w, bar: progressbar.NewOptions(steps, progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("train"), progressbar.OptionShowCount(), progressbar.OptionSetWidth(30))}
	}
	return model.JSONProgress(w)
}

// barProgress draws a training run's progress on a terminal.
type barProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (p *barProgress) Step(m model.StepMetrics) {
	p.bar.Describe(fmt.Sprintf("loss %.3f engage %.3f", m.Total, m.Engagement))
	_ = p.bar.Set(m.Step)
}

func (p *barProgress) Done() {
	_ = p.bar.Finish()
	fmt.Fprintln(p.w)
}
