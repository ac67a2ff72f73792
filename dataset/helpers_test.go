package dataset

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// recorder is a Sink that keeps copies of everything it receives.
type recorder struct {
	entities []graph.Entity
	events   []graph.Event
}

func (r *recorder) Entity(e *graph.Entity) error {
	c := *e
	r.entities = append(r.entities, c)
	return nil
}

func (r *recorder) Event(ev *graph.Event) error {
	r.events = append(r.events, *ev)
	return nil
}

func (r *recorder) entity(t graph.NodeType, id string) (graph.Entity, bool) {
	for _, e := range r.entities {
		if e.Type == t && e.ID == id {
			return e, true
		}
	}
	return graph.Entity{}, false
}

// sharedData returns the directory of the shared data sets, or skips.
func sharedData(t testing.TB, sub string) string {
	t.Helper()
	root := os.Getenv("HIR_SHARED_DATA")
	if root == "" {
		root = filepath.Join("..", "..", "shared", "data")
	}
	dir := filepath.Join(root, sub)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared data %s not present: %v", dir, err)
	}
	return dir
}

// writeFiles writes name -> content into a new temporary directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
