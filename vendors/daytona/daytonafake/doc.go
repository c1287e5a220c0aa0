// Package daytonafake holds local fakes of Daytona's control plane for
// tests. They answer as the published OpenAPI spec says (paths, status
// codes, field names, error bodies {path, timestamp, statusCode, error,
// message}) and act on real things: a snapshot really pulls its image from
// an OCI registry.
//
// Product code never imports this package.
package daytonafake
