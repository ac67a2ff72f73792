package serving

import (
	"net/http"

	"github.com/hir-ads/hir/serving/problem"
)

// RequestIDHeader is the header that carries the request id in both
// directions: a sane incoming value is kept, otherwise one is generated.
const RequestIDHeader = problem.RequestIDHeader

// ingestRoutes are the endpoints whose bodies may be as large as
// Options.MaxBodyBytes; every other body is capped at
// Options.MaxReadBodyBytes.
var ingestRoutes = map[string]bool{
	"POST /v1/entities": true,
	"POST /v1/events":   true,
}

// writeRoutes are the endpoints that always need an API key (when keys are
// configured).
var writeRoutes = map[string]bool{
	"POST /v1/entities":    true,
	"POST /v1/events":      true,
	"POST /v1/model/train": true,
}

// openRoutes never need a key: probes, the metrics scrape and the API
// description.
var openRoutes = map[string]bool{
	"GET /healthz": true,
	"GET /readyz":  true,
	"GET /metrics": true,
	// The API description.
	"GET /openapi.yaml": true,
	"GET /openapi.json": true,
	"GET /docs":         true,
}

// needKey reports whether r's route needs an API key (when keys are
// configured): the write and admin endpoints always; with
// Options.ReadAuth every other route too, but openRoutes and the /ui
// page's files.
func (s *Server) needKey(r *http.Request) bool {
	route := r.Method + " " + r.URL.Path
	return writeRoutes[route] || (s.opts.ReadAuth && !openRoutes[route] && !isUIRoute(r.URL.Path))
}

// probeRoutes are exempt from the rate limit and from admission control:
// an orchestrator's health probes must not be shed with the traffic they
// judge.
var probeRoutes = map[string]bool{"/healthz": true, "/readyz": true}

// unadmittedRoutes are exempt from admission control: the probes, the
// metrics scrape and the API description (cheap, and what an operator
// reads during an overload).
var unadmittedRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true,
	"/openapi.yaml": true, "/openapi.json": true, "/docs": true}
