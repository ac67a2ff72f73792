package eventlog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/hir-ads/hir/graph"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		// A helper child killed with SIGKILL never reaches goleak; one that
		// runs to completion leaves the writer of its log running on purpose.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}

// batchOpts compares batches: nil and empty slices and maps are equal, and
// floats compare bit for bit (so NaN equals itself).
var batchOpts = cmp.Options{
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(a, b float32) bool { return mathFloat32bits(a) == mathFloat32bits(b) }),
}

func testEvent(id string, i int) graph.Event {
	return graph.Event{
		ID:     id,
		Src:    graph.Ref{Type: graph.NodeUser, ID: fmt.Sprintf("u%d", i%97)},
		Dst:    graph.Ref{Type: graph.NodeAd, ID: fmt.Sprintf("ad%d", i%31)},
		Type:   graph.EdgeClick,
		TS:     1_700_000_000_000 + int64(i)*1000,
		Weight: 1 + float32(i%3),
	}
}

func testEntity(i int) graph.Entity {
	return graph.Entity{
		Type:   graph.NodeAd,
		ID:     fmt.Sprintf("ad%d", i),
		Text:   fmt.Sprintf("running shoes model %d", i),
		Attrs:  map[string]string{"brand": "b" + fmt.Sprint(i%5), "status": "active"},
		Vector: []float32{float32(i), -0.5, 0.25},
	}
}

// testBatch builds a batch of nEnt entities and nEv events with unique ids
// prefixed by prefix.
func testBatch(prefix string, nEnt, nEv int) Batch {
	var b Batch
	for i := range nEnt {
		b.Entities = append(b.Entities, testEntity(i))
	}
	for i := range nEv {
		b.Events = append(b.Events, testEvent(fmt.Sprintf("%s-%d", prefix, i), i))
	}
	return b
}

// openTest opens the log in dir and returns it with its report and the
// replayed batches. The log is closed at cleanup unless already closed.
func openTest(t testing.TB, opts Options) (*Log, OpenReport, []Batch) {
	t.Helper()
	var got []Batch
	l, rep, err := Open(context.Background(), opts, func(b Batch) error {
		got = append(got, b)
		return nil
	})
	if err != nil {
		t.Fatalf("Open(%s) = %v", opts.Dir, err)
	}
	t.Cleanup(func() { l.Close() })
	return l, rep, got
}

func mustAppend(t testing.TB, l *Log, b Batch) AppendResult {
	t.Helper()
	res, err := l.Append(context.Background(), b)
	if err != nil {
		t.Fatalf("Append = %v", err)
	}
	return res
}

func mustClose(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

// logBuffer returns a logger writing text records to the returned buffer.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}
