// Package store is the bridge's durable event log: runs, their
// sequence-numbered events, exact cancellations, retained sessions and
// their turns, interactions and continuations, and harness sessions, kept in
// one SQLite database (modernc.org/sqlite, pure Go) in WAL mode with
// synchronous=FULL, so a committed event survives a crash of the process or
// of the machine.
//
// Ownership and ordering:
//   - One writer: every write runs under the Store's mutex on a
//     single-connection pool. Sequence numbers of a run are assigned inside
//     the write transaction: 1, 2, 3, ... without gaps, in commit order.
//   - Readers use a separate pool and never block the writer (WAL). A read
//     sees exactly the events committed before it started; an event is
//     visible to readers only once it is durable.
//   - Finish appends a run's last events and marks it terminal in one
//     transaction: a reader that sees a terminal run sees all its events.
//   - Retention (per run: at most MaxEvents events and MaxBytes bytes,
//     oldest dropped first; all events kept ReplayTTL after the run ended,
//     then its result only, its newest KeptResultEvents events with the
//     older ones folded into a few at the sequence numbers just before
//     them (compact.go); the run's identity kept IdentityTTL) is applied
//     by Append and Prune.
//     Whatever only serves an ended run's identity (its interactions,
//     interaction operations, continuation, retained turn) is deleted with
//     the run, in the same transaction; a closed retained session goes
//     with all of its own once it and its runs are past IdentityTTL.
//     CloseIdleSessions closes open sessions idle for SessionIdle; the
//     caller (the engine) ends their processes. Prune works in
//     transactions of at most PruneBatch rows, so readers and appends
//     wait for one batch at most. A running run is never pruned.
//
// Layout: a run's events are stored in segments, rows of up to 256
// consecutive events, one or more per Append, so SQLite's per-row cost is
// paid per batch rather than per event; readers page through them by
// sequence number as if events were rows.
//
// The Store does not notify anyone: the caller that wrote tells its readers.
package store
