package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		order   []string
		a0      point // first point of series "a" (sorted by time)
		wantErr string
	}{
		{"sorted per series", "series\tseconds\trecall@20\tcold_recall@20\na\t9\t0.2\t0.3\nb\t1\t0.1\t0.1\na\t3\t0.1\t0.25\n", []string{"a", "b"}, point{3, 0.1, 0.25}, ""},
		{"no cold column", "series\tseconds\trecall@20\na\t2\t0.2\n", []string{"a"}, point{2, 0.2, -1}, ""},
		{"missing column", "series\tsteps\trecall@20\na\t2\t0.2\n", nil, point{}, `no "seconds" column`},
		{"bad number", "series\tseconds\trecall@20\na\tx\t0.2\n", nil, point{}, "row 2, seconds"},
		{"header only", "series\tseconds\trecall@20\n", nil, point{}, "no data rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			series, order, err := read(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(order, ",") != strings.Join(tc.order, ",") {
				t.Errorf("order = %v, want %v", order, tc.order)
			}
			if got := series["a"][0]; got != tc.a0 {
				t.Errorf("first point of a = %+v, want %+v", got, tc.a0)
			}
		})
	}
}

func TestRunWritesPNG(t *testing.T) {
	out := filepath.Join(t.TempDir(), "c.png")
	if err := run("testdata/curve.tsv", out, "t", []ref{{"recent-popularity", 0.15}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
		t.Errorf("image %v, want at least 300x200", b)
	}
	if err := run("testdata/missing.tsv", out, "t", nil); err == nil {
		t.Error("missing input: no error")
	}
}
