package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// NodeType is the type of an entity. The zero value is invalid.
type NodeType uint8

// Node types, in the order of DESIGN §3.
const (
	NodeInvalid NodeType = iota
	NodeUser
	NodeAd
	NodeCampaign
	NodeAdvertiser
	NodeProduct
	NodeCategory
	NodeBrand
	NodePixel
	numNodeTypes
)

// NumNodeTypes is the number of valid node types plus one (index 0 is invalid).
// Tables indexed by NodeType have this length.
const NumNodeTypes = int(numNodeTypes)

var nodeTypeNames = [...]string{"", "user", "ad", "campaign", "advertiser", "product", "category", "brand", "pixel"}

// String returns the interchange name of t ("user", "ad", ...).
func (t NodeType) String() string {
	if int(t) < len(nodeTypeNames) && t != NodeInvalid {
		return nodeTypeNames[t]
	}
	return "invalid(" + strconv.Itoa(int(t)) + ")"
}

// Valid reports whether t is a known node type.
func (t NodeType) Valid() bool { return t > NodeInvalid && t < numNodeTypes }

// ParseNodeType parses an interchange node type name.
func ParseNodeType(s string) (NodeType, error) {
	for i := 1; i < len(nodeTypeNames); i++ {
		if nodeTypeNames[i] == s {
			return NodeType(i), nil
		}
	}
	return NodeInvalid, fmt.Errorf("%w: %q", ErrUnknownNodeType, s)
}

// MarshalText implements encoding.TextMarshaler.
func (t NodeType) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownNodeType, t)
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *NodeType) UnmarshalText(b []byte) error {
	v, err := ParseNodeType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// EdgeType is the type of an event (an edge of the graph). The zero value is
// EdgeNone, used for the anchor token of a sampled subgraph.
type EdgeType uint8

// Edge types: engagement first, then structure (DESIGN §3).
const (
	EdgeNone EdgeType = iota
	EdgeImpression
	EdgeClick
	EdgeAddToCart
	EdgePurchase
	EdgeConversion
	EdgeInterested
	EdgeNotInterested
	EdgeInCampaign   // ad -> campaign
	EdgeOfAdvertiser // campaign -> advertiser, pixel -> advertiser
	EdgePromotes     // ad -> product
	EdgeInCategory   // product|ad -> category
	EdgeOfBrand      // product|ad -> brand
	EdgeFires        // user -> pixel (a conversion pixel fired for the user)
	numEdgeTypes
)

// NumEdgeTypes is the number of edge types including EdgeNone. Tables indexed
// by EdgeType have this length.
const NumEdgeTypes = int(numEdgeTypes)

var edgeTypeNames = [...]string{"", "impression", "click", "add_to_cart", "purchase", "conversion",
	"interested", "not_interested", "in_campaign", "of_advertiser", "promotes", "in_category", "of_brand", "fires"}

// String returns the interchange name of t.
func (t EdgeType) String() string {
	if int(t) < len(edgeTypeNames) && t != EdgeNone {
		return edgeTypeNames[t]
	}
	if t == EdgeNone {
		return "none"
	}
	return "invalid(" + strconv.Itoa(int(t)) + ")"
}

// Valid reports whether t is a known edge type (EdgeNone is not valid in events).
func (t EdgeType) Valid() bool { return t > EdgeNone && t < numEdgeTypes }

// IsStructure reports whether t is a structural relation rather than an engagement.
func (t EdgeType) IsStructure() bool { return t >= EdgeInCampaign && t < numEdgeTypes }

// IsPositive reports whether t is an engagement at or deeper than a click
// (click, add_to_cart, purchase, conversion, interested).
func (t EdgeType) IsPositive() bool { return t >= EdgeClick && t <= EdgeInterested }

// IsNegative reports whether t is explicit negative feedback (not_interested).
func (t EdgeType) IsNegative() bool { return t == EdgeNotInterested }

// ParseEdgeType parses an interchange edge type name.
func ParseEdgeType(s string) (EdgeType, error) {
	for i := 1; i < len(edgeTypeNames); i++ {
		if edgeTypeNames[i] == s {
			return EdgeType(i), nil
		}
	}
	return EdgeNone, fmt.Errorf("%w: %q", ErrUnknownEdgeType, s)
}

// MarshalText implements encoding.TextMarshaler.
func (t EdgeType) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownEdgeType, t)
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *EdgeType) UnmarshalText(b []byte) error {
	v, err := ParseEdgeType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Errors returned when validating entities and events.
var (
	ErrUnknownNodeType = errors.New("unknown node type")
	ErrUnknownEdgeType = errors.New("unknown edge type")
	ErrMissingID       = errors.New("missing id")
	ErrBadTimestamp    = errors.New("bad timestamp")
	ErrBadValue        = errors.New("bad value")
)

// MaxIDBytes bounds the length of an external id.
const MaxIDBytes = 256

// Ref names an entity by its type and external id.
type Ref struct {
	Type NodeType `json:"type"`
	ID   string   `json:"id"`
}

// String returns "type:id".
func (r Ref) String() string { return r.Type.String() + ":" + r.ID }

// Validate reports whether r names a valid type and a non-empty id.
func (r Ref) Validate() error {
	if !r.Type.Valid() {
		return fmt.Errorf("%w: %d", ErrUnknownNodeType, r.Type)
	}
	if r.ID == "" {
		return ErrMissingID
	}
	if len(r.ID) > MaxIDBytes {
		return fmt.Errorf("%w: id longer than %d bytes", ErrBadValue, MaxIDBytes)
	}
	return nil
}

// Entity is an entity with its content, as in entities.jsonl and POST /v1/entities.
type Entity struct {
	Type   NodeType          `json:"type"`
	ID     string            `json:"id"`
	Text   string            `json:"text,omitempty"`
	Attrs  map[string]string `json:"attrs,omitempty"`
	Vector []float32         `json:"vector,omitempty"`
}

// Ref returns the entity's reference.
func (e *Entity) Ref() Ref { return Ref{Type: e.Type, ID: e.ID} }

// Validate checks the entity's type, id and vector.
func (e *Entity) Validate() error {
	if err := e.Ref().Validate(); err != nil {
		return err
	}
	for i, v := range e.Vector {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w: vector[%d] is not finite", ErrBadValue, i)
		}
	}
	return nil
}

