package serving

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/serving/middleware"
)

// readJSONBody checks that r carries an application/json body and returns
// it whole (readBody has read it, within its cap and time).
func readJSONBody(r *http.Request) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil, fmt.Errorf("%w (no Content-Type given)", ErrUnsupportedMediaType)
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return nil, fmt.Errorf("%w (got %q)", ErrUnsupportedMediaType, ct)
	}
	body, ok := middleware.Body(r)
	if !ok { // a handler used without the middleware (the ceiling's)
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequestf("request body is empty")
	}
	if !utf8.Valid(body) {
		return nil, badRequestf("request body is not valid UTF-8")
	}
	return body, nil
}

// decodeStrict decodes body into v, refusing duplicate keys in any object,
// unknown fields and trailing data.
func decodeStrict(body []byte, v any) error {
	if err := checkDuplicateKeys(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return badRequestf("unknown field %s", clip(msg))
		}
		if err == io.EOF {
			return badRequestf("request body is empty")
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return badRequestf("malformed JSON: unexpected end of input")
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequestf("malformed JSON: trailing data after the request object")
	}
	return nil
}

// Fields allowed in the objects of ingest requests.
var (
	entityFields = []string{"type", "id", "text", "attrs", "vector"}
	eventFields  = []string{"id", "src", "dst", "type", "ts", "weight"}
	refFields    = []string{"type", "id"}
)

// objectFields parses raw as a JSON object and checks that its keys are
// among allowed.
func objectFields(raw json.RawMessage, allowed []string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		kind := "a value"
		if len(raw) > 0 {
			kind = jsonKindOf(raw[0])
		}
		return nil, badRequestf("want an object, got %s", kind)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, badRequestf("unknown field %q (allowed: %s)", clip(unknown[0]), strings.Join(allowed, ", "))
	}
	return m, nil
}

func jsonKindOf(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// decodeEntity decodes one entity strictly into a validated graph.Entity.
func decodeEntity(raw json.RawMessage) (graph.Entity, error) {
	if _, err := objectFields(raw, entityFields); err != nil {
		return graph.Entity{}, err
	}
	var e graph.Entity
	if err := json.Unmarshal(raw, &e); err != nil {
		return graph.Entity{}, err
	}
	if err := checkEntityLimits(&e); err != nil {
		return graph.Entity{}, err
	}
	return e, nil
}

// decodeEvent decodes one event strictly into a validated graph.Event. When
// defaultSrc is non-nil a missing src takes its value (context events of
// retrieve requests). Errors name the offending field.
func decodeEvent(raw json.RawMessage, defaultSrc *graph.Ref) (graph.Event, error) {
	m, err := objectFields(raw, eventFields)
	if err != nil {
		return graph.Event{}, err
	}
	if _, ok := m["src"]; !ok && defaultSrc != nil {
		b, err := json.Marshal(defaultSrc)
		if err != nil {
			return graph.Event{}, fmt.Errorf("encode default src: %w", err)
		}
		m["src"] = b
		if raw, err = json.Marshal(m); err != nil {
			return graph.Event{}, fmt.Errorf("re-encode event: %w", err)
		}
	}
	for _, f := range []string{"src", "dst"} {
		v, ok := m[f]
		if !ok {
			return graph.Event{}, badRequestf("%s: missing", f)
		}
		if _, err := objectFields(v, refFields); err != nil {
			return graph.Event{}, fmt.Errorf("%s: %w", f, err)
		}
		var ref graph.Ref
		if err := json.Unmarshal(v, &ref); err != nil {
			return graph.Event{}, fmt.Errorf("%s: %w", f, err)
		}
	}
	if v, ok := m["type"]; !ok {
		return graph.Event{}, badRequestf("type: missing")
	} else {
		var t graph.EdgeType
		if err := json.Unmarshal(v, &t); err != nil {
			return graph.Event{}, fmt.Errorf("type: %w", err)
		}
	}
	if v, ok := m["ts"]; !ok {
		return graph.Event{}, badRequestf("ts: missing")
	} else if _, err := graph.ParseTimestamp(v); err != nil {
		return graph.Event{}, fmt.Errorf("ts: %w", err)
	}
	var ev graph.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return graph.Event{}, err
	}
	if _, ok := m["id"]; ok && ev.ID == "" {
		return graph.Event{}, badRequestf("id: empty; omit id for an event without idempotency (stored each time it is posted)")
	}
	if err := ev.Normalize(); err != nil {
		return graph.Event{}, err
	}
	if err := ev.CheckEndpoints(); err != nil {
		return graph.Event{}, err
	}
	return ev, nil
}

