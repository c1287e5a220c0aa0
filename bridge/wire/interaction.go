package wire

import "encoding/json"

// InteractionBinding names the one interaction a response answers, inside
// one exact run.
type InteractionBinding struct {
	RunID         string `json:"runId"`
	Provider      string `json:"provider"`
	EnvironmentID string `json:"environmentId"`
	SessionID     string `json:"sessionId"`
	ExecutionID   string `json:"executionId"`
	InteractionID string `json:"interactionId"`
	RequestDigest string `json:"requestDigest"`
}

// Interaction response outcomes.
const (
	OutcomeAccepted  = "accepted"
	OutcomeDeclined  = "declined"
	OutcomeCancelled = "cancelled"
)

// InteractionResponse is the answer to one interaction. ID equals the
// bound interaction id.
type InteractionResponse struct {
	ID      string          `json:"id"`
	Outcome string          `json:"outcome"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// InteractionCommand is the body of POST
// /v1/runs/:runId/interactions/:interactionId/respond. CommandDigest is
// Digest({"binding", "response"}); OperationID makes the command retry-safe.
type InteractionCommand struct {
	OperationID   string              `json:"operationId"`
	Binding       InteractionBinding  `json:"binding"`
	CommandDigest string              `json:"commandDigest"`
	Response      InteractionResponse `json:"response"`
}

// Interaction acknowledgement statuses.
const (
	InteractionAccepted                 = "accepted"
	InteractionAlreadyResolvedSame      = "already_resolved_same"
	InteractionAlreadyResolvedDifferent = "already_resolved_different"
	InteractionExpired                  = "expired"
	InteractionCancelled                = "cancelled"
	InteractionUnknownInteraction       = "unknown_interaction"
	InteractionUnknownRun               = "unknown_run"
	InteractionBindingMismatch          = "binding_mismatch"
	InteractionInvalidResponse          = "invalid_response"
	InteractionTransportFailure         = "transport_failure"
)

// InteractionAck acknowledges one interaction command. The bridge stores it
// per OperationID and answers a repeated operation with the stored value.
type InteractionAck struct {
	OperationID   string             `json:"operationId"`
	Binding       InteractionBinding `json:"binding"`
	CommandDigest string             `json:"commandDigest"`
	Status        string             `json:"status"`
	Message       string             `json:"message,omitempty"`
	Retryable     *bool              `json:"retryable,omitempty"`
}

// InteractionHTTPStatus is the HTTP status that carries an acknowledgement
// status. A retryable transport_failure may also come with 429.
func InteractionHTTPStatus(status string) int {
	switch status {
	case InteractionAccepted, InteractionAlreadyResolvedSame:
		return 200
	case InteractionInvalidResponse:
		return 400
	case InteractionUnknownRun, InteractionUnknownInteraction:
		return 404
	case InteractionAlreadyResolvedDifferent, InteractionExpired, InteractionCancelled, InteractionBindingMismatch:
		return 409
	default:
		return 502
	}
}
