package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hir-ads/hir/graph"
)

// Errors returned by the importers.
var (
	// ErrUnknownFormat is returned by Import for a format not in Formats.
	ErrUnknownFormat = errors.New("unknown format")
	// ErrBadRecord reports a malformed line of a source file.
	ErrBadRecord = errors.New("bad record")
	// ErrNoData reports a source without the files its format needs.
	ErrNoData = errors.New("no data")
	// ErrLineTooLong reports a line longer than MaxLineBytes.
	ErrLineTooLong = errors.New("line too long")
	// ErrClosed is returned by a Writer used after Close.
	ErrClosed = errors.New("writer closed")
)

// LineError is an error at one line of an input file.
type LineError struct {
	File string // base name of the file
	Line int    // 1-based line number
	Err  error
}

// Error returns "file:line: err".
func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the underlying error.
func (e *LineError) Unwrap() error { return e.Err }

// Sink receives the entities and events of an import. The pointers are only
// valid during the call: a sink that keeps a record must copy it. Returning an
// error stops the import.
type Sink interface {
	Entity(*graph.Entity) error
	Event(*graph.Event) error
}

// Discard is a Sink that drops everything; Import into Discard validates a
// source and counts it.
var Discard Sink = discard{}

type discard struct{}

func (discard) Entity(*graph.Entity) error { return nil }
func (discard) Event(*graph.Event) error   { return nil }

// Summary counts what an import or synth produced. String renders it as one
// JSON line.
type Summary struct {
	Format         string         `json:"format"`
	Entities       int            `json:"entities"`
	Events         int            `json:"events"`
	EntitiesByType map[string]int `json:"entities_by_type"`
	EventsByType   map[string]int `json:"events_by_type"`
	// Engagement and Structure split Events into engagement events
	// (impression ... not_interested) and structural relations.
	Engagement int `json:"engagement"`
	Structure  int `json:"structure"`
	// Ratings counts the events that come from rating rows (MovieLens).
	Ratings int   `json:"ratings,omitempty"`
	MinTS   int64 `json:"min_ts"` // unix ms of the earliest event; 0 without events
	MaxTS   int64 `json:"max_ts"` // unix ms of the latest event; 0 without events
}

// String returns the summary as one line of JSON.
func (s Summary) String() string {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%+v", map[string]any{"error": err.Error()})
	}
	return string(b)
}

// counter is the Sink every import goes through: it applies the checks of
// the API edge (ids in NFC, without control or format characters:
// graph.NormalizeID; events within graph.EdgeRules), counts and forwards.
type counter struct {
	next Sink
	sum  Summary
}

func newCounter(format string, next Sink) *counter {
	return &counter{next: next, sum: Summary{
		Format:         format,
		EntitiesByType: map[string]int{},
		EventsByType:   map[string]int{},
		MinTS:          math.MaxInt64,
		MaxTS:          math.MinInt64,
	}}
}

func (c *counter) Entity(e *graph.Entity) error {
	id, err := graph.NormalizeID(e.ID)
	if err != nil {
		return fmt.Errorf("%w: %s %q: %w", ErrBadRecord, e.Type, e.ID, err)
	}
	e.ID = id
	if err := c.next.Entity(e); err != nil {
		return err
	}
	c.sum.Entities++
	c.sum.EntitiesByType[e.Type.String()]++
	return nil
}

func (c *counter) Event(ev *graph.Event) error {
	if err := ev.Normalize(); err != nil {
		return fmt.Errorf("%w: event %q: %w", ErrBadRecord, ev.ID, err)
	}
	if err := ev.CheckEndpoints(); err != nil {
		return fmt.Errorf("%w: event %q: %w", ErrBadRecord, ev.ID, err)
	}
	if err := c.next.Event(ev); err != nil {
		return err
	}
	c.count(ev.Type, ev.TS)
	return nil
}

func (c *counter) count(t graph.EdgeType, ts int64) {
	c.sum.Events++
	c.sum.EventsByType[t.String()]++
	if t.IsStructure() {
		c.sum.Structure++
	} else {
		c.sum.Engagement++
	}
	c.sum.MinTS = min(c.sum.MinTS, ts)
	c.sum.MaxTS = max(c.sum.MaxTS, ts)
}

func (c *counter) summary() Summary {
	s := c.sum
	if s.Events == 0 {
		s.MinTS, s.MaxTS = 0, 0
	}
	return s
}

type importer func(ctx context.Context, src string, sink Sink) (Summary, error)

var importers = map[string]importer{
	"jsonl":           importJSONL,
	"movielens":       importMovieLens,
	"taobao-ad":       importTaobaoAd,
	"taobao-behavior": importTaobaoBehavior,
}

// Formats returns the names of the formats Import accepts, sorted.
func Formats() []string {
	names := make([]string, 0, len(importers))
	for name := range importers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Import streams the data set at src, in the given format, into sink and
// returns what it counted. See the package documentation for the formats.
// Errors in a source file are *LineError values naming the file and line;
// an unknown format is ErrUnknownFormat. An import stopped by an error may
// have delivered part of the data to sink: callers that must not half-import
// run a first pass into Discard.
func Import(ctx context.Context, format, src string, sink Sink) (Summary, error) {
	imp, ok := importers[format]
	if !ok {
		return Summary{}, fmt.Errorf("import %q: %w (valid: %s)", format, ErrUnknownFormat, strings.Join(Formats(), ", "))
	}
	c := newCounter(format, sink)
	extra, err := imp(ctx, src, c)
	if err != nil {
		return Summary{}, err
	}
	s := c.summary()
	s.Ratings = extra.Ratings
	return s, nil
}

// ErrFutureTimestamp is returned (wrapped in a *LineError by the importers)
// for an event dated after the limit of a [NotAfter] sink.
var ErrFutureTimestamp = errors.New("event timestamp in the future")

// NotAfter returns a Sink that forwards to next and refuses every event
// dated after maxTS (unix milliseconds) with [ErrFutureTimestamp]; the
// importers report it with the file and line. Events of any earlier date
// pass.
func NotAfter(next Sink, maxTS int64) Sink { return notAfter{next: next, maxTS: maxTS} }

type notAfter struct {
	next  Sink
	maxTS int64
}

func (s notAfter) Entity(e *graph.Entity) error { return s.next.Entity(e) }

func (s notAfter) Event(ev *graph.Event) error {
	if ev.TS > s.maxTS {
		return fmt.Errorf("%w: ts %s is after %s", ErrFutureTimestamp,
			time.UnixMilli(ev.TS).UTC().Format(time.RFC3339), time.UnixMilli(s.maxTS).UTC().Format(time.RFC3339))
	}
	return s.next.Event(ev)
}
