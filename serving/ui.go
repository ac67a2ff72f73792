package serving

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// uiFiles is the interest explorer page: index.html, app.css and app.js
// (built from clients/typescript/explorer by scripts/generate.sh; committed,
// so building the server needs no npm).
//
//go:embed ui/index.html ui/app.css ui/app.js
var uiFiles embed.FS

// uiPrefix is the path the explorer page is served under.
const uiPrefix = "/ui"

// isUIRoute reports whether path is the explorer page or one of its assets.
// They hold no data (the page reads the API with the key the user enters),
// so they never need a key.
func isUIRoute(p string) bool { return p == uiPrefix || strings.HasPrefix(p, uiPrefix+"/") }

// serveUI serves the embedded explorer page: index.html at /ui and /ui/,
// the assets under /ui/, and a problem for anything else.
func (s *Server) serveUI(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, uiPrefix)
	if name == "" || name == "/" {
		name = "/index.html"
	}
	name = path.Clean(name)
	b, err := fs.ReadFile(uiFiles, "ui"+name)
	if err != nil {
		s.writeProblem(w, r, notFoundf("no explorer asset %s", clip(r.URL.Path)))
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}
