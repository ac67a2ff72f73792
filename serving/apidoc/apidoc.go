// Package apidoc is HIR's API description as the server serves it:
// openapi.yaml as built into the binary ([hir.OpenAPI]), converted to JSON,
// rendered as one HTML reference page, and its documented request
// examples ([Examples]), which GET /docs shows as curl calls and the tests
// send to a live server. It is parsed and validated once per process.
package apidoc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"

	hir "github.com/hir-ads/hir"
)

// Example is one request documented in openapi.yaml with the answer
// documented for it: what GET /docs shows as a curl call and what the tests
// send to a live server.
type Example struct {
	// OperationID and Name identify the example ("retrieveCandidates",
	// "knownUser"); Name is "" for an operation's only example.
	OperationID, Name string
	Method            string
	// Path is the path with its path and query parameters filled in from
	// their examples, e.g. "/v1/entities/user/u1/similar?target_type=ad&k=3".
	Path string
	// Body is the JSON request body, nil when the operation has none.
	Body []byte
	// Auth reports whether the operation always needs an API key (when the
	// server has keys).
	Auth bool
	// Status, ContentType and Response are the documented answer: its
	// status, media type and example (JSON, or text as documented).
	Status      int
	ContentType string
	Response    []byte
}

// Curl renders the example as one shell line against base (e.g.
// "http://localhost:8080"), sending key when it needs one.
func (x Example) Curl(base, key string) string {
	var b strings.Builder
	b.WriteString("curl -sS")
	if x.Method != http.MethodGet {
		b.WriteString(" -X " + x.Method)
	}
	b.WriteString(" '" + base + x.Path + "'")
	if x.Auth {
		b.WriteString(" -H 'Authorization: Bearer " + key + "'")
	}
	if x.Body != nil {
		b.WriteString(" -H 'Content-Type: application/json' -d '" + strings.ReplaceAll(string(x.Body), "'", `'\''`) + "'")
	}
	return b.String()
}

// servedSpec is the API description as served, parsed once per process from
// [hir.OpenAPI]. Immutable once built.
type servedSpec struct {
	doc      *openapi3.T
	json     []byte
	html     []byte
	examples []Example
}

var loadSpec = sync.OnceValues(func() (*servedSpec, error) {
	doc, err := openapi3.NewLoader().LoadFromData(hir.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("validate openapi.yaml: %w", err)
	}
	sp := &servedSpec{doc: doc}
	if sp.json, err = json.Marshal(doc); err != nil {
		return nil, fmt.Errorf("encode openapi.json: %w", err)
	}
	if sp.examples, err = specExamples(doc); err != nil {
		return nil, err
	}
	if sp.html, err = renderDocs(doc, sp.examples); err != nil {
		return nil, err
	}
	return sp, nil
})

// Examples returns the requests documented in openapi.yaml, one per
// request example (an operation without a request body contributes one,
// from its parameters' examples), ordered by the spec's tags (ingestion
// first), then path and method. The slice is shared: do not modify it.
func Examples() ([]Example, error) {
	sp, err := loadSpec()
	if err != nil {
		return nil, err
	}
	return sp.examples, nil
}

// Doc returns the parsed description. It is shared: do not modify it.
func Doc() (*openapi3.T, error) {
	sp, err := loadSpec()
	if err != nil {
		return nil, err
	}
	return sp.doc, nil
}

// YAML returns openapi.yaml as built into the binary.
func YAML() []byte { return hir.OpenAPI }

// JSON returns openapi.yaml converted to JSON.
func JSON() ([]byte, error) {
	sp, err := loadSpec()
	if err != nil {
		return nil, err
	}
	return sp.json, nil
}

// HTML returns the API reference page rendered from openapi.yaml: one
// self-contained HTML document, no scripts or external assets.
func HTML() ([]byte, error) {
	sp, err := loadSpec()
	if err != nil {
		return nil, err
	}
	return sp.html, nil
}

// operation is one operation of the spec with its path and method.
type operation struct {
	path, method string
	op           *openapi3.Operation
	tagRank      int
}

