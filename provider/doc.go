// Package provider is the Go client of the bridge protocol: it drives
// coding-agent runs in a bridge (ours, or the TypeScript cli-bridge) through
// environments, sessions and control references that survive a process
// restart.
//
// A Provider talks to one bridge base URL. Provider.Create returns an
// Environment for one agent profile; its Dispatch and Stream start turns,
// and Session gives control of a session's current run: cursor replay
// (Events), status, the terminal result, cancellation, interaction responses
// and native continuation. Every started run carries a ControlRef (provider,
// environment, session, execution, run id and the bridge's request digest);
// persist it before treating a dispatch as accepted. After a restart,
// Provider.Get rebuilds the environment from its id alone and
// Environment.Session(id, SessionOptions{ControlRef: ref}) re-attaches to
// exactly that run; any mismatch in a coordinate or the digest is refused
// rather than attached to another run. A reconstructed environment controls
// existing runs only: it starts no turn, except through
// Session.ContinueNative where the bridge proves native continuation.
//
// # Turn identity
//
// Every turn has a run id, a session id, an execution id and a turn id,
// all fixed before the first request. The caller may give SessionID,
// ExecutionID and TurnID; the rest is derived from what it gave, the same
// way in every process, and the same way whether the turn runs as a
// one-shot chat run or as a turn of a retained native session (the route
// an environment takes when its capability document proves
// interactions). So a plain Turn{Prompt: "hi"} works for every harness:
//
//   - ExecutionID given: the run id is the ExecutionID itself when it is
//     a valid run id, else "agent-" and the hex SHA-256 of environment id,
//     session id and ExecutionID; TurnID, if not given, is the
//     ExecutionID. A retry of the same execution (same environment,
//     session and ExecutionID) is therefore the same turn and the same
//     run, and the bridge attaches it to the run it already admitted.
//   - Only TurnID given: the run id is derived from environment id,
//     session id and TurnID the same way, and the ExecutionID is the run
//     id; retrying the same TurnID is the same run too.
//   - Neither: a fresh turn. A random nonce, drawn once per call, stands
//     in for the execution id; ExecutionID and TurnID are the run id.
//     Retrying such a call starts another run: give an ExecutionID to make
//     a retry safe.
//   - SessionID, if not given, is the run id: a new session.
//
// # Timeouts and cancellation
//
// Turn.Timeout bounds a turn on the client (the bridge offers no per-run
// timeout): when it expires before the run is terminal, the run is
// cancelled on the bridge with a reason naming the timeout, and once the
// bridge confirms it terminal the turn ends with a failed status event
// and a *TimeoutError (errors.Is ErrTurnTimeout). The caller's ctx is
// separate: ending it cancels a Stream's run too, but the error stays
// ctx's own (context.Canceled, context.DeadlineExceeded).
//
// # Streams
//
// The bridge speaks two SSE formats chosen by the `event:` field: legacy
// chat-completion chunks ending in [DONE], and canonical runtime envelopes
// ending in a terminal status event. The client rejects a stream that mixes
// them, a frame id that is not a positive, strictly increasing integer, an
// event of another run, and a terminal answer whose run id or request digest
// differs from the accepted stream. A finish frame of a direct stream is
// provisional until the bridge's aggregate result for the same run confirms
// it; a replay is confirmed by the run snapshot.
//
// Usage is reported only as truthfully as the bridge measured it: unknown
// stays unknown, an observed zero stays zero, and a served model is named
// only when the model API named it (provider_models).
//
// # Concurrency and ownership
//
// A Provider, an Environment and a Session are safe for concurrent use. The
// iterators returned by Stream and Events are single-use and must be ranged
// over by one goroutine. Breaking out of an Events loop detaches that reader
// only; breaking out of a Stream loop, or Environment.Destroy, cancels the
// runs the environment started and waits until the bridge confirms them
// terminal.
//
// A cancellation outlives the caller that asked for it when that caller
// stops waiting, and a dispatched turn's Timeout is enforced after
// Dispatch returned: the Provider owns that work. Provider.Close refuses
// new environments and turns (ErrClosed) from then on, stops enforcing
// dispatched timeouts, waits for the rest, and closes idle connections.
//
// Errors are typed (ConflictError, NotFoundError, ReconstructedError,
// IdentityMismatchError, ExpiredCursorError, TimeoutError, TransportError,
// ProtocolError, BridgeError) for errors.As; ErrDestroyed, ErrClosed and
// ErrTurnTimeout for errors.Is, and the standard library's
// errors.ErrUnsupported (vendors.ErrUnsupported) for an operation the
// environment's capability document does not claim.
package provider