// decodeEntities decodes an EntitiesRequest body; errors name the item.
func decodeEntities(body []byte, maxItems int) ([]graph.Entity, error) {
	var req struct {
		Entities []json.RawMessage `json:"entities"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := checkItems("entities", req.Entities, maxItems); err != nil {
		return nil, err
	}
	out := make([]graph.Entity, len(req.Entities))
	for i, raw := range req.Entities {
		e, err := decodeEntity(raw)
		if err != nil {
			return nil, &ItemError{Field: "entities", Index: i, Err: err}
		}
		out[i] = e
	}
	return out, nil
}

// decodeEvents decodes an EventsRequest body; errors name the item.
func decodeEvents(body []byte, maxItems int) ([]graph.Event, error) {
	var req struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := checkItems("events", req.Events, maxItems); err != nil {
		return nil, err
	}
	out := make([]graph.Event, len(req.Events))
	for i, raw := range req.Events {
		ev, err := decodeEvent(raw, nil)
		if err != nil {
			return nil, &ItemError{Field: "events", Index: i, Err: err}
		}
		out[i] = ev
	}
	return out, nil
}

func checkItems(field string, items []json.RawMessage, maxItems int) error {
	switch {
	case items == nil:
		return badRequestf("%s: required, a non-empty array", field)
	case len(items) == 0:
		return badRequestf("%s: must hold at least one item", field)
	case len(items) > maxItems:
		return &statusError{sentinel: ErrBodyTooLarge,
			msg: fmt.Sprintf("%s: %d items exceed the limit of %d per request", field, len(items), maxItems)}
	}
	return nil
}

// Limits of request content beyond the body size, checked by the decoders.
const (
	// MaxQueryBytes and MaxQueryTerms bound the keyword query of a retrieve
	// request: keyword search costs grow with both.
	MaxQueryBytes = 1024
	MaxQueryTerms = 32
	// MaxIDBytes bounds an entity or event id.
	MaxIDBytes = 256
	// MaxTextBytes bounds an entity's text.
	MaxTextBytes = 64 << 10
	// MaxAttrs bounds the attributes of an entity; MaxAttrBytes the size of
	// one attribute key or value.
	MaxAttrs     = 64
	MaxAttrBytes = 1024
	// MaxVectorLen bounds the length of an entity's vector.
	MaxVectorLen = 4096
	// DefaultMaxClockSkew is how far ahead of the server clock an event's
	// ts may be by default (Options.MaxClockSkew).
	DefaultMaxClockSkew = time.Hour
	// maxEcho bounds how much of any input a problem detail or a log line
	// repeats.
	maxEcho = 64
)

// clip returns s, or its first maxEcho bytes (cut on a rune boundary) with
// a note of the full length: what problem details and logs may repeat of
// client input.
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", cutAtRune(s, maxEcho), len(s))
}

// cutAtRune returns the longest prefix of s of at most n bytes that does
// not split a rune.
func cutAtRune(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// checkQuery bounds the keyword query of a retrieve request.
func checkQuery(q string) error {
	switch {
	case len(q) > MaxQueryBytes:
		return badRequestf("query: %d bytes exceed the limit of %d", len(q), MaxQueryBytes)
	case !utf8.ValidString(q):
		return badRequestf("query: not valid UTF-8")
	}
	if n := len(strings.Fields(q)); n > MaxQueryTerms {
		return badRequestf("query: %d terms exceed the limit of %d", n, MaxQueryTerms)
	}
	return nil
}

// normID replaces *id with its NFC form, or refuses it (graph.NormalizeID:
// control and format characters, invalid UTF-8 or U+FFFD, which the JSON
// decoder substitutes for invalid UTF-8 and lone surrogate escapes, so that
// two distinct invalid ids would otherwise collide; too long).
func normID(field string, id *string) error {
	n, err := graph.NormalizeID(*id)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	*id = n
	return nil
}

// checkEntityLimits bounds the content of a decoded entity.
func checkEntityLimits(e *graph.Entity) error {
	if err := normID("id", &e.ID); err != nil {
		return err
	}
	switch {
	case len(e.Text) > MaxTextBytes:
		return badRequestf("text: %d bytes exceed the limit of %d", len(e.Text), MaxTextBytes)
	case len(e.Attrs) > MaxAttrs:
		return badRequestf("attrs: %d attributes exceed the limit of %d", len(e.Attrs), MaxAttrs)
	case len(e.Vector) > MaxVectorLen:
		return badRequestf("vector: %d values exceed the limit of %d", len(e.Vector), MaxVectorLen)
	}
	for k, v := range e.Attrs {
		if len(k) > MaxAttrBytes || len(v) > MaxAttrBytes {
			return badRequestf("attrs: key %q: key or value longer than %d bytes", clip(k), MaxAttrBytes)
		}
	}
	return nil
}

// checkEventTimes refuses events dated after maxTS (unix ms), naming the
// first as field[i].ts.
func checkEventTimes(field string, evs []graph.Event, maxTS int64, skew time.Duration) error {
	for i := range evs {
		if evs[i].TS > maxTS {
			return &ItemError{Field: field, Index: i, Member: "ts", Err: badRequestf(
				"%s is more than %v ahead of the server clock (latest accepted now: %s)",
				time.UnixMilli(evs[i].TS).UTC().Format(time.RFC3339), skew, time.UnixMilli(maxTS).UTC().Format(time.RFC3339))}
		}
	}
	return nil
}

// maxEventTS returns the latest event time (unix ms) the server accepts
// now; math.MaxInt64 when the check is off.
func (s *Server) maxEventTS() int64 {
	if s.opts.MaxClockSkew < 0 {
		return math.MaxInt64
	}
	return time.Now().Add(s.opts.MaxClockSkew).UnixMilli()
}

// checkRetrieve applies the server's checks to a decoded retrieve request
// (the context events' times); it passes a decoding error through.
func (s *Server) checkRetrieve(p *retrieveParams, err error) (*retrieveParams, error) {
	if err != nil {
		return nil, err
	}
	if err := checkEventTimes("context_events", p.req.ContextEvents, s.maxEventTS(), s.opts.MaxClockSkew); err != nil {
		return nil, err
	}
	return p, nil
}

// checkDuplicateKeys refuses a JSON document in which an object repeats a
// key (encoding/json would silently keep the last value).
func checkDuplicateKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		keys     map[string]struct{}
		isObject bool
		wantKey  bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // syntax errors are reported by the decoder proper
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				if top >= 0 && stack[top].isObject {
					stack[top].wantKey = true
				}
				stack = append(stack, frame{isObject: true, wantKey: true})
			case '[':
				if top >= 0 && stack[top].isObject {
					stack[top].wantKey = true
				}
				stack = append(stack, frame{})
			case '}', ']':
				stack = stack[:top]
			}
			continue
		}
		if top < 0 || !stack[top].isObject {
			continue
		}
		if !stack[top].wantKey {
			stack[top].wantKey = true
			continue
		}
		key, _ := tok.(string)
		if stack[top].keys == nil {
			stack[top].keys = map[string]struct{}{}
		}
		if _, dup := stack[top].keys[key]; dup {
			return badRequestf("duplicate key %q in a JSON object", clip(key))
		}
		stack[top].keys[key] = struct{}{}
		stack[top].wantKey = false
	}
}
