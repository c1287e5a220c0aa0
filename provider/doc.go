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
// terminal. Errors are typed (ConflictError, NotFoundError,
// ReconstructedError, IdentityMismatchError, ExpiredCursorError,
// TransportError, ProtocolError, BridgeError) for errors.As.
package provider
