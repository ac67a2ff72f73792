package serving

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/hir-ads/hir/api"
)

// NewCeilingHandler returns the HTTP ceiling of POST /v1/retrieve for
// benchmarks: a chi router that reads and decodes a retrieve request
// exactly as the server does (the same body checks, decoder and
// validation) and answers k canned candidates (ads "a0".."a{k-1}") encoded
// as the server encodes its answers, without retrieving anything and
// without middleware. What a real server answers below it is the cost of
// retrieval, telemetry and middleware. Safe for concurrent use.
func NewCeilingHandler() http.Handler {
	canned := make([]api.Candidate, MaxK)
	for i := range canned {
		canned[i] = api.Candidate{Type: api.NodeType("ad"), Id: "a" + strconv.Itoa(i), Score: float32(MaxK-i) / MaxK}
	}
	fresh, newUser := false, false
	r := chi.NewRouter()
	r.Post("/v1/retrieve", func(w http.ResponseWriter, r *http.Request) {
		body, err := readJSONBody(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p, err := decodeRetrieve(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeRetrieveResponse(w, http.StatusOK, &api.RetrieveResponse{ModelVersion: "ceiling", FreshUser: &fresh, NewUser: &newUser,
			Candidates: canned[:p.req.K]})
	})
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	return r
}
