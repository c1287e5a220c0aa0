// Package engine runs harness turns: one process group per run, its output
// parsed by the harness adapter into chat.completion.chunk frames that are
// committed to the store before anyone can read them.
//
// Ownership: the Engine owns the set of live runs (admission, identity,
// cancellation); each live run is owned by one goroutine that owns its
// process, parser and pending frames. Every kind of run (one-shot, a
// retained turn in a process of its own, a retained turn in its session's
// long-lived process) reads its harness through the same driver
// (driver.go), which also enforces the watchdogs and cancellation. It
// hands batches of frames, in
// order, to the run's committer goroutine, the only writer of that run's
// events, so output is parsed while the previous batch is made durable.
// Readers never talk to either: they read committed events from the store
// and wait on a broadcast that the committer fires after each commit
// without ever blocking. A slow reader therefore only falls behind
// and catches up from the store; it cannot slow the harness or other readers.
//
// Ordering: a run's frames have sequence numbers 1..n in the order the
// harness printed them (a retained run's text deltas that arrive in one
// batch go out as one part update); the terminal frame(s) and the terminal status are
// committed together, so a reader that sees the run terminal has seen every
// frame. Only Cancel, the run's deadline, the no-output watchdog, and Close
// stop a harness; detaching a reader never does.
//
// Retained sessions of a harness.Persistent adapter keep one harness
// process per session across turns (session_proc.go): a turn takes it
// from the engine's registry, writes its input line and ends at its
// terminal event; between turns it waits SessionIdleTimeout, and at most
// MaxSessionProcs wait at once (the one idle longest is ended). A process
// that died is replaced by a fresh one resuming the session, and each run
// records the process's group and marker for crash recovery. A
// harness.Conversant adapter, whose harness speaks a request-and-response
// protocol on stdio (JSON-RPC), has its process driven through its
// Conversation, which the process keeps: the handshake is written when it
// starts, a turn's input when the conversation has it ready, the
// conversation's reply after each output line (only the lines it says are
// the turn's reach the parser), and its interrupt on a cancel.
//
// Crash recovery: New ends every run the store still marks running: it
// kills leftover processes of the previous incarnation (found by the
// recorded process group and an environment marker inherited by the
// harness's children) and finishes the run as an error that names the
// restart.
package engine
