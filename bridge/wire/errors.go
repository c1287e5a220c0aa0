package wire

import (
	"fmt"
	"net/http"
)

// Error types: the stable `type` string of an error body, one per cause.
// Clients branch on these, never on messages.
const (
	// TypeInvalidRequest is a malformed or inconsistent request (400).
	TypeInvalidRequest = "invalid_request_error"
	// TypeInvalidAuthentication is a missing or wrong bearer token (401).
	TypeInvalidAuthentication = "invalid_authentication_error"
	// TypeNotFound is an unknown run, route or model (404). An unknown
	// model carries Code CodeModelNotFound, as the TypeScript bridge
	// answers it with this type.
	TypeNotFound = "not_found_error"
	// TypeMethodNotAllowed is a known route called with the wrong method (405).
	TypeMethodNotAllowed = "method_not_allowed"
	// TypeRunIdentityConflict is a run id reused for a different request (409).
	TypeRunIdentityConflict = "run_identity_conflict"
	// TypeSessionBusy is a turn on a session that already has a live run (409).
	TypeSessionBusy = "session_busy"
	// TypeInvalidReplayCursor is a replay cursor ahead of the stream (409).
	TypeInvalidReplayCursor = "invalid_replay_cursor"
	// TypeExpiredReplayCursor is a replay cursor older than the retained window (410).
	TypeExpiredReplayCursor = "expired_replay_cursor"
	// TypeRequestTooLarge is a request body over the bridge's limit (413).
	TypeRequestTooLarge = "request_too_large"
	// TypeExecutorSaturated means too many concurrent runs (429, with Retry-After).
	TypeExecutorSaturated = "executor_saturated"
	// TypeBackendNotReady is a harness whose binary does not answer (503).
	TypeBackendNotReady = "backend_not_ready"
	// TypeServerError is a fault of the bridge itself (500).
	TypeServerError = "server_error"
	// TypeBridgeCrashLoop is a box whose serving bridge kept crashing and
	// is no longer restarted (503): its supervisor answers every route.
	TypeBridgeCrashLoop = "bridge_crash_loop"
)

// Error types that end a run's event stream (carried in an error frame).
const (
	// TypeHarnessError is a harness that failed the turn: a model API
	// error, a non-zero exit, or output it could not finish.
	TypeHarnessError = "harness_error"
	// TypeHarnessUnavailable is a harness binary that could not be started.
	TypeHarnessUnavailable = "harness_unavailable"
	// TypeHarnessTimeout is a turn that outlived its deadline.
	TypeHarnessTimeout = "harness_timeout"
	// TypeHarnessStalled is a harness that printed nothing for too long.
	TypeHarnessStalled = "harness_stalled"
	// TypeRunCancelled is a run stopped by a cancel request.
	TypeRunCancelled = "run_cancelled"
	// TypeBridgeRestarted is a run that was live when the bridge died.
	TypeBridgeRestarted = "bridge_restarted"
	// TypeBridgeShutdown is a run stopped because the bridge shut down.
	TypeBridgeShutdown = "bridge_shutdown"
)

// CodeModelNotFound is the Code of a TypeNotFound error for a model id that
// names no registered harness.
const CodeModelNotFound = "model_not_found"

// ErrorBody is the `error` object of an error response or error frame.
// Replay cursor errors also carry the run and cursor fields; a run
// identity conflict carries the run and both request digests, as the
// TypeScript bridge's does.
type ErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Status  int    `json:"status,omitempty"`
	// Code is an optional finer cause within Type.
	Code string `json:"code,omitempty"`

	RunID                 string `json:"run_id,omitempty"`
	RequestedEventID      *int64 `json:"requested_event_id,omitempty"`
	FirstAvailableEventID *int64 `json:"first_available_event_id,omitempty"`
	LastEventID           *int64 `json:"last_event_id,omitempty"`

	// ExpectedRequestDigest is the digest the run id is bound to;
	// ReceivedRequestDigest the digest of the refused request.
	ExpectedRequestDigest string `json:"expected_request_digest,omitempty"`
	ReceivedRequestDigest string `json:"received_request_digest,omitempty"`
}

// ErrorResponse is the JSON body of every non-2xx answer: {"error":{...}}.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// Error makes ErrorBody usable as a Go error.
func (e *ErrorBody) Error() string { return e.Type + ": " + e.Message }

// StatusFor returns the HTTP status the bridge answers for an error type,
// or 500 for a type it does not know.
func StatusFor(typ string) int {
	switch typ {
	case TypeInvalidRequest, TypeSandboxUnsupported:
		return http.StatusBadRequest
	case TypeInvalidAuthentication:
		return http.StatusUnauthorized
	case TypeNotFound:
		return http.StatusNotFound
	case TypeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case TypeRunIdentityConflict, TypeSessionBusy, TypeInvalidReplayCursor,
		TypeSessionConflict, TypeTurnConflict, TypeSessionClosed, TypeEnvironmentConflict, TypeAlreadyClaimed:
		return http.StatusConflict
	case TypeExpiredReplayCursor:
		return http.StatusGone
	case TypeFileTooLarge:
		return http.StatusUnprocessableEntity
	case TypeRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case TypeExecutorSaturated, TypeInputQueueFull:
		return http.StatusTooManyRequests
	case TypeInputQueueTimeout:
		return http.StatusRequestTimeout
	case TypeBackendNotReady, TypeBridgeCrashLoop, TypeStandby:
		return http.StatusServiceUnavailable
	case TypeNotConfigured, TypeExecutorMisconfigured, TypeCapabilityDenied:
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// Fault is the error of a failure of the bridge's own while it did op
// ("load run"): it is answered as a server error that says op alone, and
// wraps cause, which the bridge logs and never sends.
func Fault(op string, cause error) error {
	return fmt.Errorf("%w: %w", &ErrorBody{Type: TypeServerError, Message: op}, cause)
}
