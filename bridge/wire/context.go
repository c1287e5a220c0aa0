package wire

import "encoding/json"

// Portable context: a conversation exported from another environment is
// planned (POST /v1/context/plans: which messages and parts can travel,
// with no effect) and, once the caller accepts the plan, transferred
// (POST /v1/context/transfers: attached to one fresh retained session,
// whose first run carries it). The shapes are the TypeScript agent
// interface's PortableContext*, ContextPlanAcceptance and ContextTransfer*
// types; every digest is Digest of the material the interface names.

// Context plan and transfer statuses.
const (
	PlanReady       = "ready"
	PlanOverLimit   = "over_limit"
	TransferOK      = "accepted"
	TransferReplay  = "replayed"
	TransferClash   = "conflict"
	ContextComplete = "complete"
	ContextPartial  = "partial"
	ActionInclude   = "include"
	ActionOmit      = "omit"
)

// ContextSource names the run and message a portable context was exported
// at.
type ContextSource struct {
	RunID         string `json:"runId"`
	MessageID     string `json:"messageId"`
	Provider      string `json:"provider"`
	EnvironmentID string `json:"environmentId"`
	SessionID     string `json:"sessionId"`
	ExecutionID   string `json:"executionId"`
	RequestDigest string `json:"requestDigest"`
	BranchID      string `json:"branchId,omitempty"`
}

// ContextMessage is one message of a portable context; Parts are JSON
// values, of which text, file and image input parts can travel.
type ContextMessage struct {
	ID        string            `json:"id"`
	Role      string            `json:"role" jsonschema:"enum=user,enum=assistant,enum=system"`
	Parts     []json.RawMessage `json:"parts"`
	Timestamp string            `json:"timestamp"`
	Metadata  json.RawMessage   `json:"metadata,omitempty"`
}

