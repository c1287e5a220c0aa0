// Package inspector is the local web inspector of a user's boxes (`boxctl
// ui`): an HTTP server, its page and scripts embedded, over the boxes the
// user's state (boxstate) knows on every vendor.
//
// The page lists the boxes with their state, deadline, harness, run tag
// and pool; a box's page sends a turn and streams it live, replays the box's
// earlier runs from the bridge's store, cancels a run, answers its
// permission interactions (allow or deny), shows the bridge's log, the
// box's lifecycle events and a turn's trace, suspends and resumes the box
// (through boxstate.Apply, as `boxctl suspend` and `resume`), and destroys
// it. The pool page lists the pools' files (pool.Summaries), the pools of
// the targets whose vendors keep their own (Options.PoolTargets, read
// through pool.For) and, for the keepers whose metrics address it was
// given, their size, claims and hits. The
// server drives each box through the sandbox provider from the reference
// the state keeps: the box's bearer stays in this process and never
// reaches the browser, whose event streams the server relays.
//
// Safe by default: the URL the server prints carries a one-time token that
// the first request exchanges for an HttpOnly, SameSite=Strict cookie;
// every request without that cookie is refused with 401, a Host header that
// names neither a loopback address nor the listener's own host with 403
// (no DNS rebinding), and a state-changing request (POST) whose Origin is
// not the server's own or whose X-CSRF-Token header is not the session's
// with 403. Every error is a JSON body {"error":{"type","message"}} with a
// stable type (the Type... constants), which the page shows.
//
// A Server owns the environments it connected and the turns it started;
// Close cancels those turns (their runs are cancelled in the boxes) and
// closes the environments. It is safe for concurrent use.
package inspector
