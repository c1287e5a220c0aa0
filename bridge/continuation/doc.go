// Package continuation continues a retained session natively: the next
// turn of a harness that declares native continuation proven
// (harness.NativeContinuer), admitted only if the session's context
// boundary still equals the one the caller expects. It is the bridge's
// side of POST /v1/sessions/:id/continue; the server only decodes the
// request and writes the answer.
//
// The boundary is compared in the store transaction that admits the turn
// (engine.AdmitContinuation), so no other turn can slip in between. The
// outcome is recorded under the request's operation id: the operation
// repeated with the same request digest gets the recorded outcome again
// (an accepted one reads replayed), with another digest a conflict. An
// accepted continuation is answered once its run is terminal, with the
// turn's result and the run's control reference; its outcome is recorded
// even if the caller went away first, so that a repetition finds it after
// the run's events expired.
//
// A Continuer is safe for concurrent use and keeps no state of its own.
package continuation
