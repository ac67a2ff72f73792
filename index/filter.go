package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2"
)

// ErrBadFilter is the sentinel of every filter parse or validation error;
// the concrete error is a *FilterError.
var ErrBadFilter = errors.New("bad filter")

// MaxFilterDepth bounds the nesting of a filter tree.
const MaxFilterDepth = 32

// FilterError describes what is wrong with a filter and where. It matches
// ErrBadFilter under errors.Is.
type FilterError struct {
	// Path locates the offending node, e.g. "and[1].not"; empty for the
	// root or for JSON syntax errors.
	Path string
	// Detail says what is wrong, in words fit for an HTTP 400 body.
	Detail string
}

func (e *FilterError) Error() string {
	if e.Path == "" {
		return "bad filter: " + e.Detail
	}
	return "bad filter at " + e.Path + ": " + e.Detail
}

// Unwrap returns ErrBadFilter.
func (e *FilterError) Unwrap() error { return ErrBadFilter }

// Filter is a boolean expression over doc attributes, decodable from JSON:
//
//	{"and":[{"attr":"category","in":["c1","c2"]},{"not":{"attr":"status","eq":"paused"}}]}
//
// Each node has exactly one operator: "and" or "or" (one or more operands),
// "not" (one operand), or an attribute test: "attr" (or "label", meaning
// attribute LabelPrefix+label) with "eq" (one value) or "in" (one or more
// values). It is evaluated as bitmap algebra; "not" is the live docs minus
// its operand. A Filter is not modified by evaluation and may be shared.
type Filter struct {
	And   []*Filter `json:"and,omitempty"`
	Or    []*Filter `json:"or,omitempty"`
	Not   *Filter   `json:"not,omitempty"`
	Attr  string    `json:"attr,omitempty"`
	Label string    `json:"label,omitempty"`
	Eq    *string   `json:"eq,omitempty"`
	In    []string  `json:"in,omitempty"`
}

// ParseFilter decodes and validates a JSON filter. Unknown fields, trailing
// data and malformed trees give a *FilterError.
func ParseFilter(data []byte) (*Filter, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f Filter
	if err := dec.Decode(&f); err != nil {
		return nil, &FilterError{Detail: "decode JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FilterError{Detail: "trailing data after the filter object"}
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Eq returns the filter attr == value.
func Eq(attr, value string) *Filter { return &Filter{Attr: attr, Eq: &value} }

// In returns the filter attr ∈ values.
func In(attr string, values ...string) *Filter { return &Filter{Attr: attr, In: values} }

// And returns the conjunction of fs.
func And(fs ...*Filter) *Filter { return &Filter{And: fs} }

// Or returns the disjunction of fs.
func Or(fs ...*Filter) *Filter { return &Filter{Or: fs} }

// Not returns the negation of f.
func Not(f *Filter) *Filter { return &Filter{Not: f} }

// Validate checks the tree shape; the error is a *FilterError.
func (f *Filter) Validate() error { return f.validate("", 0) }

func (f *Filter) validate(path string, depth int) error {
	bad := func(format string, args ...any) error {
		return &FilterError{Path: path, Detail: fmt.Sprintf(format, args...)}
	}
	if f == nil {
		return bad("null filter node")
	}
	if depth > MaxFilterDepth {
		return bad("nested deeper than %d", MaxFilterDepth)
	}
	ops := 0
	for _, set := range []bool{f.And != nil, f.Or != nil, f.Not != nil, f.Attr != "" || f.Label != "" || f.Eq != nil || f.In != nil} {
		if set {
			ops++
		}
	}
	if ops != 1 {
		return bad("want exactly one of and, or, not, attr/label; got %d", ops)
	}
	join := func(p string) string {
		if path == "" {
			return p
		}
		return path + "." + p
	}
	switch {
	case f.And != nil || f.Or != nil:
		name, kids := "and", f.And
		if f.Or != nil {
			name, kids = "or", f.Or
		}
		if len(kids) == 0 {
			return bad("%s needs at least one operand", name)
		}
		for i, k := range kids {
			if err := k.validate(join(name+"["+strconv.Itoa(i)+"]"), depth+1); err != nil {
				return err
			}
		}
	case f.Not != nil:
		return f.Not.validate(join("not"), depth+1)
	default:
		if (f.Attr == "") == (f.Label == "") {
			return bad("want exactly one of attr and label")
		}
		if (f.Eq == nil) == (f.In == nil) {
			return bad("want exactly one of eq and in")
		}
		if f.In != nil && len(f.In) == 0 {
			return bad("in needs at least one value")
		}
	}
	return nil
}

// key returns the attribute key an attribute test reads.
func (f *Filter) key() string {
	if f.Label != "" {
		return LabelPrefix + f.Label
	}
	return f.Attr
}

// values returns the values an attribute test accepts.
func (f *Filter) values() []string {
	if f.Eq != nil {
		return []string{*f.Eq}
	}
	return f.In
}

// eval evaluates a validated filter; the result is a new bitmap of live docs.
func (f *Filter) eval(s *Snapshot) *roaring.Bitmap {
	switch {
	case f.And != nil:
		acc := f.And[0].eval(s)
		for _, k := range f.And[1:] {
			if acc.IsEmpty() {
				break
			}
			acc.And(k.eval(s))
		}
		return acc
	case f.Or != nil:
		parts := make([]*roaring.Bitmap, len(f.Or))
		for i, k := range f.Or {
			parts[i] = k.eval(s)
		}
		return Union(parts...)
	case f.Not != nil:
		return Without(s.live, f.Not.eval(s))
	default:
		key := f.key()
		var parts []*roaring.Bitmap
		for _, v := range f.values() {
			if b := s.attr(key, v); b != nil {
				parts = append(parts, b)
			}
		}
		return Union(parts...)
	}
}

// Matches reports whether attrs (as returned by Snapshot.Attrs) satisfy the
// validated filter f: the per-doc reference semantics of the bitmap algebra.
func (f *Filter) Matches(attrs map[string][]string) bool {
	switch {
	case f.And != nil:
		for _, k := range f.And {
			if !k.Matches(attrs) {
				return false
			}
		}
		return true
	case f.Or != nil:
		for _, k := range f.Or {
			if k.Matches(attrs) {
				return true
			}
		}
		return false
	case f.Not != nil:
		return !f.Not.Matches(attrs)
	default:
		for _, want := range f.values() {
			for _, have := range attrs[f.key()] {
				if have == want {
					return true
				}
			}
		}
		return false
	}
}
