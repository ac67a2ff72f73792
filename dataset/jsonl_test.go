package dataset

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hir-ads/hir/graph"
)

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 5<<20)
	tests := []struct {
		name      string
		in        string
		wantLines []string
		wantNums  []int
	}{
		{name: "empty", in: ""},
		{name: "blank only", in: "\n \n\t\r\n"},
		{name: "no final newline", in: "a\nb", wantLines: []string{"a", "b"}, wantNums: []int{1, 2}},
		{name: "crlf and blanks", in: "a\r\n\r\n\nb\r\n", wantLines: []string{"a", "b"}, wantNums: []int{1, 4}},
		{name: "long line", in: "a\n" + long + "\nb\n", wantLines: []string{"a", long, "b"}, wantNums: []int{1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr := NewLineReader(strings.NewReader(tc.in), "x")
			var lines []string
			var nums []int
			for lr.Next() {
				lines = append(lines, string(lr.Bytes()))
				nums = append(nums, lr.Line())
			}
			if err := lr.Err(); err != nil {
				t.Fatalf("Err() = %v", err)
			}
			if len(lines) != len(tc.wantLines) {
				t.Fatalf("got %d lines, want %d", len(lines), len(tc.wantLines))
			}
			for i := range lines {
				if lines[i] != tc.wantLines[i] || nums[i] != tc.wantNums[i] {
					t.Errorf("line %d = %.20q at %d, want %.20q at %d", i, lines[i], nums[i], tc.wantLines[i], tc.wantNums[i])
				}
			}
		})
	}
}