// operations lists doc's operations ordered by the rank of their first tag
// in doc.Tags, then path, then method.
func operations(doc *openapi3.T) []operation {
	rank := map[string]int{}
	for i, t := range doc.Tags {
		rank[t.Name] = i
	}
	var ops []operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			r := len(doc.Tags)
			if len(op.Tags) > 0 {
				if i, ok := rank[op.Tags[0]]; ok {
					r = i
				}
			}
			ops = append(ops, operation{path: path, method: method, op: op, tagRank: r})
		}
	}
	slices.SortFunc(ops, func(a, b operation) int {
		if a.tagRank != b.tagRank {
			return a.tagRank - b.tagRank
		}
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return strings.Compare(a.method, b.method)
	})
	return ops
}

// needsKey reports whether op's security requirements all name a scheme
// (no anonymous alternative).
func needsKey(doc *openapi3.T, op *openapi3.Operation) bool {
	reqs := doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	if len(reqs) == 0 {
		return false
	}
	for _, r := range reqs {
		if len(r) == 0 {
			return false
		}
	}
	return true
}

// specExamples builds the documented requests of doc (see SpecExamples).
func specExamples(doc *openapi3.T) ([]Example, error) {
	var out []Example
	for _, o := range operations(doc) {
		path := o.path
		var qkeys []string
		for _, p := range o.op.Parameters {
			pv := p.Value
			if pv == nil || pv.Example == nil {
				if pv != nil && pv.Required {
					return nil, fmt.Errorf("openapi.yaml: %s %s: required parameter %s has no example", o.method, o.path, pv.Name)
				}
				continue
			}
			v := fmt.Sprint(pv.Example)
			switch pv.In {
			case openapi3.ParameterInPath:
				path = strings.ReplaceAll(path, "{"+pv.Name+"}", url.PathEscape(v))
			case openapi3.ParameterInQuery:
				qkeys = append(qkeys, pv.Name+"="+url.QueryEscape(v))
			}
		}
		if len(qkeys) > 0 {
			path += "?" + strings.Join(qkeys, "&")
		}
		status, ctype, resp, err := successExamples(o)
		if err != nil {
			return nil, err
		}
		base := Example{OperationID: o.op.OperationID, Method: o.method, Path: path,
			Auth: needsKey(doc, o.op), Status: status, ContentType: ctype}
		var reqs map[string]any // name -> value
		if rb := o.op.RequestBody; rb != nil && rb.Value != nil {
			mt := rb.Value.Content.Get("application/json")
			if mt == nil {
				return nil, fmt.Errorf("openapi.yaml: %s: request body is not application/json", o.op.OperationID)
			}
			reqs = mediaExamples(mt)
			if len(reqs) == 0 {
				return nil, fmt.Errorf("openapi.yaml: %s: request body has no example", o.op.OperationID)
			}
		}
		if reqs == nil {
			x := base
			if x.Response, err = encodeExample(ctype, firstExample(resp, "")); err != nil {
				return nil, fmt.Errorf("openapi.yaml: %s: %w", o.op.OperationID, err)
			}
			out = append(out, x)
			continue
		}
		for _, name := range sortedKeys(reqs) {
			x := base
			if len(reqs) > 1 || name != "" {
				x.Name = name
			}
			if x.Body, err = json.Marshal(reqs[name]); err != nil {
				return nil, fmt.Errorf("openapi.yaml: %s example %s: %w", o.op.OperationID, name, err)
			}
			if x.Response, err = encodeExample(ctype, firstExample(resp, name)); err != nil {
				return nil, fmt.Errorf("openapi.yaml: %s example %s: %w", o.op.OperationID, name, err)
			}
			out = append(out, x)
		}
	}
	return out, nil
}

// successExamples returns the first 2xx response of o that has an example:
// its status, media type and examples by name ("" for a lone example).
func successExamples(o operation) (int, string, map[string]any, error) {
	codes := slices.Sorted(func(yield func(string) bool) {
		for c := range o.op.Responses.Map() {
			if !yield(c) {
				return
			}
		}
	})
	for _, code := range codes {
		st, err := strconv.Atoi(code)
		if err != nil || st/100 != 2 {
			continue
		}
		rv := o.op.Responses.Value(code).Value
		if rv == nil {
			continue
		}
		for _, ct := range slices.Sorted(func(yield func(string) bool) {
			for c := range rv.Content {
				if !yield(c) {
					return
				}
			}
		}) {
			if ex := mediaExamples(rv.Content[ct]); len(ex) > 0 {
				return st, ct, ex, nil
			}
		}
	}
	return 0, "", nil, fmt.Errorf("openapi.yaml: %s %s: no success response with an example", o.method, o.path)
}

