package serving

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hir-ads/hir/api"
)

func TestCeilingHandler(t *testing.T) {
	h := NewCeilingHandler()
	for _, tc := range []struct {
		name, body string
		code, n    int
	}{
		{"known", `{"user":{"type":"user","id":"u1"},"k":100}`, 200, 100},
		{"default k", `{"user":{"type":"user","id":"u1"}}`, 200, DefaultRetrieveK},
		{"fresh", freshBenchBody, 200, 20},
		{"bad k", `{"user":{"type":"user","id":"u1"},"k":0}`, 400, 0},
		{"unknown field", `{"user":{"type":"user","id":"u1"},"kk":1}`, 400, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/retrieve", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
			if tc.code != 200 {
				return
			}
			var res api.RetrieveResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Candidates) != tc.n {
				t.Errorf("candidates = %d, want %d", len(res.Candidates), tc.n)
			}
		})
	}
}