func TestReadJSONL(t *testing.T) {
	bigText := strings.Repeat("lorem ipsum ", 400_000) // ~4.8 MB on one line
	tests := []struct {
		name         string
		kind         Kind
		in           string
		wantEntities []graph.Entity
		wantEvents   []graph.Event
		wantLine     int // > 0: want a *LineError at this line
	}{
		{name: "entities", kind: KindEntities,
			in: `{"type":"ad","id":"a17","text":"red shoes","attrs":{"k":"v","n":3,"b":true},"vector":[0.5,-1]}` + "\n\n" +
				`{"type":"user","id":42}` + "\n",
			wantEntities: []graph.Entity{
				{Type: graph.NodeAd, ID: "a17", Text: "red shoes", Attrs: map[string]string{"k": "v", "n": "3", "b": "true"}, Vector: []float32{0.5, -1}},
				{Type: graph.NodeUser, ID: "42"},
			}},
		{name: "events with rfc3339 and default weight", kind: KindEvents,
			in: `{"id":"e1","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a17"},"type":"click","ts":"2023-11-14T22:13:20Z"}`,
			wantEvents: []graph.Event{{ID: "e1", Src: ref(graph.NodeUser, "u1"), Dst: ref(graph.NodeAd, "a17"),
				Type: graph.EdgeClick, TS: 1700000000000, Weight: 1}}},
		{name: "auto", kind: KindAuto,
			in:           `{"type":"ad","id":"a1"}` + "\n" + `{"src":{"type":"ad","id":"a1"},"dst":{"type":"campaign","id":"c1"},"type":"in_campaign","ts":5,"weight":0.5}`,
			wantEntities: []graph.Entity{{Type: graph.NodeAd, ID: "a1"}},
			wantEvents: []graph.Event{{Src: ref(graph.NodeAd, "a1"), Dst: ref(graph.NodeCampaign, "c1"),
				Type: graph.EdgeInCampaign, TS: 5, Weight: 0.5}}},
		{name: "multi-megabyte line", kind: KindEntities,
			in:           `{"type":"ad","id":"big","text":"` + bigText + `"}` + "\n",
			wantEntities: []graph.Entity{{Type: graph.NodeAd, ID: "big", Text: bigText}}},
		{name: "entity in events file", kind: KindEvents, in: "\n" + `{"type":"ad","id":"a1"}`, wantLine: 2},
		{name: "negative weight", kind: KindEvents,
			in:       `{"src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1,"weight":-1}`,
			wantLine: 1},
		{name: "nan vector", kind: KindEntities, in: `{"type":"ad","id":"a1","vector":[NaN]}`, wantLine: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			err := ReadJSONL(context.Background(), strings.NewReader(tc.in), "f.jsonl", tc.kind, &rec)
			if tc.wantLine > 0 {
				var le *LineError
				if !errors.As(err, &le) || le.Line != tc.wantLine || le.File != "f.jsonl" {
					t.Fatalf("ReadJSONL error = %v, want a *LineError at f.jsonl:%d", err, tc.wantLine)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadJSONL error = %v", err)
			}
			opts := cmpopts.EquateEmpty()
			if diff := cmp.Diff(tc.wantEntities, rec.entities, opts); diff != "" {
				t.Errorf("entities mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, rec.events, opts); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAppendRoundTrip(t *testing.T) {
	entities := []graph.Entity{
		{Type: graph.NodeAd, ID: "a1"},
		{Type: graph.NodeProduct, ID: "p\"1\\", Text: "tab\there\nnew \u2028 line \x01 é 日本 \U0001F600",
			Attrs: map[string]string{"z": "1", "a": "</script>", "": "empty key"}, Vector: []float32{0, -0.0, 1e-30, 3.4e38, -1.5, float32(math.Pi)}},
		{Type: graph.NodePixel, ID: "bad utf8 \xff\xfe", Text: "\xc3"},
	}
	for _, e := range entities {
		t.Run("entity "+e.ID, func(t *testing.T) {
			line := AppendEntity(nil, &e)
			if !json.Valid(line) {
				t.Fatalf("AppendEntity(%+v) = %s, not valid JSON", e, line)
			}
			var got graph.Entity
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatalf("decode %s: %v", line, err)
			}
			want := e
			want.ID, want.Text = string([]rune(e.ID)), string([]rune(e.Text)) // invalid bytes -> U+FFFD each
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("round trip of %s mismatch (-want +got):\n%s", line, diff)
			}
			// Matches encoding/json on the same value, attribute order included.
			std, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			if err := json.Unmarshal(std, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(line, &b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("AppendEntity differs from encoding/json (-std +ours):\n%s", diff)
			}
		})
	}
	events := []graph.Event{
		{Src: ref(graph.NodeUser, "u1"), Dst: ref(graph.NodeAd, "a1"), Type: graph.EdgeClick, TS: 1700000000000, Weight: 1},
		{ID: "x\"y", Src: ref(graph.NodeUser, "ü"), Dst: ref(graph.NodePixel, "p"), Type: graph.EdgeFires, TS: 0, Weight: 0.1},
	}
	for _, ev := range events {
		t.Run("event "+ev.ID, func(t *testing.T) {
			line := AppendEvent(nil, &ev)
			var got graph.Event
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatalf("decode %s: %v", line, err)
			}
			if diff := cmp.Diff(ev, got); diff != "" {
				t.Errorf("round trip of %s mismatch (-want +got):\n%s", line, diff)
			}
		})
	}
}

func TestWriterRoundTrip(t *testing.T) {
	ctx := context.Background()
	var want recorder
	wantSum, err := Import(ctx, "movielens", "testdata/movielens", &want)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, "movielens", "testdata/movielens", w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Entity(&graph.Entity{Type: graph.NodeAd, ID: "late"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Entity after Close = %v, want ErrClosed", err)
	}
	// Compress events.jsonl to check that .gz files are read too.
	raw, err := os.ReadFile(filepath.Join(dir, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(raw)
	zw.Close()
	os.Remove(filepath.Join(dir, EventsFile))
	if err := os.WriteFile(filepath.Join(dir, EventsFile+".gz"), zb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	var got recorder
	gotSum, err := Import(ctx, "jsonl", dir, &got)
	if err != nil {
		t.Fatal(err)
	}
	wantSum.Format, wantSum.Ratings = "jsonl", 0
	if diff := cmp.Diff(wantSum, gotSum); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(recorder{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("records mismatch (-want +got):\n%s", diff)
	}
}

// FuzzReadJSONL checks that the reader never panics and that every accepted
// record re-encodes (AppendEntity/AppendEvent) to a line that decodes to the
// same value.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"type":"ad","id":"a17","text":"t","attrs":{"k":"v"},"vector":[1.5]}`), uint8(KindEntities))
	f.Add([]byte(`{"id":"x","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a17"},"type":"click","ts":1700000000000,"weight":1}`), uint8(KindEvents))
	f.Add([]byte("{\"type\":\"user\",\"id\":1}\n\n{\"src\":{\"type\":\"user\",\"id\":1},\"dst\":{\"type\":\"ad\",\"id\":2},\"type\":\"impression\",\"ts\":\"2023-01-01T00:00:00Z\"}\r\n"), uint8(KindAuto))
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		var rec recorder
		err := ReadJSONL(context.Background(), bytes.NewReader(data), "fuzz.jsonl", Kind(kind%3), &rec)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("error %v is not a *LineError with a line", err)
			}
		}
		for _, e := range rec.entities {
			line := AppendEntity(nil, &e)
			var got graph.Entity
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatalf("re-encoded entity %s does not decode: %v", line, err)
			}
			if diff := cmp.Diff(e, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("entity round trip of %s mismatch (-want +got):\n%s", line, diff)
			}
		}
		for _, ev := range rec.events {
			line := AppendEvent(nil, &ev)
			var got graph.Event
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatalf("re-encoded event %s does not decode: %v", line, err)
			}
			if diff := cmp.Diff(ev, got); diff != "" {
				t.Fatalf("event round trip of %s mismatch (-want +got):\n%s", line, diff)
			}
		}
	})
}
