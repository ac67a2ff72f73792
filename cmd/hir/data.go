package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/serving"
)

// loadGraph replays the event log of the data directory dir into a new graph
// store. Events later than asOf (unix ms; 0 keeps all) are left out, so that
// nothing after a cut can leak into training. With every event kept, the
// graph is read from the log's checkpoint where `hir serve` wrote one, and
// only the batches after it are replayed.
func loadGraph(ctx context.Context, dir string, asOf int64, logger *slog.Logger) (*graph.Store, error) {
	if err := requireLog(dir); err != nil {
		return nil, err
	}
	opts := eventlog.Options{Dir: filepath.Join(dir, "log"), Logger: logger}
	var store *graph.Store
	var log *eventlog.Log
	var rep eventlog.OpenReport
	var err error
	if asOf == 0 {
		// Every event kept: the graph hir serve starts from, read from
		// the log's checkpoint where there is one.
		log, store, rep, err = serving.OpenStore(ctx, opts, graph.Options{Logger: logger})
	} else {
		store = graph.NewStore(graph.Options{Logger: logger})
		log, rep, err = eventlog.Open(ctx, opts, func(b eventlog.Batch) error {
			for i := range b.Entities {
				if _, err := store.UpsertEntity(b.Entities[i]); err != nil {
					return fmt.Errorf("batch %d: entity %s: %w", b.Seq, b.Entities[i].Ref(), err)
				}
			}
			for i := range b.Events {
				if b.Events[i].TS > asOf {
					continue
				}
				if _, err := store.AddEvent(b.Events[i]); err != nil {
					return fmt.Errorf("batch %d: event %d: %w", b.Seq, i, err)
				}
			}
			return nil
		})
		if err != nil {
			err = fmt.Errorf("open event log: %w", err)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := log.Close(); err != nil {
		return nil, fmt.Errorf("close event log: %w", err)
	}
	if rep.Checkpoint.Seq > 0 {
		logger.Info("graph read from the event log's checkpoint", "checkpoint_seq", rep.Checkpoint.Seq,
			"elapsed", rep.Checkpoint.Elapsed, "batches_after", rep.Batches)
	}
	if rep.Batches == 0 && rep.Checkpoint.Seq == 0 {
		return nil, fmt.Errorf("data directory %s has no events: run `hir import` first", dir)
	}
	store.Compact()
	return store, nil
}

// errNoData reports a data directory without an event log.
var errNoData = errors.New("no data")

// requireLog fails, saying what to run instead, when the data directory dir
// holds no event log: the commands that read one never create it (only
// import, demo and serve --init do).
func requireLog(dir string) error {
	st, err := os.Stat(filepath.Join(dir, "log"))
	switch {
	case err == nil && st.IsDir():
		return nil
	case errors.Is(err, os.ErrNotExist):
		if _, derr := os.Stat(dir); errors.Is(derr, os.ErrNotExist) {
			return fmt.Errorf("%w: data directory %s does not exist: make one with `hir import --src SRC --data %s` (or `hir demo`; `hir serve --init` serves an empty one)", errNoData, dir, dir)
		}
		return fmt.Errorf("%w: data directory %s holds no event log (%s): import data first with `hir import --src SRC --data %s`", errNoData, dir, filepath.Join(dir, "log"), dir)
	case err == nil:
		return fmt.Errorf("%w: %s is not a directory", errNoData, filepath.Join(dir, "log"))
	}
	return fmt.Errorf("data directory %s: %w", dir, err)
}

// loadGraphAsOf is loadGraph as of the time asOfFlag names (an --asof
// flag's value, parseTime's forms; "": every event).
func loadGraphAsOf(ctx context.Context, dir, asOfFlag string, logger *slog.Logger) (*graph.Store, error) {
	asOf, err := parseTime(asOfFlag)
	if err != nil {
		return nil, fmt.Errorf("--asof: %w", err)
	}
	return loadGraph(ctx, dir, asOf, logger)
}

// parseTime parses a flag value that is unix milliseconds or RFC 3339; "" is 0.
func parseTime(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	raw := json.RawMessage(s)
	if strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		raw, _ = json.Marshal(s) // RFC 3339, whose year starts with a digit too
	}
	return graph.ParseTimestamp(raw)
}
