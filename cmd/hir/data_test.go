package main

import "testing"

// TestParseTime checks the --asof forms: unix milliseconds and RFC 3339,
// whose year starts with a digit too.
func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"", 0, false},
		{"887740603000", 887740603000, false},
		{"1998-02-17T18:36:43Z", 887740603000, false},
		{"1998-02-17T20:36:43+02:00", 887740603000, false},
		{"yesterday", 0, true},
		{"1998-02-17", 0, true},
	} {
		got, err := parseTime(tc.in)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("parseTime(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
