package provider

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrDestroyed is returned by every call on a destroyed environment.
var ErrDestroyed = errors.New("cli-bridge environment is destroyed")

// ErrClosed is returned, wrapped with the refused call, by Provider.Create
// and by every new turn (Dispatch, Stream, Session.Prompt,
// Session.ContinueNative) once Provider.Close was called.
var ErrClosed = errors.New("cli-bridge provider is closed")

// ErrTurnTimeout matches every *TimeoutError with errors.Is.
var ErrTurnTimeout = errors.New("cli-bridge turn timed out")

// Exact messages of the refusals of a reconstructed environment.
const (
	msgReconstructedEnvironment = "a reconstructed cli-bridge environment can only control an existing run"
	msgReconstructedSession     = "a reconstructed cli-bridge session cannot start another turn"
)

// ReconstructedError is the refusal of an environment rebuilt by
// Provider.Get to start a turn: it only controls existing runs.
type ReconstructedError struct {
	// Op is the refused call, e.g. "environment.Stream".
	Op string
	// Session is true for Session.Prompt.
	Session bool
}

func (e *ReconstructedError) Error() string {
	if e.Session {
		return msgReconstructedSession
	}
	return msgReconstructedEnvironment
}

// TimeoutError is a turn that outlived its Turn.Timeout: the client
// cancelled its run on the bridge. It is distinct from the caller's
// context: a cancelled or expired ctx is context.Canceled or
// context.DeadlineExceeded, never a *TimeoutError. errors.Is(err,
// ErrTurnTimeout) reports it too.
type TimeoutError struct {
	// Op is the bounded call, e.g. "environment.Stream".
	Op string
	// RunID is the run that was cancelled.
	RunID string
	// Timeout is the turn's Timeout.
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: %s: cli-bridge run %q was cancelled", e.Op, e.reason(), e.RunID)
}

// Is reports whether target is ErrTurnTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTurnTimeout }

// reason is the cancellation reason sent to the bridge, and the start of
// the failed status event's detail.
func (e *TimeoutError) reason() string { return "turn timeout after " + e.Timeout.String() }

// BridgeError is a request the bridge answered with a non-2xx status that
// no more specific type covers, or an error frame that ended a run.
type BridgeError struct {
	Op      string
	Status  int    // HTTP status; 0 for an error frame in a stream
	Type    string // the stable error type, e.g. "executor_saturated"
	Message string
	// RetryAfter is the Retry-After delay of a 429 or 503, zero if none.
	RetryAfter time.Duration
}

func (e *BridgeError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s: cli-bridge: %s: %s", e.Op, e.Type, e.Message)
	}
	return fmt.Sprintf("%s: cli-bridge %d %s: %s", e.Op, e.Status, e.Type, e.Message)
}

// Retryable reports whether repeating the same request later may succeed:
// saturation, an unready backend, or a bridge fault.
func (e *BridgeError) Retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// ConflictError is a 409: a run id reused for a different request
// (run_identity_conflict), a busy session (session_busy), a replay cursor
// ahead of the stream (invalid_replay_cursor), or an idempotency key reused
// with a different create request.
type ConflictError struct {
	Op      string
	Type    string
	Message string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: cli-bridge conflict %s: %s", e.Op, e.Type, e.Message)
}

// NotFoundError is an unknown run, session or model (404), or a run the
// bridge no longer retains.
type NotFoundError struct {
	Op      string
	Type    string
	Message string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s: cli-bridge not found %s: %s", e.Op, e.Type, e.Message)
}

// IdentityMismatchError is an answer or a reference that names another run
// than the one asked for: a foreign run id in a stream, a terminal response
// with another run id or digest, a snapshot with other coordinates, or a
// ControlRef that does not bind to the session.
type IdentityMismatchError struct {
	Op     string
	Reason string
}

func (e *IdentityMismatchError) Error() string { return e.Op + ": " + e.Reason }

// ExpiredCursorError is a replay cursor older than what the bridge still
// retains (410 expired_replay_cursor); the events before FirstAvailable are
// gone.
type ExpiredCursorError struct {
	Op             string
	RunID          string
	Requested      int64
	FirstAvailable int64
	Last           int64
	Message        string
}

func (e *ExpiredCursorError) Error() string {
	return fmt.Sprintf("%s: cli-bridge replay cursor %d of run %q expired (first available event %d, last %d)",
		e.Op, e.Requested, e.RunID, e.FirstAvailable, e.Last)
}

// TransportError is a request whose outcome the bridge never confirmed: a
// connection failure, a timeout, or a stream cut before its end. It is
// always retryable and never means the request was accepted.
type TransportError struct {
	Op  string
	Err error
}

func (e *TransportError) Error() string { return e.Op + ": cli-bridge transport: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// Retryable is always true.
func (e *TransportError) Retryable() bool { return true }

// GatewayError is a 502, 503 or 504 without the bridge's error envelope:
// a gateway or proxy in front of the bridge (a vendor's) could not reach
// it. It comes as the cause of a *TransportError.
type GatewayError struct {
	Status  int
	Message string
}

func (e *GatewayError) Error() string {
	return fmt.Sprintf("gateway answered %d: %s", e.Status, e.Message)
}

// ProtocolError is an answer that breaks the wire protocol: mixed stream
// formats, a bad or non-increasing frame id, a missing header, malformed
// JSON.
type ProtocolError struct {
	Op     string
	Reason string
}

func (e *ProtocolError) Error() string { return e.Op + ": " + e.Reason }
