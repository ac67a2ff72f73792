package serving

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/hir-ads/hir/api"
)

// errNotFinite marks a float that JSON cannot encode.
var errNotFinite = errors.New("json: unsupported float value")

// encodeBuffers are the reusable buffers of writeRetrieveResponse.
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// writeRetrieveResponse writes out as writeJSON does, with the same bytes
// (appendRetrieveResponse mirrors encoding/json), without reflection.
func writeRetrieveResponse(w http.ResponseWriter, status int, out *api.RetrieveResponse) {
	bp := encodeBuffers.Get().(*[]byte)
	defer encodeBuffers.Put(bp)
	b, err := appendRetrieveResponse((*bp)[:0], out)
	if err != nil { // a NaN or infinite score: what encoding/json does with it
		writeJSON(w, status, out)
		return
	}
	*bp = b[:0]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// appendRetrieveResponse appends the JSON encoding of r, byte for byte what
// json.NewEncoder(w).Encode(r) writes (final newline included).
func appendRetrieveResponse(b []byte, r *api.RetrieveResponse) ([]byte, error) {
	var err error
	b = append(b, `{"candidates":`...)
	if r.Candidates == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Candidates {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendCandidate(b, &r.Candidates[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if r.FreshUser != nil {
		b = append(b, `,"fresh_user":`...)
		b = strconv.AppendBool(b, *r.FreshUser)
	}
	b = append(b, `,"model_version":`...)
	b = appendJSONString(b, r.ModelVersion)
	if r.NewUser != nil {
		b = append(b, `,"new_user":`...)
		b = strconv.AppendBool(b, *r.NewUser)
	}
	return append(b, "}\n"...), nil
}

func appendCandidate(b []byte, c *api.Candidate) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = appendJSONString(b, c.Id)
	if c.KeywordMatch != nil {
		b = append(b, `,"keyword_match":`...)
		b = strconv.AppendBool(b, *c.KeywordMatch)
	}
	if c.NewAd != nil {
		b = append(b, `,"new_ad":`...)
		b = strconv.AppendBool(b, *c.NewAd)
	}
	if p := c.Parts; p != nil {
		b = append(b, `,"parts":{"coengagement":`...)
		if b, err = appendJSONFloat32(b, p.Coengagement); err != nil {
			return nil, err
		}
		b = append(b, `,"prior":`...)
		if b, err = appendJSONFloat32(b, p.Prior); err != nil {
			return nil, err
		}
		b = append(b, `,"similarity":`...)
		if b, err = appendJSONFloat32(b, p.Similarity); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	b = append(b, `,"score":`...)
	if b, err = appendJSONFloat32(b, c.Score); err != nil {
		return nil, err
	}
	if c.Tokens != nil {
		b = append(b, `,"tokens":`...)
		if *c.Tokens == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i := range *c.Tokens {
				if i > 0 {
					b = append(b, ',')
				}
				if b, err = appendTokenRef(b, &(*c.Tokens)[i]); err != nil {
					return nil, err
				}
			}
			b = append(b, ']')
		}
	}
	b = append(b, `,"type":`...)
	b = appendJSONString(b, string(c.Type))
	return append(b, '}'), nil
}

func appendTokenRef(b []byte, t *api.TokenRef) ([]byte, error) {
	b = append(b, '{')
	if t.Label != nil {
		b = append(b, `"label":`...)
		b = appendJSONString(b, *t.Label)
		b = append(b, ',')
	}
	b = append(b, `"level":`...)
	b = strconv.AppendInt(b, int64(t.Level), 10)
	b = append(b, `,"token":`...)
	b = appendJSONString(b, t.Token)
	if t.Weight != nil {
		b = append(b, `,"weight":`...)
		var err error
		if b, err = appendJSONFloat32(b, *t.Weight); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendJSONFloat32 formats f as encoding/json formats a float32.
func appendJSONFloat32(b []byte, f float32) ([]byte, error) {
	f64 := float64(f)
	if math.IsInf(f64, 0) || math.IsNaN(f64) {
		return nil, errNotFinite
	}
	format := byte('f')
	if abs := float32(math.Abs(f64)); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f64, format, -1, 32)
	if format == 'e' { // clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendJSONString quotes s as encoding/json does (HTML-safe escaping);
// strings with anything but plain printable ASCII go through
// encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