// mediaExamples returns mt's example ("" key) or named examples.
func mediaExamples(mt *openapi3.MediaType) map[string]any {
	out := map[string]any{}
	if mt.Example != nil {
		out[""] = mt.Example
	}
	for name, ex := range mt.Examples {
		if ex != nil && ex.Value != nil && ex.Value.Value != nil {
			out[name] = ex.Value.Value
		}
	}
	return out
}

// firstExample returns examples[name] when there is one, else the first by
// name.
func firstExample(examples map[string]any, name string) any {
	if v, ok := examples[name]; ok {
		return v
	}
	return examples[sortedKeys(examples)[0]]
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// encodeExample renders a response example: JSON for JSON and YAML media
// types (JSON is YAML), the text itself otherwise.
func encodeExample(contentType string, v any) ([]byte, error) {
	if strings.Contains(contentType, "json") || strings.Contains(contentType, "yaml") {
		return json.Marshal(v)
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("example of %s is not a string", contentType)
	}
	return []byte(s), nil
}

// The docs page's view of the spec.
type (
	docsPage struct {
		Title, Version string
		Intro          []string // paragraphs
		Base           string
		Tags           []docsTag
		Schemas        []docsSchema
	}
	docsTag struct {
		Name, Description string
		Ops               []docsOp
	}
	docsOp struct {
		Anchor, Method, Path, Summary, Description string
		Auth                                       string
		Params                                     []docsField
		RequestSchema                              string
		Examples                                   []docsExample
		Responses                                  []docsResponse
	}
	docsExample struct {
		Name, Curl, Request, Response string
		Status                        int
	}
	docsResponse struct {
		Code, Description, Media, Schema string
		Headers                          []string
	}
	docsField struct {
		Name, Where, Type, Description string
		Required                       bool
	}
	docsSchema struct {
		Name, Description string
		Fields            []docsField
	}
)

// renderDocs renders the API reference page of doc.
func renderDocs(doc *openapi3.T, examples []Example) ([]byte, error) {
	page := docsPage{Title: doc.Info.Title, Version: doc.Info.Version, Base: "http://localhost:8080"}
	if len(doc.Servers) > 0 {
		page.Base = strings.TrimSuffix(doc.Servers[0].URL, "/")
	}
	for p := range strings.SplitSeq(strings.TrimSpace(doc.Info.Description), "\n\n") {
		page.Intro = append(page.Intro, strings.Join(strings.Fields(p), " "))
	}
	byTag := map[string]*docsTag{}
	for _, t := range doc.Tags {
		page.Tags = append(page.Tags, docsTag{Name: t.Name, Description: t.Description})
	}
	for i := range page.Tags {
		byTag[page.Tags[i].Name] = &page.Tags[i]
	}
	for _, o := range operations(doc) {
		tag := "other"
		if len(o.op.Tags) > 0 {
			tag = o.op.Tags[0]
		}
		t := byTag[tag]
		if t == nil {
			page.Tags = append(page.Tags, docsTag{Name: tag})
			t = &page.Tags[len(page.Tags)-1]
			byTag = map[string]*docsTag{} // the append may have moved the tags
			for i := range page.Tags {
				byTag[page.Tags[i].Name] = &page.Tags[i]
			}
		}
		d := docsOp{Anchor: o.op.OperationID, Method: o.method, Path: o.path, Summary: o.op.Summary,
			Description: o.op.Description, Auth: "API key optional (needed in read-auth mode)"}
		switch {
		case needsKey(doc, o.op):
			d.Auth = "needs an API key (Authorization: Bearer KEY) when the server has keys"
		case o.op.Security != nil && len(*o.op.Security) == 0:
			d.Auth = "open: never needs a key"
		}
		for _, p := range o.op.Parameters {
			if pv := p.Value; pv != nil {
				d.Params = append(d.Params, docsField{Name: pv.Name, Where: pv.In, Type: schemaType(pv.Schema),
					Description: pv.Description, Required: pv.Required})
			}
		}
		if rb := o.op.RequestBody; rb != nil && rb.Value != nil {
			if mt := rb.Value.Content.Get("application/json"); mt != nil {
				d.RequestSchema = schemaType(mt.Schema)
			}
		}
		for _, x := range examples {
			if x.OperationID != o.op.OperationID {
				continue
			}
			ex := docsExample{Name: x.Name, Curl: x.Curl(page.Base, "KEY"), Status: x.Status,
				Request: indentJSON(x.Body), Response: string(x.Response)}
			if strings.Contains(x.ContentType, "json") {
				ex.Response = indentJSON(x.Response)
			}
			d.Examples = append(d.Examples, ex)
		}
		for _, code := range slices.Sorted(func(yield func(string) bool) {
			for c := range o.op.Responses.Map() {
				if !yield(c) {
					return
				}
			}
		}) {
			rr := o.op.Responses.Value(code)
			rv := rr.Value
			if rv == nil {
				continue
			}
			resp := docsResponse{Code: code}
			if rv.Description != nil {
				resp.Description = *rv.Description
			}
			for ct, mt := range rv.Content {
				resp.Media, resp.Schema = ct, schemaType(mt.Schema)
			}
			for name := range rv.Headers {
				resp.Headers = append(resp.Headers, name)
			}
			slices.Sort(resp.Headers)
			d.Responses = append(d.Responses, resp)
		}
		t.Ops = append(t.Ops, d)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range doc.Components.Schemas {
			if !yield(n) {
				return
			}
		}
	}) {
		sv := doc.Components.Schemas[name].Value
		ds := docsSchema{Name: name, Description: sv.Description}
		if len(sv.Enum) > 0 {
			ds.Description = strings.TrimSpace(ds.Description + " One of: " + joinAny(sv.Enum) + ".")
		}
		for _, pn := range slices.Sorted(func(yield func(string) bool) {
			for n := range sv.Properties {
				if !yield(n) {
					return
				}
			}
		}) {
			pr := sv.Properties[pn]
			f := docsField{Name: pn, Type: schemaType(pr), Required: slices.Contains(sv.Required, pn)}
			if pr.Value != nil {
				f.Description = pr.Value.Description
			}
			ds.Fields = append(ds.Fields, f)
		}
		page.Schemas = append(page.Schemas, ds)
	}
	var buf bytes.Buffer
	if err := docsTemplate.Execute(&buf, page); err != nil {
		return nil, fmt.Errorf("render docs: %w", err)
	}
	return buf.Bytes(), nil
}

