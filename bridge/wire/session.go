package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Interaction policies of a retained native session.
const (
	PolicyInteractive     = "interactive"
	PolicyUnattendedDeny  = "unattended-deny"
	PolicyUnattendedAllow = "unattended-allow"
)

// SessionCreateRequest is the body of POST /v1/sessions. Unknown fields are
// rejected by the bridge.
type SessionCreateRequest struct {
	ID                string            `json:"id"`
	Model             string            `json:"model"`
	InteractionPolicy string            `json:"interaction_policy"`
	Mode              string            `json:"mode,omitempty"`
	Cwd               *string           `json:"cwd,omitempty"`
	Execution         json.RawMessage   `json:"execution,omitempty"`
	AgentProfile      json.RawMessage   `json:"agent_profile,omitempty"`
	Env               map[string]string `json:"env,omitempty"`
	Metadata          map[string]any    `json:"metadata,omitempty"`
	ProviderOptions   map[string]any    `json:"provider_options,omitempty"`
}

// Retained session statuses (SessionView.Status), as the TypeScript
// bridge derives them from the session and its latest run.
const (
	SessionCreated   = "created"
	SessionIdle      = "idle"
	SessionRunning   = "running"
	SessionCancelled = "cancelled"
	SessionClosed    = "closed"
	SessionUnknown   = "unknown"
)

// SessionObject is the `object` of a SessionView.
const SessionObject = "session"

// SessionView is a retained native session as the session routes return
// it. CreateRequestDigest is Digest of the create request; ContextBoundary
// is null until a turn was admitted. Backend is the harness name; Status
// one of the Session* statuses; RunID the run of the latest turn and Run
// its snapshot (null and absent before the first turn);
// InternalSessionID the harness's own session id once it reported one;
// Turns counts the turns that completed. Times are RFC 3339.
type SessionView struct {
	ID                  string         `json:"id"`
	Object              string         `json:"object"`
	Model               string         `json:"model"`
	Backend             string         `json:"backend"`
	Status              string         `json:"status"`
	CreateRequestDigest string         `json:"create_request_digest"`
	InteractionPolicy   string         `json:"interaction_policy"`
	Closed              bool           `json:"closed"`
	RunID               *string        `json:"run_id"`
	InternalSessionID   *string        `json:"internal_session_id"`
	Turns               int64          `json:"turns"`
	CreatedAt           string         `json:"created_at"`
	UpdatedAt           string         `json:"updated_at"`
	ContextBoundary     *BoundaryProof `json:"context_boundary"`
	Run                 *RunSnapshot   `json:"run,omitempty"`
}

// SessionStop answers POST /v1/sessions/:id/close: the session after it,
// and, when the session had a run, what happened to it (the run
// snapshot, whether cancellation was requested, whether the run ended
// cancelled, whether it is terminal). POST /v1/sessions/:id/cancel takes
// an exact cancellation and answers a CancellationAck.
type SessionStop struct {
	Closed          bool         `json:"closed,omitempty"`
	CancelRequested *bool        `json:"cancel_requested,omitempty"`
	Cancelled       *bool        `json:"cancelled,omitempty"`
	Terminal        *bool        `json:"terminal,omitempty"`
	Run             *RunSnapshot `json:"run,omitempty"`
	Session         SessionView  `json:"session"`
}

// SessionList answers GET /v1/sessions.
type SessionList struct {
	Object string        `json:"object"`
	Data   []SessionView `json:"data"`
}

// ContextBoundary is an opaque marker of a conversation's state. Kind is
// token, revision, digest or messages; the other fields belong to a kind.
type ContextBoundary struct {
	Kind       string   `json:"kind"`
	Token      string   `json:"token,omitempty"`
	Revision   string   `json:"revision,omitempty"`
	Digest     string   `json:"digest,omitempty"`
	MessageIDs []string `json:"messageIds,omitempty"`
}

