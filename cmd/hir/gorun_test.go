package main

import "testing"

func TestStartedByGoRun(t *testing.T) {
	for _, tc := range []struct {
		exe  string
		want bool
	}{
		{"/tmp/go-build1988621624/b001/exe/hir", true},
		{"/root/.cache/go-build/b001/exe/hir", false},
		{"/usr/local/bin/hir", false},
		{"/tmp/exe/hir", false},
	} {
		if got := startedByGoRun(tc.exe); got != tc.want {
			t.Errorf("startedByGoRun(%q) = %v, want %v", tc.exe, got, tc.want)
		}
	}
}
