// Package wire holds the JSON types, header names, error codes and small
// pure functions of the bridge wire protocol, shared by the bridge server and
// its Go client. It imports nothing of this module.
//
// Names here are wire names and must match the TypeScript cli-bridge exactly:
// a field renamed here breaks every client of every deployed box.
//
// capabilities.schema.json is the JSON Schema of Capabilities (the document
// of GET /v1/capabilities), generated from the Go types; `go test
// ./bridge/wire -update` regenerates it, and the tests fail while it is
// stale.
//
// Canonical (digest.go) is the one canonical JSON form of the module, RFC
// 8785 (github.com/gowebpki/jcs): every digest the TypeScript side also
// computes (an exact cancellation's, an interaction request's and
// command's, a native continuation's turn and request) is Digest of it,
// and testdata/ts-digests.json holds the values the TypeScript agent
// interface computes for the same documents. The canonical event types
// of retained runs (event.go: parts, tool states, status, warning and
// usage events) are declared here once, for the bridge that writes them
// and the client that reads them.
//
// Everything in this package is a value type or a pure function; it is safe
// for concurrent use.
package wire
