package serving

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"

	hir "github.com/hir-ads/hir"
	"github.com/hir-ads/hir/serving/apidoc"
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
			doc, err := apidoc.Doc()
			if err != nil {
				t.Fatal(err)
			}
			for path, item := range doc.Paths.Map() {
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
