package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/serving"
)

// importBatchItems is how many entities and events go into one log batch.
const importBatchItems = 8192

func runImport(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "import", "--format F --src PATH --data DIR [--max-clock-skew 1h]")
	format := fs.String("format", "jsonl", "source format: "+strings.Join(dataset.Formats(), ", "))
	src := fs.String("src", "", "source file or directory (required)")
	data := fs.String("data", "", "data directory to import into (required)")
	skew := fs.Duration("max-clock-skew", serving.DefaultMaxClockSkew, "refuse the import when an event is dated more than this ahead of the clock (negative: no limit)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "src", "data"); err != nil {
		return err
	}
	// Pass 1 validates the whole source, so that nothing is half-imported.
	check := dataset.Discard
	if *skew >= 0 {
		check = dataset.NotAfter(check, time.Now().Add(*skew).UnixMilli())
	}
	sum, err := dataset.Import(ctx, *format, *src, check)
	if err != nil {
		return fmt.Errorf("validate %s: %w", *src, err)
	}
	_, stored, err := importInto(ctx, e, *format, *src, *data)
	if err != nil {
		return err
	}
	out := struct {
		dataset.Summary
		Stored struct {
			Entities   int `json:"entities"`
			Events     int `json:"events"`
			Duplicates int `json:"duplicates"`
		} `json:"stored"`
	}{Summary: sum}
	out.Stored.Entities, out.Stored.Events, out.Stored.Duplicates = stored.Entities, stored.Events, stored.Duplicates
	return json.NewEncoder(e.stdout).Encode(out)
}

// importInto appends what format's importer reads from src to the event log of
// dataDir, in batches of importBatchItems.
func importInto(ctx context.Context, e *env, format, src, dataDir string) (dataset.Summary, eventlog.AppendResult, error) {
	log, _, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(dataDir, "log"), Logger: e.logger}, nil)
	if err != nil {
		return dataset.Summary{}, eventlog.AppendResult{}, fmt.Errorf("open event log: %w", err)
	}
	sink := &logSink{ctx: ctx, log: log}
	sum, err := dataset.Import(ctx, format, src, sink)
	if err == nil {
		err = sink.flush()
	}
	if cerr := log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sum, sink.stored, fmt.Errorf("import %s: %w", src, err)
	}
	return sum, sink.stored, nil
}

// logSink appends what an importer produces to the event log in batches.
type logSink struct {
	ctx    context.Context
	log    *eventlog.Log
	batch  eventlog.Batch
	stored eventlog.AppendResult // totals
}

func (s *logSink) Entity(en *graph.Entity) error {
	c := *en // the importer may reuse the map and slice: copy them
	c.Attrs, c.Vector = maps.Clone(en.Attrs), slices.Clone(en.Vector)
	s.batch.Entities = append(s.batch.Entities, c)
	return s.maybeFlush()
}

func (s *logSink) Event(ev *graph.Event) error {
	s.batch.Events = append(s.batch.Events, *ev)
	return s.maybeFlush()
}

func (s *logSink) maybeFlush() error {
	if len(s.batch.Entities)+len(s.batch.Events) < importBatchItems {
		return nil
	}
	return s.flush()
}

func (s *logSink) flush() error {
	if len(s.batch.Entities)+len(s.batch.Events) == 0 {
		return nil
	}
	res, err := s.log.Append(s.ctx, s.batch)
	if err != nil {
		return err
	}
	s.stored.Entities += res.Entities
	s.stored.Events += res.Events
	s.stored.Duplicates += res.Duplicates
	s.batch = eventlog.Batch{}
	return nil
}

var _ dataset.Sink = (*logSink)(nil)
