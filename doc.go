// Package hir carries openapi.yaml, the source of truth of HIR's REST API,
// into the binary: [OpenAPI] is what the server answers on GET /openapi.yaml
// (and, converted, /openapi.json and /docs), so a running server always
// describes the API it was built with.
//
// The service itself lives in the subpackages: cmd/hir (the binary), api
// (generated types, server interface and Go client), serving, model, index,
// graph, eventlog, dataset and eval.
package hir
