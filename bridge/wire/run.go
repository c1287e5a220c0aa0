package wire

// Run statuses: the outcome of a run.
const (
	StatusRunning   = "running"
	StatusDone      = "done"
	StatusError     = "error"
	StatusCancelled = "cancelled"
	StatusUnknown   = "unknown"
)

// Run states: the process lifecycle, separate from the outcome.
const (
	StateRunning    = "running"
	StateDetached   = "detached"
	StateCancelling = "cancelling"
	StateTerminal   = "terminal"
)

// DefaultEnvironmentID is the environment id of a run whose request named
// no coordinates (provider, environment_id, execution_id): the one the
// TypeScript bridge publishes on such runs.
const DefaultEnvironmentID = "cli-bridge"

// MaxWaitMS is the longest wait_ms a run route accepts.
const MaxWaitMS = 30000

// RunSnapshot is GET /v1/runs/:id. Times are Unix milliseconds.
type RunSnapshot struct {
	ID                string       `json:"id"`
	RequestDigest     string       `json:"requestDigest"`
	Status            string       `json:"status"`
	State             string       `json:"state"`
	Terminal          bool         `json:"terminal"`
	AttachedReaders   int          `json:"attachedReaders"`
	CancelRequestedAt *int64       `json:"cancelRequestedAt"`
	LastSeq           int64        `json:"lastSeq"`
	Replay            ReplayWindow `json:"replay"`
	StartedAt         int64        `json:"startedAt"`
	EndedAt           *int64       `json:"endedAt"`
	IdentityExpiresAt *int64       `json:"identityExpiresAt"`
	LifetimeExpiresAt *int64       `json:"lifetimeExpiresAt"`
	Provider          string       `json:"provider,omitempty"`
	EnvironmentID     string       `json:"environmentId,omitempty"`
	SessionID         string       `json:"sessionId,omitempty"`
	ExecutionID       string       `json:"executionId,omitempty"`
	Model             string       `json:"model,omitempty"`
	Error             *RunError    `json:"error,omitempty"`
	// Harness says how the run's harness process came to serve it (a
	// boxctl extension; absent before the process started, and for a
	// run no process served).
	Harness *HarnessStart `json:"harness,omitempty"`
}

// How a run's harness process came to serve it (HarnessStart.Process).
const (
	// HarnessSpare: a process started ahead of the turn, with nothing of
	// the turn in it, was handed the turn.
	HarnessSpare = "spare"
	// HarnessKept: the session's process, kept from its previous turn.
	HarnessKept = "kept"
	// HarnessStarted: a process started for this turn (Reason says why).
	HarnessStarted = "started"
)

// Why a run's harness process was started for its turn
// (HarnessStart.Reason).
const (
	// StartSettingsChanged: a process was ready, for other settings
	// (HarnessStart.Changed names them).
	StartSettingsChanged = "settings_changed"
	// StartEnvironmentChanged: the box's claim changed the environment
	// the ready process had, and its successor was not ready yet.
	StartEnvironmentChanged = "environment_changed"
	// StartNoneReady: no process was ready (the session's first turn, a
	// turn before the box's process started, a busy machine).
	StartNoneReady = "none_ready"
	// StartExited: the ready process had exited.
	StartExited = "exited"
	// StartSpareFailed: the ready process did not take the turn's input.
	StartSpareFailed = "spare_failed"
	// StartConfined: a confined turn starts a process of its own.
	StartConfined = "confined"
	// StartNotSupported: the harness is not started ahead of its turns.
	StartNotSupported = "not_supported"
	// StartDisabled: the bridge starts no process ahead (BRIDGE_SPARES=0).
	StartDisabled = "disabled"
)

// HarnessStart says how a run's harness process came to serve it: handed
// the turn ready, or started for it and why.
type HarnessStart struct {
	// Process is spare, kept or started.
	Process string `json:"process"`
	// Reason, for a started process, is why no ready one took the turn.
	Reason string `json:"reason,omitempty"`
	// Changed names the settings of the turn that differed from the
	// ready process's (settings_changed): harness, binary, model, system,
	// cwd, env, effort, session, model_endpoint, confinement.
	Changed []string `json:"changed,omitempty"`
}

// RunError says why a run ended in error or was cancelled.
type RunError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ReplayWindow describes what of a run can still be replayed. A cursor of
// FirstAvailableSeq-1 is valid. ExpiresAt is set once the run is terminal.
type ReplayWindow struct {
	FirstAvailableSeq int64  `json:"firstAvailableSeq"`
	LastSeq           int64  `json:"lastSeq"`
	RetainedDeltas    int64  `json:"retainedDeltas"`
	MaxRetainedDeltas int64  `json:"maxRetainedDeltas"`
	RetainedBytes     int64  `json:"retainedBytes"`
	MaxRetainedBytes  int64  `json:"maxRetainedBytes"`
	ExpiresAt         *int64 `json:"expiresAt"`
	Expired           bool   `json:"expired"`
}

// CancelResponse answers a plain POST /v1/runs/:id/cancel.
type CancelResponse struct {
	Cancelled       bool        `json:"cancelled"`
	CancelRequested bool        `json:"cancel_requested"`
	Terminal        bool        `json:"terminal"`
	Run             RunSnapshot `json:"run"`
}

// RunRef names one run exactly, as an exact cancellation carries it.
type RunRef struct {
	RunID         string `json:"runId"`
	Provider      string `json:"provider"`
	EnvironmentID string `json:"environmentId"`
	SessionID     string `json:"sessionId"`
	ExecutionID   string `json:"executionId"`
	RequestDigest string `json:"requestDigest"`
}

// CancellationRequest is the body of an exact cancellation. RequestDigest
// is CancellationDigest of the other fields: the bridge refuses a request
// whose digest is missing or does not match, and echoes it in the
// acknowledgement.
type CancellationRequest struct {
	OperationID   string `json:"operationId"`
	Run           RunRef `json:"run"`
	Reason        string `json:"reason,omitempty"`
	RequestDigest string `json:"requestDigest"`
}

// MaxCancellationReason is the longest cancellation reason, in UTF-16
// code units, the agent interface accepts.
const MaxCancellationReason = 2048

// CancellationDigest is the request digest of an exact cancellation: the
// canonical digest of {operationId, run, reason} (reason only when set),
// as the TypeScript agent interface computes it
// (agentRunCancellationRequestDigest). r.RequestDigest is ignored.
func CancellationDigest(r CancellationRequest) (string, error) {
	return Digest(struct {
		OperationID string `json:"operationId"`
		Run         RunRef `json:"run"`
		Reason      string `json:"reason,omitempty"`
	}{r.OperationID, r.Run, r.Reason})
}

// Cancellation acknowledgement statuses.
const (
	CancelAccepted = "accepted"
	CancelReplayed = "replayed"
	CancelConflict = "conflict"
	CancelUnknown  = "unknown"
)

// Cancellation effects.
const (
	EffectCancelRequested = "cancel_requested"
	EffectCancelled       = "cancelled"
	EffectNotLive         = "not_live"
	EffectUnknown         = "unknown"
)

// CancellationAck acknowledges an exact cancellation. The bridge stores it
// per OperationID; repeating the operation returns it with status replayed.
type CancellationAck struct {
	OperationID           string `json:"operationId"`
	RequestDigest         string `json:"requestDigest"`
	Run                   RunRef `json:"run"`
	Status                string `json:"status"`
	Effect                string `json:"effect"`
	Message               string `json:"message,omitempty"`
	Retryable             *bool  `json:"retryable,omitempty"`
	ExistingRequestDigest string `json:"existingRequestDigest,omitempty"`
}