// ContextAttachment refers to one part of a message by its digest.
type ContextAttachment struct {
	MessageID string `json:"messageId"`
	PartIndex int    `json:"partIndex"`
	Digest    string `json:"digest"`
	Name      string `json:"name,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
}

// PortableContext is a conversation as it travels. Digest covers the
// other fields.
type PortableContext struct {
	Source       ContextSource       `json:"source"`
	Completeness string              `json:"completeness" jsonschema:"enum=complete,enum=partial"`
	Messages     []ContextMessage    `json:"messages"`
	Attachments  []ContextAttachment `json:"attachments"`
	Digest       string              `json:"digest"`
}

// Material is what Digest covers.
func (c PortableContext) Material() any { return material(c, "digest") }

// ContextDestination is the fresh session a context goes to: Runner is
// the harness, and the run, execution and session ids are the caller's.
type ContextDestination struct {
	Runner        string `json:"runner"`
	Provider      string `json:"provider"`
	EnvironmentID string `json:"environmentId"`
	SessionID     string `json:"sessionId"`
	RunID         string `json:"runId"`
	ExecutionID   string `json:"executionId"`
	Model         string `json:"model,omitempty"`
	ProfileDigest string `json:"profileDigest"`
}

// ContextPlanRequest is the body of POST /v1/context/plans.
type ContextPlanRequest struct {
	RequestID      string             `json:"requestId"`
	RequestDigest  string             `json:"requestDigest"`
	Source         PortableContext    `json:"source"`
	Destination    ContextDestination `json:"destination"`
	MaxInputTokens *int64             `json:"maxInputTokens,omitempty"`
}

// Material is what RequestDigest covers.
func (r ContextPlanRequest) Material() any { return material(r, "requestDigest") }

// PartPlan decides one part: include it, or omit it for Reason.
type PartPlan struct {
	PartIndex int             `json:"partIndex"`
	Action    string          `json:"action" jsonschema:"enum=include,enum=transform,enum=omit"`
	Output    json.RawMessage `json:"output,omitempty"`
	Reason    string          `json:"reason,omitempty"`
}

// MessagePlan decides one message and each of its parts.
type MessagePlan struct {
	MessageID string     `json:"messageId"`
	Action    string     `json:"action" jsonschema:"enum=include,enum=omit"`
	Parts     []PartPlan `json:"parts"`
	Reason    string     `json:"reason,omitempty"`
}

// ContextPlan is a ready plan: the source, every decision and the context
// that results. Digest covers the other fields.
type ContextPlan struct {
	PlanID             string             `json:"planId"`
	Source             PortableContext    `json:"source"`
	Destination        ContextDestination `json:"destination"`
	Messages           []MessagePlan      `json:"messages"`
	Context            PortableContext    `json:"context"`
	EstimatedTokens    *int64             `json:"estimatedTokens,omitempty"`
	RequiresAcceptance bool               `json:"requiresAcceptance"`
	Digest             string             `json:"digest"`
}

// Material is what Digest covers.
func (p ContextPlan) Material() any { return material(p, "digest") }

// ContextPlanResult answers a plan request: Plan when ready; the estimate,
// the budget and a Message when over_limit.
type ContextPlanResult struct {
	Status          string       `json:"status" jsonschema:"enum=ready,enum=over_limit"`
	RequestID       string       `json:"requestId"`
	RequestDigest   string       `json:"requestDigest"`
	Plan            *ContextPlan `json:"plan,omitempty"`
	EstimatedTokens *int64       `json:"estimatedTokens,omitempty"`
	MaxInputTokens  *int64       `json:"maxInputTokens,omitempty"`
	Message         string       `json:"message,omitempty"`
}

// PlanAcceptance records who accepted a plan, and when.
type PlanAcceptance struct {
	PlanDigest string `json:"planDigest"`
	AcceptedAt string `json:"acceptedAt"`
	AcceptedBy string `json:"acceptedBy" jsonschema:"enum=user,enum=policy,enum=system"`
}

// ContextTransferRequest is the body of POST /v1/context/transfers.
// RequestDigest is Digest of {operationId, planDigest, acceptance}.
type ContextTransferRequest struct {
	OperationID   string         `json:"operationId"`
	RequestDigest string         `json:"requestDigest"`
	Plan          ContextPlan    `json:"plan"`
	Acceptance    PlanAcceptance `json:"acceptance"`
}

// Material is what RequestDigest covers.
func (r ContextTransferRequest) Material() any {
	return map[string]any{"operationId": r.OperationID, "planDigest": r.Plan.Digest, "acceptance": r.Acceptance}
}

// ContextTransferReceipt answers an accepted or replayed transfer: the
// fresh session and run the context went to, created for this operation,
// and which messages travelled.
type ContextTransferReceipt struct {
	Status                     string             `json:"status" jsonschema:"enum=accepted,enum=replayed"`
	OperationID                string             `json:"operationId"`
	RequestDigest              string             `json:"requestDigest"`
	PlanDigest                 string             `json:"planDigest"`
	ContextDigest              string             `json:"contextDigest"`
	Source                     ContextSource      `json:"source"`
	Destination                ContextDestination `json:"destination"`
	Provider                   string             `json:"provider"`
	EnvironmentID              string             `json:"environmentId"`
	SessionID                  string             `json:"sessionId"`
	RunID                      string             `json:"runId"`
	ExecutionID                string             `json:"executionId"`
	SessionCreatedForOperation string             `json:"sessionCreatedForOperationId"`
	SessionCreatedAt           string             `json:"sessionCreatedAt"`
	TransferredMessageIDs      []string           `json:"transferredMessageIds"`
	OmittedMessageIDs          []string           `json:"omittedMessageIds"`
	AdmittedAt                 string             `json:"admittedAt"`
}

// ContextTransferConflict answers a transfer whose operation id is bound
// to a different request: ExistingRequestDigest is that request's.
type ContextTransferConflict struct {
	Status                string `json:"status" jsonschema:"enum=conflict"`
	OperationID           string `json:"operationId"`
	RequestDigest         string `json:"requestDigest"`
	ExistingRequestDigest string `json:"existingRequestDigest"`
}
