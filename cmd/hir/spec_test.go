package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"go.yaml.in/yaml/v3"

	hir "github.com/hir-ads/hir"
	"github.com/hir-ads/hir/serving/apidoc"
)

func init() {
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
}

// checkSpecExamples sends every request documented in openapi.yaml to the
// live server at base (over real HTTP, with key where the operation needs
// one) and checks each answer: the documented status, valid against the
// spec, and with every member the documented answer shows (values may
// differ: scores and tokens depend on the model). Text answers must contain
// the documented example's first line. The server must serve the synthetic
// world of `hir synth` (the examples name its ids) with a trainer attached.
func checkSpecExamples(t *testing.T, base, key string) {
	t.Helper()
	xs, err := apidoc.Examples()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(hir.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xs {
		name := x.OperationID
		if x.Name != "" {
			name += "/" + x.Name
		}
		t.Run(name, func(t *testing.T) {
			var status int
			var h http.Header
			var body []byte
			var req *http.Request
			// POST /v1/model/train answers 409 while an earlier run trains.
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				req, status, h, body = sendExample(t, base, key, x)
				if status != http.StatusConflict || x.OperationID != "trainModel" || time.Now().After(deadline) {
					break
				}
			}
			if status != x.Status {
				t.Fatalf("%s %s = %d %s, want %d", x.Method, x.Path, status, body, x.Status)
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("find route of %s %s: %v", x.Method, x.Path, err)
			}
			in := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
					Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
				Status: status, Header: h, Options: &openapi3filter.Options{IncludeResponseStatus: true},
			}
			in.SetBodyBytes(body)
			if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
				t.Errorf("%s %s: answer does not match openapi.yaml: %v\nbody: %.500s", x.Method, x.Path, err, body)
			}
			if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, x.ContentType) {
				t.Errorf("%s %s: Content-Type %q, want %q", x.Method, x.Path, ct, x.ContentType)
			}
			var want, got any
			switch {
			case strings.Contains(x.ContentType, "json"):
				err = json.Unmarshal(x.Response, &want)
				if err == nil {
					err = json.Unmarshal(body, &got)
				}
			case strings.Contains(x.ContentType, "yaml"):
				err = yaml.Unmarshal(x.Response, &want)
				if err == nil {
					err = yaml.Unmarshal(body, &got)
				}
			default:
				first, _, _ := strings.Cut(string(x.Response), "\n")
				if !strings.Contains(string(body), first) {
					t.Errorf("%s %s: answer does not contain the documented %q", x.Method, x.Path, first)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode documented or live answer: %v\nlive: %.500s", err, body)
			}
			if msg := shapeCovers(got, want, "$"); msg != "" {
				t.Errorf("%s %s: live answer lacks what the documented one shows: %s\nlive: %.800s\ndocumented: %s",
					x.Method, x.Path, msg, body, x.Response)
			}
		})
	}
}

func sendExample(t *testing.T, base, key string, x apidoc.Example) (*http.Request, int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if x.Body != nil {
		rd = bytes.NewReader(x.Body)
	}
	req, err := http.NewRequest(x.Method, base+x.Path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if x.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if x.Auth {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", x.Method, x.Path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return req, res.StatusCode, res.Header, body
}

// shapeCovers reports ("" when none) where got lacks the shape of want:
// every object member of want present in got with a value of the same JSON
// kind, and for a non-empty array some element of got covering want's first
// element.
func shapeCovers(got, want any, at string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %T, want an object", at, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s: no member %q", at, k)
			}
			if msg := shapeCovers(gv, wv, at+"."+k); msg != "" {
				return msg
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("%s: got %T, want an array", at, got)
		}
		if len(w) == 0 {
			return ""
		}
		msg := fmt.Sprintf("%s: empty array, want elements like %v", at, w[0])
		for i, gv := range g {
			if msg = shapeCovers(gv, w[0], fmt.Sprintf("%s[%d]", at, i)); msg == "" {
				break
			}
		}
		return msg
	default:
		if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
			return fmt.Sprintf("%s: got %T, want %T", at, got, want)
		}
	}
	return ""
}

// printedKey returns the API key the demo printed in out.
func printedKey(out string) string {
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, "API key "); ok {
			if _, key, ok := strings.Cut(rest, "): "); ok {
				return strings.TrimSpace(key)
			}
		}
	}
	return ""
}

func TestShapeCovers(t *testing.T) {
	obj := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name, got, want string
		ok              bool
	}{
		{"same shape, other values", `{"a":1,"b":[{"x":"p"}]}`, `{"a":2,"b":[{"x":"q"}]}`, true},
		{"extra members", `{"a":1,"c":true}`, `{"a":2}`, true},
		{"missing member", `{"a":1}`, `{"a":1,"b":2}`, false},
		{"other kind", `{"a":"1"}`, `{"a":1}`, false},
		{"empty live array", `{"b":[]}`, `{"b":[{"x":1}]}`, false},
		{"some element covers", `{"b":[{"y":1},{"x":1,"y":2}]}`, `{"b":[{"x":3}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := shapeCovers(obj(tc.got), obj(tc.want), "$"); (msg == "") != tc.ok {
				t.Errorf("shapeCovers(%s, %s) = %q, want ok=%v", tc.got, tc.want, msg, tc.ok)
			}
		})
	}
}
