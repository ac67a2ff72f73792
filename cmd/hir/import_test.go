package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportFutureTimestamp: an importer refuses an event dated beyond the
// clock skew, naming the file and line, and stores nothing; old data
// stays importable.
func TestImportFutureTimestamp(t *testing.T) {
	ev := func(id, ts string) string {
		return `{"id":"` + id + `","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":` + ts + "}\n"
	}
	for _, tc := range []struct {
		name   string
		events string
		args   []string
		code   int
		want   string
	}{
		{"future on line 3", ev("e1", "1700000000000") + ev("e2", `"1999-12-31T23:59:59Z"`) + ev("e3", `"2199-06-01T00:00:00Z"`), nil, 1,
			"events.jsonl:3: event timestamp in the future: ts 2199-06-01T00:00:00Z"},
		{"old data", ev("e1", `"1970-01-02T00:00:00Z"`) + ev("e2", "1700000000000"), nil, 0, `"events":2`},
		{"limit off", ev("e3", `"2199-06-01T00:00:00Z"`), []string{"--max-clock-skew", "-1s"}, 0, `"events":1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, data := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(src, "events.jsonl"), []byte(tc.events), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errw bytes.Buffer
			args := append([]string{"import", "--src", src, "--data", data}, tc.args...)
			code := run(context.Background(), args, &out, &errw)
			if code != tc.code || !strings.Contains(out.String()+errw.String(), tc.want) {
				t.Errorf("run(%v) = %d, want %d with %q; output:\n%s%s", args, code, tc.code, tc.want, out.String(), errw.String())
			}
			if _, err := os.Stat(filepath.Join(data, "log")); tc.code != 0 && err == nil {
				t.Errorf("a refused import created the log")
			}
		})
	}
}