// schemaType names a schema: its component name, or its type with format,
// items and bounds.
func schemaType(ref *openapi3.SchemaRef) string {
	if ref == nil {
		return ""
	}
	if ref.Ref != "" {
		return ref.Ref[strings.LastIndex(ref.Ref, "/")+1:]
	}
	v := ref.Value
	if v == nil {
		return ""
	}
	var s string
	switch {
	case v.Type != nil && v.Type.Is("array"):
		s = "array of " + schemaType(v.Items)
	case v.Type != nil && len(v.Type.Slice()) > 0:
		s = strings.Join(v.Type.Slice(), "|")
	case len(v.OneOf) > 0:
		var alts []string
		for _, a := range v.OneOf {
			alts = append(alts, schemaType(a))
		}
		s = strings.Join(alts, " or ")
	}
	if v.Format != "" {
		s += " (" + v.Format + ")"
	}
	if len(v.Enum) > 0 {
		s += ": " + joinAny(v.Enum)
	}
	if v.AdditionalProperties.Schema != nil {
		s += " of " + schemaType(v.AdditionalProperties.Schema)
	}
	return s
}

func joinAny(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}

func indentJSON(b []byte) string {
	if b == nil {
		return ""
	}
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

var docsTemplate = template.Must(template.New("docs").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} — API reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}
nav{position:fixed;top:0;bottom:0;left:0;width:15rem;overflow:auto;padding:1rem;background:#eef1f5;border-right:1px solid #d8dde5}
nav a{display:block;color:#1d2330;text-decoration:none;font-size:13px;padding:1px 0}
nav h3{margin:1rem 0 .2rem;font-size:12px;text-transform:uppercase;color:#5a6475}
main{margin-left:17rem;max-width:60rem;padding:1rem 2rem}
section.op{border:1px solid #d8dde5;border-radius:6px;background:#fff;padding:.5rem 1rem;margin:1rem 0}
.m{display:inline-block;min-width:3.5rem;text-align:center;border-radius:4px;color:#fff;font-weight:600;font-size:12px;padding:1px 6px;margin-right:.5rem}
.GET{background:#2f7d4f}.POST{background:#2b5fab}.PUT{background:#9a6a12}.DELETE{background:#a83232}
code,pre{font:13px/1.4 ui-monospace,monospace}
pre{background:#f3f5f8;border:1px solid #e1e5eb;border-radius:4px;padding:.5rem;overflow:auto;white-space:pre-wrap}
table{border-collapse:collapse;width:100%;font-size:14px}td,th{border-bottom:1px solid #e6e9ee;padding:3px 6px;text-align:left;vertical-align:top}
.auth{color:#5a6475;font-size:13px}
</style>
</head>
<body>
<nav>
<strong>{{.Title}}</strong><br><small>version {{.Version}}</small>
<a href="/openapi.yaml">openapi.yaml</a><a href="/openapi.json">openapi.json</a>
{{range .Tags}}<h3>{{.Name}}</h3>{{range .Ops}}<a href="#{{.Anchor}}"><b>{{.Method}}</b> {{.Path}}</a>{{end}}{{end}}
<h3>schemas</h3>{{range .Schemas}}<a href="#schema-{{.Name}}">{{.Name}}</a>{{end}}
</nav>
<main>
<h1>{{.Title}}</h1>
{{range .Intro}}<p>{{.}}</p>
{{end}}
{{range .Tags}}<h2 id="tag-{{.Name}}">{{.Name}}</h2>
{{if .Description}}<p>{{.Description}}</p>{{end}}
{{range .Ops}}<section class="op" id="{{.Anchor}}">
<h3><span class="m {{.Method}}">{{.Method}}</span><code>{{.Path}}</code></h3>
<p><b>{{.Summary}}</b>{{if .Description}} {{.Description}}{{end}}</p>
<p class="auth">Auth: {{.Auth}}</p>
{{if .Params}}<table><tr><th>parameter</th><th>in</th><th>type</th><th>description</th></tr>
{{range .Params}}<tr><td><code>{{.Name}}</code>{{if .Required}} *{{end}}</td><td>{{.Where}}</td><td>{{.Type}}</td><td>{{.Description}}</td></tr>
{{end}}</table>{{end}}
{{if .RequestSchema}}<p>Request body: <a href="#schema-{{.RequestSchema}}">{{.RequestSchema}}</a></p>{{end}}
{{range .Examples}}<p>Example{{if .Name}} <i>{{.Name}}</i>{{end}}:</p>
<pre>{{.Curl}}</pre>
{{if .Request}}<details><summary>request body</summary><pre>{{.Request}}</pre></details>{{end}}
<details open><summary>answer {{.Status}}</summary><pre>{{.Response}}</pre></details>
{{end}}
<table><tr><th>status</th><th>description</th><th>body</th><th>headers</th></tr>
{{range .Responses}}<tr><td>{{.Code}}</td><td>{{.Description}}</td><td>{{if .Schema}}<a href="#schema-{{.Schema}}">{{.Schema}}</a> <small>{{.Media}}</small>{{end}}</td><td>{{range .Headers}}<code>{{.}}</code> {{end}}</td></tr>
{{end}}</table>
</section>
{{end}}{{end}}
<h2>Schemas</h2>
{{range .Schemas}}<section class="op" id="schema-{{.Name}}"><h3>{{.Name}}</h3>
{{if .Description}}<p>{{.Description}}</p>{{end}}
{{if .Fields}}<table><tr><th>field</th><th>type</th><th>description</th></tr>
{{range .Fields}}<tr><td><code>{{.Name}}</code>{{if .Required}} *{{end}}</td><td>{{.Type}}</td><td>{{.Description}}</td></tr>
{{end}}</table>{{end}}
</section>
{{end}}
<p><small>* required. Rendered from openapi.yaml by the server; the same document is at <a href="/openapi.yaml">/openapi.yaml</a>.</small></p>
</main>
</body>
</html>
`))
