package serving

import (
	"net/http"

	"github.com/hir-ads/hir/serving/apidoc"
)

// GetSpecYAML serves openapi.yaml as built into the binary.
func (s *Server) GetSpecYAML(w http.ResponseWriter, r *http.Request) {
	s.serveSpec(w, r, "application/yaml", func() ([]byte, error) { return apidoc.YAML(), nil })
}

// GetSpecJSON serves openapi.yaml converted to JSON.
func (s *Server) GetSpecJSON(w http.ResponseWriter, r *http.Request) {
	s.serveSpec(w, r, "application/json", apidoc.JSON)
}

// GetDocs serves the API reference page rendered from openapi.yaml.
func (s *Server) GetDocs(w http.ResponseWriter, r *http.Request) {
	s.serveSpec(w, r, "text/html; charset=utf-8", apidoc.HTML)
}

func (s *Server) serveSpec(w http.ResponseWriter, r *http.Request, contentType string, body func() ([]byte, error)) {
	b, err := body()
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}
