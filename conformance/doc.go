// Package conformance is the live conformance suite: named cases that take
// a built box image on a vendor and check, through the public Go API (the
// sandbox provider, and the bridge client on the box's endpoint), what the
// image promises for each harness: the capability document and what it
// claims, turns with usage and the served model, keyed creates, dispatch,
// replay and control references, cancel, timeout and busy conflicts,
// permission interactions where claimed, and what a box itself adds
// (readiness, the harness pin, secrets kept out of sight, the workspace
// clone, a finite lifetime, nothing left after destroy).
//
// # Cases and results
//
// Cases lists the catalogue. Every case has an id ("session.replay-cursor"),
// a one-line description and a deadline, and ends with one Result per
// harness: pass; fail, with the evidence (the request, what came back, what
// was expected); or not applicable, naming the capability that makes it so.
//
// # What Run guarantees
//
//   - Independent cases run in parallel, at most Options.Parallel at once,
//     each under its own deadline (Case.Timeout, or Options.CaseTimeout).
//     A case that does not return within its deadline and a grace period
//     is reported failed and left behind; its boxes are still removed.
//   - Every case gets a fresh run tag, and every box it makes carries it.
//     When the case ends, pass or fail, the runner destroys the
//     environments it created (on a context the caller's cancellation does
//     not reach, with its own deadline), then lists the vendor's boxes by
//     the run tag and destroys whatever is left. A destroy that fails, or a
//     box found left behind, is a cleanup failure: it is reported in the
//     case's result next to the case's own failure, and fails a case that
//     otherwise passed.
//   - A panicking case is a failed case; the suite goes on.
//   - Results come in catalogue order, harness by harness, whatever order
//     the cases finished in. Options.Progress sees each case start and end
//     as it happens, from the runner's goroutines (one call at a time).
//
// # Security
//
// The security family (security.egress, security.egress-change) attacks a
// box under default-deny from inside it (package vendors/egress/attack):
// Target.Security (StartSecurity) holds the suite's listeners on Docker
// networks of its own on this machine, an allowed host and decoys that
// count every byte, and a resolver that knows their names; the target's
// gate resolves with it. An attempt passes only by what reached the
// listeners, never by what the box printed. The cases run once a run (for
// the first harness) and apply where the vendor confines a box's egress
// and its boxes run on this machine: Docker (with Security.Gate), and the
// E2B and Daytona emulators, each within what the vendor's rules can say.
//
// # Chaos
//
// Options.Chaos runs the chaos family instead (chaos.drop, chaos.idle,
// chaos.kill, chaos.caller, chaos.vendor, chaos.suspend, chaos.mixed;
// `boxctl conformance --chaos --faults N`): live turns, paced by the local endpoint, while faults of
// one kind (or mixed) are injected from each run's first event on: the
// client's connection cut, a proxy (package internal/cutproxy) cutting
// connections idle for its bound (16 s by default, Chaos.Idle), kill -9 of
// the serving bridge in the box (its supervisor restarts it), and the
// caller dropped and replaced by one that has only the persisted
// references. The client resumes from its cursor after each cut; when the
// run ended, its stream is checked against a clean replay of the bridge's
// store (same ids and payloads, none lost or repeated, the run terminal
// with its result). Each result carries its ChaosStats: faults, runs,
// events checked, lost, duplicated, and the p50/p99 time to resume; the
// summary prints them as a table per vendor and fault kind.
//
// chaos.vendor runs where Target.Faults is an emulator's fault switch
// (elsewhere it does not apply): while each turn streams, 30% of
// control-plane calls fail (429 or 5xx, half the failed creates and
// deletes taking effect first) as boxes are made and destroyed beside the
// serving one, the call in flight cancelled at the run's end. After the
// turns no side box may be made twice by one create, and none may be left
// once sandbox.GC (what boxctl gc runs) collected them as at their
// deadline.
//
// chaos.suspend runs where the vendor suspends boxes: a suspend asked
// while a run streams must be refused; after each turn the box is
// suspended and resumed, and the run is replayed from the resumed box's
// store through a new client of the same environment and checked against
// what the client saw. Its resume time is from the resume call to that
// replay's end.
//
// # Offline runs
//
// StartLocal runs the local model endpoint (internal/routerstub) and a
// small git repository where boxes reach them, with the scripted replies
// the cases need: plain text, a stall for cancel, timeout and busy
// conflicts, and a tool call for interactions. The cases pick a reply by
// markers in their prompts, which read as ordinary instructions to a real
// model, so the same cases run against a real Router.
//
// # Reports
//
// A Report renders as text (a summary table and the evidence of each
// failure), JSON (the Report type, whose JSON Schema is published as
// report.schema.json) and JUnit XML (one testsuite per vendor and harness).
// ProofFor reads a report for `boxctl pins prove`.
package conformance
