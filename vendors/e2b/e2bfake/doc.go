// Package e2bfake holds local fakes of E2B's control plane for tests. They
// answer as the published OpenAPI spec says (paths, status codes, field
// names, error bodies {code, message}) and act on real things: a template
// build really pulls its image from an OCI registry.
//
// Product code never imports this package.
package e2bfake
