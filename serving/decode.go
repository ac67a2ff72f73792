package serving

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/hir-ads/hir/graph"
)

// readJSONBody checks that r carries an application/json body and reads it
// whole (bodyLimit has capped its size).
func readJSONBody(r *http.Request) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil, fmt.Errorf("%w (no Content-Type given)", ErrUnsupportedMediaType)
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return nil, fmt.Errorf("%w (got %q)", ErrUnsupportedMediaType, ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequestf("request body is empty")
	}
	return body, nil
}

// decodeStrict decodes body into v, refusing unknown fields and trailing
// data.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return badRequestf("unknown field %s", msg)
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
		return nil, badRequestf("unknown field %q (allowed: %s)", unknown[0], strings.Join(allowed, ", "))
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