// BoundaryProof binds a context boundary to the exact run that produced it.
// ObservedAt is an RFC 3339 time.
type BoundaryProof struct {
	RunID         string          `json:"runId"`
	Provider      string          `json:"provider"`
	EnvironmentID string          `json:"environmentId"`
	SessionID     string          `json:"sessionId"`
	ExecutionID   string          `json:"executionId"`
	RequestDigest string          `json:"requestDigest"`
	Boundary      ContextBoundary `json:"boundary"`
	ObservedAt    string          `json:"observedAt"`
}

// TurnRequest is the body of POST /v1/sessions/:id/turns: Message or Parts,
// and the caller-stable turn, execution and run ids. ExecutionID defaults
// to TurnID, as in the TypeScript bridge.
type TurnRequest struct {
	Message         string          `json:"message,omitempty"`
	Parts           json.RawMessage `json:"parts,omitempty"`
	TurnID          string          `json:"turn_id"`
	ExecutionID     string          `json:"execution_id,omitempty"`
	RunID           string          `json:"run_id"`
	Provider        string          `json:"provider"`
	EnvironmentID   string          `json:"environment_id"`
	Interactions    json.RawMessage `json:"interactions,omitempty"`
	Context         map[string]any  `json:"context,omitempty"`
	ProviderOptions map[string]any  `json:"provider_options,omitempty"`
	// History is the conversation before this turn, user and assistant
	// messages in order, for a session continued from another box: a
	// session whose harness holds no conversation yet gets it as a
	// transcript before the message; one whose harness holds it ignores
	// it. A boxctl extension; the digest covers it.
	History []Message `json:"history,omitempty"`
}

// MaxHistory bounds a turn's History: messages, and bytes of content.
const (
	MaxHistoryMessages = 2000
	MaxHistoryBytes    = 4 << 20
)

// CheckHistory checks a turn's History: user and assistant messages
// only, with text content, within MaxHistoryMessages and MaxHistoryBytes.
func CheckHistory(h []Message) error {
	if len(h) > MaxHistoryMessages {
		return fmt.Errorf("history: at most %d messages", MaxHistoryMessages)
	}
	size := 0
	for i, m := range h {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("history[%d]: role %q, want user or assistant", i, m.Role)
		}
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" {
			return fmt.Errorf("history[%d]: tool calls do not travel", i)
		}
		size += len(m.Content)
	}
	if size > MaxHistoryBytes {
		return fmt.Errorf("history: at most %d bytes of content", MaxHistoryBytes)
	}
	return nil
}

