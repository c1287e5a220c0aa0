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
// Everything in this package is a value type or a pure function; it is safe
// for concurrent use.
package wire