// UnmarshalJSON decodes an entity. Attribute values may be JSON strings,
// numbers or booleans; they are kept as strings.
func (e *Entity) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type   *NodeType                  `json:"type"`
		ID     json.RawMessage            `json:"id"`
		Text   string                     `json:"text"`
		Attrs  map[string]json.RawMessage `json:"attrs"`
		Vector []float32                  `json:"vector"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.Type == nil {
		return fmt.Errorf("%w: missing type", ErrUnknownNodeType)
	}
	id, err := decodeID(raw.ID)
	if err != nil {
		return err
	}
	*e = Entity{Type: *raw.Type, ID: id, Text: raw.Text, Vector: raw.Vector}
	if len(raw.Attrs) > 0 {
		e.Attrs = make(map[string]string, len(raw.Attrs))
		for k, v := range raw.Attrs {
			s, err := scalarString(v)
			if err != nil {
				return fmt.Errorf("attrs.%s: %w", k, err)
			}
			e.Attrs[k] = s
		}
	}
	return e.Validate()
}

// UnmarshalJSON decodes a reference; the id may be a JSON string or integer.
func (r *Ref) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type *NodeType       `json:"type"`
		ID   json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.Type == nil {
		return fmt.Errorf("%w: missing type", ErrUnknownNodeType)
	}
	id, err := decodeID(raw.ID)
	if err != nil {
		return err
	}
	*r = Ref{Type: *raw.Type, ID: id}
	return r.Validate()
}

func decodeID(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", ErrMissingID
	}
	s, err := scalarString(raw)
	if err != nil {
		return "", fmt.Errorf("id: %w", err)
	}
	if s == "" {
		return "", ErrMissingID
	}
	return s, nil
}

func scalarString(raw json.RawMessage) (string, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	default:
		return "", fmt.Errorf("%w: want a string, number or boolean, got %s", ErrBadValue, raw)
	}
}

// Event is one timestamped, weighted, typed edge, as in events.jsonl and
// POST /v1/events. Structural relations are events too.
type Event struct {
	// ID is an optional idempotency key: two events with the same non-empty ID
	// are stored once.
	ID     string   `json:"id,omitempty"`
	Src    Ref      `json:"src"`
	Dst    Ref      `json:"dst"`
	Type   EdgeType `json:"type"`
	TS     int64    `json:"ts"` // unix milliseconds
	Weight float32  `json:"weight"`
}

// Validate checks the event's endpoints, type, timestamp and weight.
func (ev *Event) Validate() error {
	if err := ev.Src.Validate(); err != nil {
		return fmt.Errorf("src: %w", err)
	}
	if err := ev.Dst.Validate(); err != nil {
		return fmt.Errorf("dst: %w", err)
	}
	if !ev.Type.Valid() {
		return fmt.Errorf("%w: %d", ErrUnknownEdgeType, ev.Type)
	}
	if ev.TS < minTS || ev.TS > maxTS {
		return fmt.Errorf("%w: %d ms is outside years 1970-2200", ErrBadTimestamp, ev.TS)
	}
	if w := float64(ev.Weight); math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		return fmt.Errorf("%w: weight %v must be finite and >= 0", ErrBadValue, ev.Weight)
	}
	if len(ev.ID) > MaxIDBytes {
		return fmt.Errorf("%w: event id longer than %d bytes", ErrBadValue, MaxIDBytes)
	}
	return nil
}

const (
	minTS = 0
	maxTS = 7258118400000 // 2200-01-01T00:00:00Z
)

// UnmarshalJSON decodes an event. ts may be unix milliseconds (a JSON number)
// or an RFC 3339 string; a missing weight defaults to 1.
func (ev *Event) UnmarshalJSON(b []byte) error {
	var raw struct {
		ID     json.RawMessage `json:"id"`
		Src    *Ref            `json:"src"`
		Dst    *Ref            `json:"dst"`
		Type   *EdgeType       `json:"type"`
		TS     json.RawMessage `json:"ts"`
		Weight *float32        `json:"weight"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	switch {
	case raw.Src == nil:
		return fmt.Errorf("%w: missing src", ErrMissingID)
	case raw.Dst == nil:
		return fmt.Errorf("%w: missing dst", ErrMissingID)
	case raw.Type == nil:
		return fmt.Errorf("%w: missing type", ErrUnknownEdgeType)
	}
	ts, err := ParseTimestamp(raw.TS)
	if err != nil {
		return err
	}
	*ev = Event{Src: *raw.Src, Dst: *raw.Dst, Type: *raw.Type, TS: ts, Weight: 1}
	if len(raw.ID) > 0 && !bytes.Equal(raw.ID, []byte("null")) {
		if ev.ID, err = scalarString(raw.ID); err != nil {
			return fmt.Errorf("id: %w", err)
		}
	}
	if raw.Weight != nil {
		ev.Weight = *raw.Weight
	}
	return ev.Validate()
}

// ParseTimestamp decodes a JSON timestamp: an integer of unix milliseconds or
// an RFC 3339 string.
func ParseTimestamp(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, fmt.Errorf("%w: missing ts", ErrBadTimestamp)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrBadTimestamp, err)
		}
		t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
		if err != nil {
			return 0, fmt.Errorf("%w: %q is not RFC 3339", ErrBadTimestamp, s)
		}
		return t.UnixMilli(), nil
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s is not an integer of unix milliseconds", ErrBadTimestamp, raw)
	}
	return ms, nil
}
