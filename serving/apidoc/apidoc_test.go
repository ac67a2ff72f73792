package apidoc

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// TestSpecExamples: every operation documents at least one request and one
// answer (the live check is cmd/hir's TestDemo/spec examples).
func TestSpecExamples(t *testing.T) {
	xs, err := Examples()
	if err != nil {
		t.Fatal(err)
	}
	sp, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, x := range xs {
		n[x.OperationID]++
		if x.Status/100 != 2 || len(x.Response) == 0 || strings.Contains(x.Path, "{") {
			t.Errorf("example %s/%s = %+v, want a filled path and a 2xx answer", x.OperationID, x.Name, x)
		}
	}
	for _, item := range sp.doc.Paths.Map() {
		for _, op := range item.Operations() {
			if n[op.OperationID] == 0 {
				t.Errorf("operation %s has no example", op.OperationID)
			}
			if op.Summary == "" || len(op.Tags) == 0 {
				t.Errorf("operation %s: summary %q, tags %v, want both", op.OperationID, op.Summary, op.Tags)
			}
		}
	}
	if xs[0].OperationID != "postEntities" {
		t.Errorf("first example is %s, want postEntities (ingestion first)", xs[0].OperationID)
	}
}

// TestSpecEdgeRules: openapi.yaml's EdgeType states the table that
// graph.EdgeRules enforces, rule for rule.
func TestSpecEdgeRules(t *testing.T) {
	sp, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	desc := sp.doc.Components.Schemas["EdgeType"].Value.Description
	byType := map[graph.EdgeType][]string{}
	for _, r := range graph.EdgeRules() {
		byType[r.Type] = append(byType[r.Type], r.Src.String()+" -> "+r.Dst.String())
	}
	for et, pairs := range byType {
		for _, p := range pairs {
			if !strings.Contains(desc, p) {
				t.Errorf("EdgeType's description lacks %s's rule %s:\n%s", et, p, desc)
			}
		}
	}
	allowed := map[string]bool{}
	for _, pairs := range byType {
		for _, p := range pairs {
			allowed[p] = true
		}
	}
	for _, m := range regexp.MustCompile(`[a-z]+ -> [a-z]+`).FindAllString(desc, -1) {
		if !allowed[m] {
			t.Errorf("EdgeType's description states %s, which no rule allows", m)
		}
	}
}
