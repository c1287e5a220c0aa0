package portable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Admit opens the fresh retained session a transfer goes to, as create
// asks, on the harness named runner, and admits turn there as its first
// turn; the bridge's sessions do both, as for any retained session. Its
// errors are answered as they are.
type Admit func(ctx context.Context, runner string, create wire.SessionCreateRequest, turn wire.TurnRequest) (Admission, error)

// Admission is where a transfer went: its destination session, whether
// the Admit created it, and the session's first run. An Admit that failed
// after it created the session says so too.
type Admission struct {
	Session store.RetainedSession
	Created bool
	Run     store.Run
}

// Result is the answer to a transfer: its receipt (accepted, or replayed
// for a repeat of the request), or Conflict when its operation id is
// bound to another request.
type Result struct {
	Receipt  *wire.ContextTransferReceipt
	Conflict *wire.ContextTransferConflict
	// SessionCreated says whether this request created the destination
	// session.
	SessionCreated bool
}

// Transfer carries the accepted plan of req into a fresh retained session
// (admit), and records the transfer under its operation id.
func Transfer(ctx context.Context, st *store.Store, req wire.ContextTransferRequest, admit Admit) (Result, error) {
	if err := CheckTransfer(req); err != nil {
		return Result{}, &wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: err.Error()}
	}
	if err := wire.CheckDigest(req.RequestDigest, req.Material(), "transfer"); err != nil {
		return Result{}, &wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: err.Error()}
	}
	got, bound, err := store.Bound(st.GetContextTransfer(ctx, req.OperationID))
	if err != nil {
		return Result{}, wire.Fault("load transfer", err)
	}
	if bound {
		return answer(req, got, wire.TransferReplay)
	}
	d := req.Plan.Destination
	// The destination session is bound to this operation: a retry after a
	// crash finds it created for the same operation, any other request
	// finds the id taken.
	create := wire.SessionCreateRequest{ID: d.SessionID, Model: destinationModel(d), InteractionPolicy: wire.PolicyUnattendedDeny,
		Metadata: map[string]any{"contextTransfer": map[string]any{"operationId": req.OperationID, "planDigest": req.Plan.Digest}}}
	turn := wire.TurnRequest{Message: Render(req.Plan.Context), TurnID: "context-transfer:" + req.OperationID,
		ExecutionID: d.ExecutionID, RunID: d.RunID, Provider: d.Provider, EnvironmentID: d.EnvironmentID}
	a, err := admit(ctx, d.Runner, create, turn)
	if err != nil {
		return Result{SessionCreated: a.Created}, err
	}
	mine, err := json.Marshal(receiptOf(req, a))
	if err != nil {
		return Result{SessionCreated: a.Created}, wire.Fault("encode transfer", err)
	}
	got, err = st.AddContextTransfer(ctx, store.ContextTransfer{OperationID: req.OperationID, RequestDigest: req.RequestDigest, Receipt: mine})
	if err != nil {
		return Result{SessionCreated: a.Created}, wire.Fault("record transfer", err)
	}
	status := wire.TransferReplay // a concurrent twin recorded it first
	if string(got.Receipt) == string(mine) {
		status = wire.TransferOK
	}
	res, err := answer(req, got, status)
	res.SessionCreated = a.Created
	return res, err
}

// destinationModel is the model id of a destination: its model, under its
// runner's prefix, or the runner's default.
func destinationModel(d wire.ContextDestination) string {
	switch model := d.Model; {
	case model == "":
		return d.Runner
	case !strings.HasPrefix(strings.ToLower(model), strings.ToLower(d.Runner)+"/"):
		return d.Runner + "/" + model
	default:
		return model
	}
}

// receiptOf is the receipt of a transfer that went to a.
func receiptOf(req wire.ContextTransferRequest, a Admission) wire.ContextTransferReceipt {
	d := req.Plan.Destination
	receipt := wire.ContextTransferReceipt{Status: wire.TransferOK, OperationID: req.OperationID, RequestDigest: req.RequestDigest,
		PlanDigest: req.Plan.Digest, ContextDigest: req.Plan.Context.Digest, Source: req.Plan.Source.Source, Destination: d,
		Provider: d.Provider, EnvironmentID: d.EnvironmentID, SessionID: a.Session.ID, RunID: a.Run.ID, ExecutionID: d.ExecutionID,
		SessionCreatedForOperation: req.OperationID, SessionCreatedAt: a.Session.CreatedAt.UTC().Format(time.RFC3339Nano),
		TransferredMessageIDs: []string{}, OmittedMessageIDs: []string{}, AdmittedAt: a.Run.StartedAt.UTC().Format(time.RFC3339Nano)}
	for _, m := range req.Plan.Messages {
		if m.Action == wire.ActionInclude {
			receipt.TransferredMessageIDs = append(receipt.TransferredMessageIDs, m.MessageID)
		} else {
			receipt.OmittedMessageIDs = append(receipt.OmittedMessageIDs, m.MessageID)
		}
	}
	return receipt
}

