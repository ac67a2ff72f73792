package main

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAwaitServer runs scripts/lib/tiny-server.sh's await_server, the
// readiness wait of the test scripts, under `set -euo pipefail` as they
// do, against a server whose address file and log do not exist yet when
// the wait begins (a loaded machine starts the server late): it must wait,
// not exit. A server that exits first fails the wait, naming it.
func TestAwaitServer(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
		}
	}))
	defer ready.Close()
	addr := strings.TrimPrefix(ready.URL, "http://")
	lib, err := filepath.Abs("../../scripts/lib/tiny-server.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, server string
		wantOK       bool
		wantOut      string
	}{
		{"late address file and log", `(sleep 0.6; echo "` + addr + `" >"$d/addr.tmp"; mv "$d/addr.tmp" "$d/addr"; echo started >"$d/log"; sleep 20) &`,
			true, "url=" + ready.URL},
		{"server exits first", `(sleep 0.3; echo "boom" >"$d/log"; exit 1) &`, false, "t: hir serve exited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			script := `set -euo pipefail
source "` + lib + `"
d="` + d + `"
` + tc.server + `
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
await_server t "$pid" "$d/addr" "$d/log"
echo "url=$url"
`
			out, err := exec.Command("bash", "-c", script).CombinedOutput()
			if (err == nil) != tc.wantOK {
				t.Errorf("exit error %v, want success %v\n%s", err, tc.wantOK, out)
			}
			if !strings.Contains(string(out), tc.wantOut) {
				t.Errorf("output lacks %q:\n%s", tc.wantOut, out)
			}
		})
	}
}
