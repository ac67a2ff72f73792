package problem

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hir-ads/hir/api"
)

func TestNewRequestID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		keep bool
	}{
		{"abc-123", true},
		{"", false},
		{"has space", false},
		{string(make([]byte, 65)), false},
		{"é", false},
	} {
		got := NewRequestID(tc.in)
		if (got == tc.in) != tc.keep || got == "" {
			t.Errorf("NewRequestID(%q) = %q, want kept: %v", tc.in, got, tc.keep)
		}
	}
}

// wrapper hides the writer it wraps except through Unwrap.
type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestMarkStatus(t *testing.T) {
	rec := NewRecorder(httptest.NewRecorder())
	MarkStatus(wrapper{wrapper{rec}}, 499)
	if rec.Status() != 499 {
		t.Fatalf("marked through two wrappers: status %d, want 499", rec.Status())
	}
	written := NewRecorder(httptest.NewRecorder())
	written.WriteHeader(http.StatusTeapot)
	MarkStatus(written, 499)
	if written.Status() != http.StatusTeapot {
		t.Fatalf("a mark after a written status: %d, want the written 418", written.Status())
	}
	MarkStatus(httptest.NewRecorder(), 499) // no Marker: nothing to do, no panic
}

func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/v1/x", nil)
	r = r.WithContext(WithRequestID(r.Context(), "req-1"))
	item := 3
	Write(w, r, "/v1/x", Problem{Status: 400, Slug: "bad-request", Title: "Bad request", Detail: "events[3]: no", Item: &item})
	var p api.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if w.Code != 400 || w.Header().Get("Content-Type") != "application/problem+json" || p.Status != 400 ||
		*p.Type != TypeBase+"bad-request" || *p.Instance != "/v1/x#req=req-1" || *p.Detail != "events[3]: no" || *p.Item != 3 {
		t.Fatalf("answer %d %v: %s", w.Code, w.Header(), w.Body)
	}
}