// answer answers the transfer recorded under the request's operation id:
// its receipt with status, or a conflict.
func answer(req wire.ContextTransferRequest, got store.ContextTransfer, status string) (Result, error) {
	if got.RequestDigest != req.RequestDigest {
		return Result{Conflict: &wire.ContextTransferConflict{Status: wire.TransferClash, OperationID: req.OperationID,
			RequestDigest: req.RequestDigest, ExistingRequestDigest: got.RequestDigest}}, nil
	}
	var receipt wire.ContextTransferReceipt
	if err := json.Unmarshal(got.Receipt, &receipt); err != nil {
		return Result{}, wire.Fault("decode transfer", err)
	}
	receipt.Status = status
	return Result{Receipt: &receipt}, nil
}

// CheckTransfer checks a transfer request: its digests, its acceptance and
// that its plan's context is what its decisions make of its source, sent
// to a destination apart from the source.
func CheckTransfer(req wire.ContextTransferRequest) error {
	p := req.Plan
	if err := wire.ValidIdentifier(req.OperationID); err != nil {
		return errors.New("operationId " + err.Error())
	}
	if err := checkContext(p.Source, "plan.source"); err != nil {
		return err
	}
	if err := checkContext(p.Context, "plan.context"); err != nil {
		return err
	}
	ctx, changed, err := applyPlan(p.Source, p.Messages)
	if err != nil {
		return err
	}
	if ctx.Digest != p.Context.Digest {
		return errors.New("plan.context is not what the plan's decisions make of its source")
	}
	if p.RequiresAcceptance != (changed || p.Source.Completeness == wire.ContextPartial) {
		return errors.New("plan.requiresAcceptance must be true exactly when content changes or the source is partial")
	}
	if want, err := wire.Digest(p.Material()); err != nil || want != p.Digest {
		return errors.New("plan digest does not match its content")
	}
	if err := checkAcceptance(p, req.Acceptance); err != nil {
		return err
	}
	return checkDestination(p.Destination, p.Source.Source)
}

// checkAcceptance checks the acceptance of plan p.
func checkAcceptance(p wire.ContextPlan, a wire.PlanAcceptance) error {
	if a.PlanDigest != p.Digest {
		return errors.New("acceptance.planDigest must be the executed plan's digest")
	}
	if !slices.Contains([]string{"user", "policy", "system"}, a.AcceptedBy) {
		return errors.New("acceptance.acceptedBy must be user, policy or system")
	}
	if p.RequiresAcceptance && a.AcceptedBy == "system" {
		return errors.New("a transformed or partial plan requires user or policy acceptance")
	}
	if _, err := time.Parse(time.RFC3339Nano, a.AcceptedAt); err != nil {
		return errors.New("acceptance.acceptedAt must be an ISO date-time")
	}
	return nil
}

// checkDestination checks that destination d is well formed and apart
// from the source src.
func checkDestination(d wire.ContextDestination, src wire.ContextSource) error {
	for _, f := range []struct{ name, v string }{{"runner", d.Runner}, {"provider", d.Provider}, {"environmentId", d.EnvironmentID},
		{"sessionId", d.SessionID}, {"executionId", d.ExecutionID}} {
		if err := wire.ValidIdentifier(f.v); err != nil {
			return errors.New("plan.destination." + f.name + " " + err.Error())
		}
	}
	if err := wire.ValidRunID(d.RunID); err != nil {
		return errors.New("plan.destination.runId: " + err.Error())
	}
	if d.EnvironmentID == src.EnvironmentID || d.SessionID == src.SessionID || d.RunID == src.RunID || d.ExecutionID == src.ExecutionID {
		return errors.New("the destination environment, session, run and execution must each differ from the source's")
	}
	return nil
}

// Render is the prompt of the destination's first run: the transferred
// conversation c, and what to do with it.
func Render(c wire.PortableContext) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The conversation below was carried over from another environment (run %s). "+
		"Take it as the history of this conversation.\n", c.Source.RunID)
	for _, m := range c.Messages {
		fmt.Fprintf(&b, "\n[%s]\n", m.Role)
		for _, raw := range m.Parts {
			var p map[string]string
			json.Unmarshal(raw, &p)
			name := p["filename"]
			switch p["type"] {
			case "text":
				b.WriteString(p["text"] + "\n")
			case "file":
				if p["content"] != "" {
					fmt.Fprintf(&b, "(file %s)\n%s\n", name, p["content"])
				} else {
					fmt.Fprintf(&b, "(file %s at %s%s)\n", name, p["url"], p["path"])
				}
			case "image":
				fmt.Fprintf(&b, "(image %s at %s%s)\n", name, p["url"], p["path"])
			}
		}
	}
	b.WriteString("\nReply in one short line that the context is in place.")
	return b.String()
}
