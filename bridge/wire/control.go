package wire

import "encoding/json"

// SteerRequest is the body of POST /v1/sessions/:id/steer: more input for
// the turn the session's run is running. Run names that run exactly.
type SteerRequest struct {
	OperationID string `json:"operationId"`
	Run         RunRef `json:"run"`
	Message     string `json:"message"`
}

// Control acknowledgement statuses of a steer.
const (
	ControlAccepted         = "accepted"
	ControlUnknownRun       = "unknown_run"
	ControlCapabilityDenied = "capability_denied"
	ControlConflict         = "conflict"
	ControlEffectUnknown    = "effect_unknown"
)

// ControlKindSteer is the Kind of a steer's acknowledgement.
const ControlKindSteer = "steer"

// ControlAck acknowledges a steer. The bridge stores it per OperationID;
// repeating the operation returns it.
type ControlAck struct {
	OperationID           string `json:"operationId"`
	Kind                  string `json:"kind"`
	SessionID             string `json:"sessionId"`
	RunID                 string `json:"runId"`
	Status                string `json:"status"`
	Message               string `json:"message,omitempty"`
	Retryable             *bool  `json:"retryable,omitempty"`
	ExistingRequestDigest string `json:"existingRequestDigest,omitempty"`
}

// SessionDetach answers POST /v1/sessions/:id/detach: the bridge keeps
// the session and its run; a reader that goes only detaches itself.
type SessionDetach struct {
	Detached bool        `json:"detached"`
	Session  SessionView `json:"session"`
}

// SessionDelete answers DELETE /v1/sessions/:id: whether a chat session's
// mapping to its harness's own session was deleted.
type SessionDelete struct {
	Deleted bool `json:"deleted"`
}

// TranscriptMessage is one assistant message of a transcript: its parts,
// each at its latest update.
type TranscriptMessage struct {
	ID    string            `json:"id"`
	Role  string            `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

// Transcript answers GET /v1/sessions/:id/transcript: the session's
// retained events folded into messages, with its interactions, its usage
// events, how many events there were and the cursor of the last one.
type Transcript struct {
	SessionID    string              `json:"session_id"`
	Messages     []TranscriptMessage `json:"messages"`
	Interactions []json.RawMessage   `json:"interactions"`
	Usage        []json.RawMessage   `json:"usage"`
	EventCount   int64               `json:"event_count"`
	LastEventID  *string             `json:"last_event_id"`
}

// Profile is one entry of GET /v1/profiles: a profile of the bridge's
// catalog, its id the file name without ".json".
type Profile struct {
	ID          string   `json:"id"`
	Name        string   `json:"name,omitempty"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	LoadedAt    string   `json:"loadedAt"`
}

// ProfileList answers GET /v1/profiles.
type ProfileList struct {
	Object string    `json:"object"`
	Data   []Profile `json:"data"`
}

// ProfileDocument answers GET /v1/profiles/:id: the whole profile.
type ProfileDocument struct {
	ID      string          `json:"id"`
	Profile json.RawMessage `json:"profile"`
}

// Error types of the input queue of POST /v1/sessions/:id/input.
const (
	// TypeInputQueueFull: as many inputs wait for the session as it
	// takes (429).
	TypeInputQueueFull = "input_queue_full"
	// TypeInputQueueTimeout: the session's run did not end in time (408).
	TypeInputQueueTimeout = "input_queue_timeout"
)