// Prompt is the prompt of a turn: its message, or the text of its parts
// (text parts only), joined by blank lines.
func (req TurnRequest) Prompt() (string, error) {
	if len(req.Parts) == 0 || string(req.Parts) == "null" {
		return req.Message, nil
	}
	if req.Message != "" {
		return "", errors.New("give message or parts, not both")
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Parts, &parts); err != nil {
		return "", errors.New("parts must be an array of {type, text} objects")
	}
	var texts []string
	for i, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("parts[%d].type %q is not supported (only text)", i, p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n\n"), nil
}

// TurnAdmission answers an admitted turn (202): the session, the run and
// the session's context boundary after the turn.
type TurnAdmission struct {
	Session         SessionView    `json:"session"`
	Run             AdmittedRun    `json:"run"`
	ContextBoundary *BoundaryProof `json:"context_boundary"`
}

// AdmittedRun names the run a turn admission started.
type AdmittedRun struct {
	ID            string `json:"id"`
	Provider      string `json:"provider"`
	EnvironmentID string `json:"environmentId"`
	SessionID     string `json:"sessionId"`
	ExecutionID   string `json:"executionId"`
	RequestDigest string `json:"requestDigest"`
}

// ContinuationTurn is the user turn a native continuation admits.
type ContinuationTurn struct {
	Prompt          string          `json:"prompt,omitempty"`
	Parts           json.RawMessage `json:"parts,omitempty"`
	Model           string          `json:"model,omitempty"`
	Context         map[string]any  `json:"context,omitempty"`
	ProviderOptions map[string]any  `json:"providerOptions,omitempty"`
}

// ContinuationRequest names the run and boundary a continuation expects.
// TurnDigest is Digest(turn); RequestDigest is Digest of
// {"turnDigest", "operationId", "run", "expectedBoundary"}.
type ContinuationRequest struct {
	OperationID      string        `json:"operationId"`
	RequestDigest    string        `json:"requestDigest"`
	TurnDigest       string        `json:"turnDigest"`
	Run              RunRef        `json:"run"`
	ExpectedBoundary BoundaryProof `json:"expectedBoundary"`
}

// ContinuationTurnDigest is the turnDigest of a continuation's turn: its
// canonical digest (nativeContextContinuationTurnDigest).
func ContinuationTurnDigest(t ContinuationTurn) (string, error) { return Digest(t) }

// ContinuationRequestDigest is the requestDigest of a continuation
// request: the canonical digest of {turnDigest, operationId, run,
// expectedBoundary} (nativeContextContinuationRequestDigest).
// r.RequestDigest is ignored.
func ContinuationRequestDigest(r ContinuationRequest) (string, error) {
	return Digest(map[string]any{"turnDigest": r.TurnDigest, "operationId": r.OperationID, "run": r.Run,
		"expectedBoundary": r.ExpectedBoundary})
}

// ContinueBody is the body of POST /v1/sessions/:id/continue.
type ContinueBody struct {
	Request ContinuationRequest `json:"request"`
	Turn    ContinuationTurn    `json:"turn"`
}

// Native continuation acknowledgement statuses.
const (
	ContinuationAccepted         = "accepted"
	ContinuationReplayed         = "replayed"
	ContinuationConflict         = "conflict"
	ContinuationBoundaryMismatch = "boundary_mismatch"
	ContinuationUnverified       = "unverified"
	ContinuationUnknownSession   = "unknown_session"
	ContinuationTransportFailure = "transport_failure"
)

// ContinuationAck acknowledges one continuation request.
type ContinuationAck struct {
	OperationID           string         `json:"operationId"`
	RequestDigest         string         `json:"requestDigest"`
	Status                string         `json:"status"`
	HistoryMessagesSent   int            `json:"historyMessagesSent"`
	ExistingRequestDigest string         `json:"existingRequestDigest,omitempty"`
	ActualBoundary        *BoundaryProof `json:"actualBoundary,omitempty"`
	Message               string         `json:"message,omitempty"`
	Retryable             *bool          `json:"retryable,omitempty"`
}

// ContinuationOutcome answers a continuation: the acknowledgement, and for
// accepted or replayed the turn's result and the new run.
type ContinuationOutcome struct {
	Acknowledgement ContinuationAck     `json:"acknowledgement"`
	Result          *ContinuationResult `json:"result,omitempty"`
	ControlRef      *RunRef             `json:"controlRef,omitempty"`
}

// ContinuationResult is the terminal result of a continued turn, the
// agent interface's AgentTurnResult: its visible text, its summed usage,
// its run's identity and status in Metadata (runId, executionId,
// requestDigest, status), and its newest events.
type ContinuationResult struct {
	Text      string             `json:"text"`
	Success   bool               `json:"success"`
	Error     string             `json:"error,omitempty"`
	SessionID string             `json:"sessionId,omitempty"`
	Usage     *TokenUsage        `json:"usage,omitempty"`
	Metadata  map[string]any     `json:"metadata,omitempty"`
	Events    []EnvironmentEvent `json:"events,omitempty"`
}

// Envelope is the data of a canonical SSE frame: one runtime event with its
// run, identity and sequence. Event.type equals the frame's `event:` field.
type Envelope struct {
	RunID      string          `json:"runId"`
	EventID    string          `json:"eventId"`
	Sequence   int64           `json:"sequence"`
	Cursor     string          `json:"cursor,omitempty"`
	OccurredAt string          `json:"occurredAt,omitempty"`
	ReceivedAt string          `json:"receivedAt"`
	Event      json.RawMessage `json:"event"`
}
