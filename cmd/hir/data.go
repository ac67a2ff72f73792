package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
)

// loadGraph replays the event log of the data directory dir into a new graph
// store. Events later than asOf (unix ms; 0 keeps all) are left out, so that
// nothing after a cut can leak into training.
func loadGraph(ctx context.Context, dir string, asOf int64, logger *slog.Logger) (*graph.Store, error) {
	store := graph.NewStore(graph.Options{Logger: logger})
	replay := func(b eventlog.Batch) error {
		for i := range b.Entities {
			if _, err := store.UpsertEntity(b.Entities[i]); err != nil {
				return fmt.Errorf("batch %d: entity %s: %w", b.Seq, b.Entities[i].Ref(), err)
			}
		}
		for i := range b.Events {
			if asOf > 0 && b.Events[i].TS > asOf {
				continue
			}
			if _, err := store.AddEvent(b.Events[i]); err != nil {
				return fmt.Errorf("batch %d: event %d: %w", b.Seq, i, err)
			}
		}
		return nil
	}
	log, rep, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(dir, "log"), Logger: logger}, replay)
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	if err := log.Close(); err != nil {
		return nil, fmt.Errorf("close event log: %w", err)
	}
	if rep.Batches == 0 {
		return nil, fmt.Errorf("data directory %s has no events: run `hir import` first", dir)
	}
	store.Compact()
	return store, nil
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
