// Package server is the bridge's HTTP layer: the routes of the wire
// protocol (bridge-protocol.md) over a run engine, with bearer auth, body
// limits, input validation with stable error types, the legacy SSE
// writer, and GET /metrics (the engine's and the store's figures in the
// Prometheus text format).
//
// The server owns no run state: every answer about a run is read from the
// engine and its store, so any number of readers can follow a run, each
// from its own cursor, and a reader's connection owns only that reader.
// Handlers are safe for concurrent use; the health cache and the context
// route counters of GET /metrics are the only state the server itself
// keeps.
//
// Beyond runs and sessions, the server keeps workspace branches
// (branching.go: checkpoints of an ended run's workspace and forks of
// them, copies under the data directory, keyed and digest-bound in the
// store) and takes portable contexts (context.go: a plan with no effect,
// and a transfer of an accepted plan into one fresh retained session whose
// first run carries the conversation), and serves exact process
// environments (exact.go, over package exact: keyed environments whose
// files and bubblewrap-confined processes it writes, starts, follows,
// kills and destroys).
package server
