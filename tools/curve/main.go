// Command curve draws the quality-against-training-time curve of
// scripts/train-curve.sh: recall@20 on a validation window against the
// training wall time of each model snapshot, one line per series.
//
// Usage:
//
//	go run . -in curve.tsv -out curve.png -title "..."
//
// The input is tab-separated with a header; the columns used are series,
// seconds and recall@20 (and, when present, cold_recall@20, drawn dashed).
// A separate module, so that the service's module does not depend on the
// plotting library.
package main

import (
	"cmp"
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func main() {
	in := flag.String("in", "", "input TSV (series, steps, seconds, recall@20, ...)")
	out := flag.String("out", "curve.png", "output PNG")
	title := flag.String("title", "Validation recall@20 against training time", "plot title")
	var refs refFlags
	flag.Var(&refs, "ref", "a reference level NAME=RECALL drawn as a horizontal line (repeatable)")
	flag.Parse()
	if err := run(*in, *out, *title, refs); err != nil {
		log.Fatal(err)
	}
}

// ref is a horizontal reference line, such as a baseline's recall.
type ref struct {
	name  string
	value float64
}

// refFlags collects -ref NAME=VALUE flags.
type refFlags []ref

func (r *refFlags) String() string { return fmt.Sprint(*r) }

func (r *refFlags) Set(s string) error {
	name, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("%s: %w", s, err)
	}
	*r = append(*r, ref{name, x})
	return nil
}

// point is one snapshot of one series.
type point struct{ seconds, recall, cold float64 }

func run(in, out, title string, refs []ref) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	series, order, err := read(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "training wall time (minutes, 2 cores)"
	p.Y.Label.Text = "recall@20 (validation window)"
	p.Legend.Top = false // bottom right: the curves rise to the top left
	p.Add(plotter.NewGrid())
	palette := []color.Color{
		color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
		color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 148, G: 103, B: 189, A: 255},
		color.RGBA{R: 255, G: 127, B: 14, A: 255}, color.RGBA{R: 23, G: 190, B: 207, A: 255},
		color.RGBA{R: 140, G: 86, B: 75, A: 255}, color.RGBA{R: 227, G: 119, B: 194, A: 255},
		color.RGBA{R: 188, G: 189, B: 34, A: 255},
	}
	for i, name := range order {
		pts := series[name]
		all, cold := make(plotter.XYs, len(pts)), make(plotter.XYs, 0, len(pts))
		for k, pt := range pts {
			all[k] = plotter.XY{X: pt.seconds / 60, Y: pt.recall}
			if pt.cold >= 0 {
				cold = append(cold, plotter.XY{X: pt.seconds / 60, Y: pt.cold})
			}
		}
		c := palette[i%len(palette)]
		l, s, err := plotter.NewLinePoints(all)
		if err != nil {
			return err
		}
		l.Color, s.Color = c, c
		p.Add(l, s)
		p.Legend.Add(name+", all users", l, s)
		if len(cold) > 0 {
			lc, err := plotter.NewLine(cold)
			if err != nil {
				return err
			}
			lc.Color, lc.Dashes = c, []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(lc)
			p.Legend.Add(name+", cold users", lc)
		}
	}
	xmax := 0.0
	for _, pts := range series {
		for _, pt := range pts {
			xmax = max(xmax, pt.seconds/60)
		}
	}
	for _, r := range refs {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: r.value}, {X: xmax, Y: r.value}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = color.Gray{Y: 120}, []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (%.3f)", r.name, r.value), l)
	}
	p.Y.Min = 0
	p.X.Min = 0
	p.Y.Max *= 1.15 // room above the highest line
	return p.Save(7*vg.Inch, 4.5*vg.Inch, out)
}

// read parses the TSV into points per series, in order of first appearance.
func read(r io.Reader) (map[string][]point, []string, error) {
	cr := csv.NewReader(r)
	cr.Comma = '\t'
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, nil, err
	}
	if len(rows) < 2 {
		return nil, nil, fmt.Errorf("no data rows")
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"series", "seconds", "recall@20"} {
		if _, ok := col[h]; !ok {
			return nil, nil, fmt.Errorf("no %q column in the header %v", h, rows[0])
		}
	}
	series := map[string][]point{}
	var order []string
	for n, row := range rows[1:] {
		num := func(h string) (float64, error) {
			i, ok := col[h]
			if !ok {
				return -1, nil
			}
			v, err := strconv.ParseFloat(row[i], 64)
			if err != nil {
				return 0, fmt.Errorf("row %d, %s: %w", n+2, h, err)
			}
			return v, nil
		}
		var pt point
		if pt.seconds, err = num("seconds"); err != nil {
			return nil, nil, err
		}
		if pt.recall, err = num("recall@20"); err != nil {
			return nil, nil, err
		}
		if pt.cold, err = num("cold_recall@20"); err != nil {
			return nil, nil, err
		}
		name := row[col["series"]]
		if _, ok := series[name]; !ok {
			order = append(order, name)
		}
		series[name] = append(series[name], pt)
	}
	for _, pts := range series {
		slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.seconds, b.seconds) })
	}
	return series, order, nil
}
