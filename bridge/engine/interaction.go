package engine

import (
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// interactionEvent is an `interaction` event.
type interactionEvent struct {
	Type    string                  `json:"type"`
	Request wire.InteractionRequest `json:"request"`
}

// interactionCancelEvent is an `interaction.cancel` event.
type interactionCancelEvent struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// interactionRequest is the request of the interaction id that question q
// of run raises, in the shape of the agent interface: a permission kind
// answered with the permission answer spec (its feedback field where the
// harness takes the feedback), for this interaction only,
// about the tool q names (with its input when that is within the
// interface's bounds), bound to the run and digested.
func interactionRequest(q harness.Question, id string, run store.Run, feedback bool) (wire.InteractionRequest, error) {
	title := strings.TrimSpace(q.Title)
	if title == "" {
		title = "Allow " + q.Tool + "?"
	}
	ir := wire.InteractionRequest{
		ID: id, Kind: wire.InteractionKindPermission, Title: wire.TruncateJS(title, wire.MaxContractString),
		AnswerSpec: wire.PermissionAnswerSpec(feedback), ResponseScopes: []string{wire.ScopeInteraction},
		Binding: wire.InteractionRequestBinding{RunID: run.ID, Provider: run.Provider, EnvironmentID: run.EnvironmentID,
			SessionID: run.SessionID, ExecutionID: run.ExecutionID, InteractionID: id},
	}
	if q.Kind != "" {
		ir.Kind = identifier(q.Kind, wire.InteractionKindPermission)
	}
	if tool := q.Tool; tool != "" && tool == wire.TrimJS(tool) && len(tool) <= wire.MaxContractIdentifier {
		ir.Subject = &wire.InteractionSubject{Type: wire.SubjectTool, ToolName: tool}
		if in := q.Input; len(in) > 0 && in[0] == '{' && wire.BoundedJSON(in) {
			ir.Subject.Input = in
		}
	}
	d, err := wire.InteractionRequestDigest(ir)
	if err != nil {
		return wire.InteractionRequest{}, err
	}
	ir.RequestDigest = d
	return ir, nil
}

// Decision is what a response to an interaction decides.
type Decision struct {
	// Outcome is the response's outcome (wire.Outcome...).
	Outcome string
	// Allow lets the harness go ahead.
	Allow bool
	// Message tells the harness why it was refused ("" for a default).
	Message string
}
