// Package cancellation cancels a run named exactly: the bridge's side of
// POST /v1/runs/:id/cancel with a body and of POST
// /v1/sessions/:id/cancel. The server only decodes the request and writes
// the answer.
//
// An exact cancellation names its operation, the run's six coordinates
// (run, provider, environment, session and execution ids and the run's
// request digest) and carries its own digest (wire.CancellationDigest),
// as the TypeScript agent interface's AgentRunCancellationRequest does; a
// request without it, or with another, is refused (400). Only the run it
// names is cancelled, and only when every coordinate is that run's: a
// caller holding a stale reference cannot cancel a later turn.
//
// The acknowledgement is stored under the operation id: the same request
// repeated gets it again (through the run route with status replayed,
// through the session route as stored, as the TypeScript bridge answers
// each), another request under the same id is a conflict (409). The two
// routes differ, as in the TypeScript bridge, in how they answer a run
// they cannot bind the request to: the run route answers a run it does not
// know with an acknowledgement of status unknown and a run whose
// coordinates differ with a run_identity_conflict error; the session
// route answers both, and a run of another session, with a conflict
// acknowledgement (409). Neither is stored.
//
// A Canceller is safe for concurrent use and keeps no state of its own.
package cancellation
