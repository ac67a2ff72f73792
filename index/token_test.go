package index

import "testing"

func TestTokenPacking(t *testing.T) {
	tests := []struct {
		name        string
		level, code int
		ok          bool
	}{
		{"zero", 0, 0, true},
		{"typical", 2, 2047, true},
		{"max", MaxTokenLevels - 1, MaxTokenCode, true},
		{"level too big", MaxTokenLevels, 0, false},
		{"code too big", 0, MaxTokenCode + 1, false},
		{"negative", -1, 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, ok := MakeToken(tc.level, tc.code)
			if ok != tc.ok {
				t.Fatalf("MakeToken(%d, %d) ok = %v, want %v", tc.level, tc.code, ok, tc.ok)
			}
			if !ok {
				return
			}
			if tok.Level() != tc.level || tok.Code() != tc.code {
				t.Errorf("MakeToken(%d, %d) = (%d, %d)", tc.level, tc.code, tok.Level(), tok.Code())
			}
			back, err := ParseToken(tok.String())
			if err != nil || back != tok {
				t.Errorf("ParseToken(%q) = %v, %v, want %v", tok.String(), back, err, tok)
			}
		})
	}
	for _, bad := range []string{"", "L", "L1", "L1:x", "L99:1", "L1:-1", "L01:2"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) error = nil, want error", bad)
		}
	}
}
