package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/retrieval"
)

// runCalibrate calibrates a trained version again (retrieval.Calibrate),
// for example after the data grew or with other counter settings, and
// writes the result into the version.
func runCalibrate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "calibrate", "--data DIR [--model DIR/models/vN] [--asof T] [--recent F]")
	data := fs.String("data", "", "data directory (required)")
	dir := fs.String("model", "", "version directory (default: the latest of DIR/models)")
	asOfFlag := fs.String("asof", "", "calibrate on events up to this time (unix ms or RFC 3339), as the version was trained; default all")
	recent := fs.Float64("recent", 0, "rank only the engagements among the latest fraction (below 1) of the events, and after the version's split (0: the default, every engagement after the split; negative: the same)")
	prior := defaultPriorFlags()
	prior.register(fs, "not accepted here: the prior weight is what is calibrated")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "data"); err != nil {
		return err
	}
	if err := requireLog(*data); err != nil {
		return err
	}
	if err := prior.check(); err != nil {
		return err
	}
	if prior.weightSet {
		return fmt.Errorf("%w: --prior-weight: hir calibrate chooses the prior weight (the counters' flags and --coengage-weight shape what it is chosen for)", errUsage)
	}
	if !(*recent < 1) {
		return fmt.Errorf("%w: --recent %v: want a fraction below 1, or 0 for every engagement after the split", errUsage, *recent)
	}
	if *dir == "" {
		latest, err := model.LatestVersionDir(*data)
		if err != nil {
			return err
		}
		*dir = latest
	}
	store, err := loadGraphAsOf(ctx, *data, *asOfFlag, e.logger)
	if err != nil {
		return err
	}
	metrics, err := model.ReadMetrics(*dir)
	if err != nil {
		return err
	}
	o := prior.calibrate(prior.coWeight, e.logger)
	o.Recent = *recent
	c, err := retrieval.CalibrateVersion(ctx, *dir, metrics.SplitTS, store, *o)
	if err != nil {
		return err
	}
	return json.NewEncoder(e.stdout).Encode(map[string]any{"dir": *dir, "calibration": c})
}
