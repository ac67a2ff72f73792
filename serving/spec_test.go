package serving

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/hir-ads/hir/graph"

	hir "github.com/hir-ads/hir"
)

func init() {
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
}

// TestSpecServed: the API description is served without a key even in
// read-auth mode, as built (YAML), as JSON, and as an HTML page naming every
// operation.
func TestSpecServed(t *testing.T) {
	env := newEnv(t, Options{ReadAuth: true})
	for _, tc := range []struct {
		name, path, contentType string
		check                   func(t *testing.T, body []byte)
	}{
		{"yaml", "/openapi.yaml", "application/yaml", func(t *testing.T, body []byte) {
			if !bytes.Equal(body, hir.OpenAPI) {
				t.Errorf("GET /openapi.yaml differs from openapi.yaml (%d bytes, want %d)", len(body), len(hir.OpenAPI))
			}
		}},
		{"json", "/openapi.json", "application/json", func(t *testing.T, body []byte) {
			var doc struct {
				OpenAPI string                    `json:"openapi"`
				Paths   map[string]map[string]any `json:"paths"`
			}
			if err := json.Unmarshal(body, &doc); err != nil || doc.OpenAPI != "3.0.3" || doc.Paths["/v1/retrieve"]["post"] == nil {
				t.Errorf("GET /openapi.json = %.200s (%v), want the OpenAPI 3.0.3 document", body, err)
			}
		}},
		{"docs", "/docs", "text/html; charset=utf-8", func(t *testing.T, body []byte) {
			sp, err := loadSpec()
			if err != nil {
				t.Fatal(err)
			}
			for path, item := range sp.doc.Paths.Map() {
				for _, op := range item.Operations() {
					if !bytes.Contains(body, []byte(`id="`+op.OperationID+`"`)) {
						t.Errorf("/docs has no section for %s (%s)", op.OperationID, path)
					}
				}
			}
			for _, want := range []string{"Retry-After", "read-auth", "curl -sS -X POST &#39;http://localhost:8080/v1/retrieve&#39;"} {
				if !bytes.Contains(body, []byte(want)) {
					t.Errorf("/docs does not mention %q", want)
				}
			}
			if bytes.Contains(body, []byte("<script")) || bytes.Contains(body, []byte("https://cdn")) {
				t.Error("/docs loads scripts or external assets")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := env.raw(http.MethodGet, tc.path, "", "", nil)
			if status != http.StatusOK || h.Get("Content-Type") != tc.contentType {
				t.Fatalf("GET %s without a key in read-auth mode = %d %q, want 200 %q", tc.path, status, h.Get("Content-Type"), tc.contentType)
			}
			tc.check(t, body)
			if status, _, _ := env.raw(http.MethodGet, tc.path, "", "wrong-key-123456", nil); status != http.StatusUnauthorized {
				t.Errorf("GET %s with a wrong key = %d, want 401", tc.path, status)
			}
		})
	}
}

// TestSpecExamples: every operation documents at least one request and one
// answer (the live check is cmd/hir's TestDemo/spec examples).
func TestSpecExamples(t *testing.T) {
	xs, err := SpecExamples()
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

// TestRetryAfter: 429 and 503 answers carry Retry-After, as documented.
func TestRetryAfter(t *testing.T) {
	env := newEnv(t, Options{RatePerSecond: 0.001, RateBurst: 1})
	body := `{"user":{"type":"user","id":"u1"}}`
	status, h, _ := env.raw(http.MethodPost, "/v1/retrieve", "application/json", "", strings.NewReader(body))
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") != "5" {
		t.Errorf("retrieve without a model = %d, Retry-After %q; want 503, 5", status, h.Get("Retry-After"))
	}
	status, h, _ = env.raw(http.MethodPost, "/v1/retrieve", "application/json", "", strings.NewReader(body))
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "1" {
		t.Errorf("retrieve over the rate limit = %d, Retry-After %q; want 429, 1", status, h.Get("Retry-After"))
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
