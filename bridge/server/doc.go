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
// Beyond runs and sessions, the server serves routes whose work lives in
// packages beside it, and only decodes their requests and encodes their
// results: workspace branches (package branch: checkpoints of an ended
// run's workspace and forks of them), portable contexts (package
// portable: a plan with no effect, and the transfer of an accepted plan
// into a fresh retained session), native continuation (package
// continuation) and exact process environments (package exact, kept by
// the engine). Their failures come back as wire errors (writeFailure).
//
// Every route that takes a JSON body decodes it strictly (decodeStrict:
// one object, no unknown field, nothing after it), but the chat
// completions route, which takes the OpenAI body as it comes. Every
// keyed operation (an idempotency key or an operation id) is looked up
// through store.Bound: a repeat of the request that bound it is answered
// its recorded outcome, another request under it a conflict.
package server
