// Package api holds the types, chi server interface and Go client generated
// from openapi.yaml, the source of truth of HIR's REST API. It contains no
// hand-written logic; regenerate it with `go generate ./api`.
//
// # Example
//
//	c, err := api.NewClientWithResponses("http://localhost:8080")
//	res, err := c.RetrieveCandidatesWithResponse(ctx, api.RetrieveJSONRequestBody{User: &api.Ref{Type: api.NodeTypeUser, Id: "u1"}})
package api

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../openapi.yaml
