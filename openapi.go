package hir

import _ "embed"

// OpenAPI is the content of openapi.yaml as built. Callers must not modify
// it.
//
//go:embed openapi.yaml
var OpenAPI []byte
