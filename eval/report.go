package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Report is the outcome of one evaluation run: the split, the methods'
// costs and their metrics by slice. It marshals to the JSON written by
// `hir eval --json`.
type Report struct {
	Protocol string       `json:"protocol"`
	Data     string       `json:"data,omitempty"`
	Window   Window       `json:"window"`
	Stats    Stats        `json:"stats"`
	Ks       []int        `json:"ks"`
	Methods  []MethodInfo `json:"methods"`
	Results  []Result     `json:"results"`
	Truth    *TruthReport `json:"truth,omitempty"`
}

// Stats describes the data and the split.
type Stats struct {
	Users             int   `json:"users"`
	Items             int   `json:"items"`
	Interactions      int   `json:"interactions"`
	TrainInteractions int   `json:"train_interactions"`
	EvalInteractions  int   `json:"eval_interactions"`
	EvalStartMS       int64 `json:"eval_start_ms"`
	EvalEndMS         int64 `json:"eval_end_ms"`
	ColdUserMax       int   `json:"cold_user_max"`
}

// MethodInfo records a method's cost.
type MethodInfo struct {
	Name         string  `json:"name"`
	FitSeconds   float64 `json:"fit_seconds"`
	QuerySeconds float64 `json:"query_seconds"`
	QueryMicros  float64 `json:"query_us"` // mean per query
}

// Result holds one method's mean metrics over the queries of one slice.
// Metrics keys are [MetricKey] values ("recall@20", "ndcg@20", "hit@20")
// and "mrr".
type Result struct {
	Method  string             `json:"method"`
	Slice   string             `json:"slice"`
	Queries int                `json:"queries"`
	Metrics map[string]float64 `json:"metrics"`
}

// Get returns the result of a method on a slice, or nil.
func (r *Report) Get(method, slice string) *Result {
	for i := range r.Results {
		if r.Results[i].Method == method && r.Results[i].Slice == slice {
			return &r.Results[i]
		}
	}
	return nil
}

// WriteJSON writes the report, indented, to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// columns lists the metric columns present in the results, in a fixed order.
func (r *Report) columns() []string {
	present := map[string]bool{}
	for _, res := range r.Results {
		for k := range res.Metrics {
			present[k] = true
		}
	}
	var cols []string
	for _, name := range []string{MetricRecall, MetricNDCG, MetricHitRate} {
		for _, k := range r.Ks {
			if key := MetricKey(name, k); present[key] {
				cols = append(cols, key)
			}
		}
	}
	if present[MetricMRR] {
		cols = append(cols, MetricMRR)
	}
	for _, k := range r.Ks {
		if key := MetricKey(MetricOverlap, k); present[key] {
			cols = append(cols, key)
		}
	}
	return cols
}

// Markdown renders the report as a heading, a summary line and one table of
// methods x slices x metrics, plus the methods' costs and the truth scores
// when present.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Evaluation: %s protocol, %s window\n\n", r.Protocol, r.Window.Name)
	if r.Data != "" {
		fmt.Fprintf(&b, "Data `%s`: %d users, %d items, %d interactions. ", r.Data, r.Stats.Users, r.Stats.Items, r.Stats.Interactions)
	}
	fmt.Fprintf(&b, "Fit on %d interactions up to %s; evaluated on %d interactions to %s. Cold users: <= %d interactions before the query.\n\n",
		r.Stats.TrainInteractions, msTime(r.Window.AsOf), r.Stats.EvalInteractions, msTime(r.Stats.EvalEndMS), r.Stats.ColdUserMax)
	cols := r.columns()
	b.WriteString("| method | slice | queries |")
	for _, c := range cols {
		b.WriteString(" " + c + " |")
	}
	b.WriteString("\n|---|---|---:|" + strings.Repeat("---:|", len(cols)) + "\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %d |", res.Method, res.Slice, res.Queries)
		for _, c := range cols {
			if v, ok := res.Metrics[c]; ok {
				fmt.Fprintf(&b, " %.4f |", v)
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	if len(r.Methods) > 0 {
		b.WriteString("\n| method | fit s | query µs |\n|---|---:|---:|\n")
		for _, m := range r.Methods {
			fmt.Fprintf(&b, "| %s | %.2f | %.0f |\n", m.Name, m.FitSeconds, m.QueryMicros)
		}
	}
	if t := r.Truth; t != nil {
		b.WriteString("\n" + t.markdown())
	}
	return b.String()
}

func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}
