package index

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tinyQuantizer is a fixed 2-d quantizer for tests that do not care about
// embeddings.
func tinyQuantizer(t testing.TB) *Quantizer {
	t.Helper()
	q, err := NewQuantizer(QuantizerOptions{Levels: [][][]float32{{{1, 0}, {0, 1}}}, ResidualLevels: -1})
	if err != nil {
		t.Fatalf("NewQuantizer() error = %v", err)
	}
	return q
}

func TestParseFilter(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantPath string // "" with wantErr false means valid
		wantErr  bool
	}{
		{"eq", `{"attr":"status","eq":"paused"}`, "", false},
		{"issue example", `{"and":[{"attr":"category","in":["c1","c2"]},{"not":{"attr":"status","eq":"paused"}}]}`, "", false},
		{"label", `{"label":"region","eq":"eu"}`, "", false},
		{"syntax", `{"attr":`, "", true},
		{"unknown field", `{"attr":"a","eq":"b","x":1}`, "", true},
		{"trailing", `{"attr":"a","eq":"b"} {}`, "", true},
		{"empty object", `{}`, "", true},
		{"two ops", `{"attr":"a","eq":"b","not":{"attr":"a","eq":"b"}}`, "", true},
		{"empty and", `{"and":[]}`, "", true},
		{"empty in", `{"attr":"a","in":[]}`, "", true},
		{"eq and in", `{"attr":"a","eq":"x","in":["y"]}`, "", true},
		{"no value", `{"attr":"a"}`, "", true},
		{"null operand", `{"or":[{"attr":"a","eq":"b"},null]}`, "or[1]", true},
		{"nested bad", `{"and":[{"attr":"a","eq":"b"},{"not":{"attr":"","eq":"x"}}]}`, "and[1].not", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFilter([]byte(tc.in))
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("ParseFilter(%s) error = %v, want nil", tc.in, err)
				}
				out, _ := json.Marshal(f)
				f2, err := ParseFilter(out)
				if err != nil || !cmp.Equal(f, f2) {
					t.Errorf("round trip of %s = %s, %v", tc.in, out, err)
				}
				return
			}
			if !errors.Is(err, ErrBadFilter) {
				t.Fatalf("ParseFilter(%s) error = %v, want ErrBadFilter", tc.in, err)
			}
			var fe *FilterError
			if !errors.As(err, &fe) || fe.Detail == "" {
				t.Fatalf("ParseFilter(%s) error = %#v, want *FilterError with detail", tc.in, err)
			}
			if fe.Path != tc.wantPath {
				t.Errorf("ParseFilter(%s) path = %q, want %q", tc.in, fe.Path, tc.wantPath)
			}
		})
	}
	deep := `{"attr":"a","eq":"b"}`
	for range MaxFilterDepth + 2 {
		deep = `{"not":` + deep + `}`
	}
	if _, err := ParseFilter([]byte(deep)); !errors.Is(err, ErrBadFilter) {
		t.Errorf("ParseFilter(depth %d) error = %v, want ErrBadFilter", MaxFilterDepth+2, err)
	}
}

// byteSource hands out fuzz bytes, zero when exhausted.
type byteSource struct{ b []byte }

func (s *byteSource) next() int {
	if len(s.b) == 0 {
		return 0
	}
	x := s.b[0]
	s.b = s.b[1:]
	return int(x)
}

var fuzzValues = map[string][]string{
	AttrCategory:           {"c0", "c1", "c2", "c3"},
	AttrStatus:             {"active", "paused"},
	LabelPrefix + "region": {"eu", "us"},
	AttrBrand:              {"b0", "b1", "b2"},
}

var fuzzKeys = []string{AttrCategory, AttrStatus, LabelPrefix + "region", AttrBrand}

func genFilter(src *byteSource, depth int) *Filter {
	op := src.next() % 5
	if depth >= 4 {
		op = 3 + op%2
	}
	switch op {
	case 0, 1:
		n := 1 + src.next()%3
		kids := make([]*Filter, n)
		for i := range kids {
			kids[i] = genFilter(src, depth+1)
		}
		if op == 0 {
			return And(kids...)
		}
		return Or(kids...)
	case 2:
		return Not(genFilter(src, depth+1))
	default:
		key := fuzzKeys[src.next()%len(fuzzKeys)]
		vals := append(fuzzValues[key], "missing")
		var f *Filter
		if op == 3 {
			f = Eq(key, vals[src.next()%len(vals)])
		} else {
			f = In(key, vals[src.next()%len(vals)], vals[src.next()%len(vals)])
		}
		if len(key) > len(LabelPrefix) && key[:len(LabelPrefix)] == LabelPrefix {
			f.Label, f.Attr = key[len(LabelPrefix):], ""
		}
		return f
	}
}

