package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/graph/graphtest"
	"github.com/hir-ads/hir/serving"
)

// TestParseTime checks the --asof forms: unix milliseconds and RFC 3339,
// whose year starts with a digit too.
func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"", 0, false},
		{"887740603000", 887740603000, false},
		{"1998-02-17T18:36:43Z", 887740603000, false},
		{"1998-02-17T20:36:43+02:00", 887740603000, false},
		{"yesterday", 0, true},
		{"1998-02-17", 0, true},
	} {
		got, err := parseTime(tc.in)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("parseTime(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestLoadGraphFromCheckpoint: with every event kept, hir train and the
// other commands read the graph from the log's checkpoint and replay the
// batches after it; the graph is the one a full replay gives.
func TestLoadGraphFromCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir, _ := importedWorld(t)
	replayed, err := loadGraph(ctx, dir, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// Checkpoint the log as hir serve does, then log one more batch after it.
	log, store, _, err := serving.OpenStore(ctx, eventlog.Options{Dir: filepath.Join(dir, "log")}, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Checkpoint(ctx, store.WriteCheckpoint); err != nil {
		t.Fatal(err)
	}
	late := graph.Event{ID: "late-1", Src: graph.Ref{Type: graph.NodeUser, ID: "late-user"},
		Dst: graph.Ref{Type: graph.NodeAd, ID: "late-ad"}, Type: graph.EdgeClick, TS: replayed.MaxTS(), Weight: 1}
	if _, err := log.Append(ctx, eventlog.Batch{Events: []graph.Event{late}}); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := replayed.AddEvent(late); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	got, err := loadGraph(ctx, dir, 0, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "graph read from the event log's checkpoint") || !strings.Contains(buf.String(), "batches_after=1") {
		t.Fatalf("the checkpoint was not read: %s", buf.String())
	}
	want, have := graphtest.Edges(replayed), graphtest.Edges(got)
	if !slices.Equal(want, have) || got.NumNodes(graph.NodeAd) != replayed.NumNodes(graph.NodeAd) {
		t.Fatalf("graph from the checkpoint: %d events, %d ads; full replay: %d events, %d ads",
			len(have), got.NumNodes(graph.NodeAd), len(want), replayed.NumNodes(graph.NodeAd))
	}
	// A cut replays: the checkpoint holds events after it.
	cut, err := loadGraph(ctx, dir, replayed.MinTS(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if cut.MaxTS() != replayed.MinTS() || cut.NumEvents() >= replayed.NumEvents() {
		t.Fatalf("graph cut at %d: %d events up to %d, want only those at the cut", replayed.MinTS(), cut.NumEvents(), cut.MaxTS())
	}
}