// naiveMatch is the map-based reference: plain recursion over attrs.
func naiveMatch(f *Filter, attrs map[string]string) bool {
	switch {
	case f.And != nil:
		ok := true
		for _, k := range f.And {
			ok = ok && naiveMatch(k, attrs)
		}
		return ok
	case f.Or != nil:
		ok := false
		for _, k := range f.Or {
			ok = ok || naiveMatch(k, attrs)
		}
		return ok
	case f.Not != nil:
		return !naiveMatch(f.Not, attrs)
	}
	key := f.Attr
	if f.Label != "" {
		key = LabelPrefix + f.Label
	}
	have, ok := attrs[key]
	if !ok {
		return false
	}
	if f.Eq != nil {
		return have == *f.Eq
	}
	for _, v := range f.In {
		if v == have {
			return true
		}
	}
	return false
}

func FuzzFilterMatchesNaive(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{3, 0, 1})
	f.Add([]byte("some docs with attributes"), []byte{2, 0, 2, 3, 1, 4, 0, 1})
	f.Add([]byte{255, 17, 99, 3, 3, 3, 3, 8}, []byte{1, 2, 2, 3, 0, 0, 4, 1, 1, 9, 4})
	f.Fuzz(func(t *testing.T, docBytes, filterBytes []byte) {
		ctx := context.Background()
		ix, err := New(Options{Quantizer: tinyQuantizer(t)})
		if err != nil {
			t.Fatal(err)
		}
		src := &byteSource{b: docBytes}
		ref := map[uint32]map[string]string{}
		for i := 0; i < 48 && len(src.b) > 0; i++ {
			id := uint32(src.next() % 40)
			if src.next()%5 == 0 {
				if err := ix.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
				delete(ref, id)
				continue
			}
			d := Doc{ID: id, Embedding: []float32{float32(src.next()), 1}, Attrs: map[string][]string{}, Labels: map[string]string{}}
			attrs := map[string]string{}
			for _, k := range fuzzKeys {
				x := src.next() % (len(fuzzValues[k]) + 1)
				if x == len(fuzzValues[k]) {
					continue // attribute absent
				}
				v := fuzzValues[k][x]
				attrs[k] = v
				if k == LabelPrefix+"region" {
					d.Labels["region"] = v
				} else {
					d.Attrs[k] = []string{v}
				}
			}
			if err := ix.Upsert(ctx, d); err != nil {
				t.Fatal(err)
			}
			ref[id] = attrs
		}
		flt := genFilter(&byteSource{b: filterBytes}, 0)
		js, _ := json.Marshal(flt)
		parsed, err := ParseFilter(js)
		if err != nil {
			t.Fatalf("ParseFilter(%s) error = %v", js, err)
		}
		snap := ix.Snapshot()
		got, err := snap.Allowed(parsed)
		if err != nil {
			t.Fatal(err)
		}
		var want []uint32
		for id := range uint32(40) {
			if attrs, ok := ref[id]; ok && naiveMatch(flt, attrs) {
				want = append(want, id)
			}
		}
		if diff := cmp.Diff(want, got.ToArray(), cmpEmpty); diff != "" {
			t.Fatalf("Allowed(%s) mismatch (-naive +bitmap):\n%s", js, diff)
		}
		for id, attrs := range ref {
			a, _ := snap.Attrs(id)
			if got, want := parsed.Matches(a), naiveMatch(flt, attrs); got != want {
				t.Fatalf("Matches(%s, doc %d) = %v, want %v", js, id, got, want)
			}
		}
	})
}

// FuzzParseFilter parses arbitrary bytes as a filter expression: a filter
// or an error wrapping ErrBadFilter, never a panic.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{`{"attr":"brand","eq":"b1"}`, `{"and":[{"attr":"a","in":["x","y"]},{"not":{"attr":"b","eq":"z"}}]}`,
		`{"or":[]}`, `null`, `{"attr":"a"}`, `[[[[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		flt, err := ParseFilter(data)
		if err != nil && !errors.Is(err, ErrBadFilter) {
			t.Fatalf("ParseFilter(%q) error = %v, want ErrBadFilter", data, err)
		}
		if err == nil && flt == nil && string(bytes.TrimSpace(data)) != "null" {
			t.Logf("ParseFilter(%q) = nil filter", data)
		}
	})
}
