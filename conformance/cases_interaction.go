package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

func interactionCases() []Case {
	return []Case{
		{ID: "interactions.answer", run: answerCase,
			Description: "a pending permission interaction answered runs the tool; a repeated operation gets its stored acknowledgement, new ones already_resolved_same/_different"},
		{ID: "interactions.refusals", run: refusalsCase,
			Description: "the bridge acknowledges unknown_run, unknown_interaction, binding_mismatch and invalid_response, and cancelled after a cancel"},
	}
}

// pending is a tool turn waiting on its permission interaction.
type pending struct {
	env    *sandbox.Environment
	sess   *provider.Session
	req    *wire.InteractionRequest
	next   func() (provider.Event, error, bool)
	stop   func()
	marker string
}

// askPermission makes an environment whose route proves interactions (the
// bridge client discovers its capability document), dispatches a turn
// whose model asks to run a shell command, and returns once the
// permission interaction is pending.
func askPermission(c *caseCtx) (*pending, error) {
	env, err := c.env()
	if err != nil {
		return nil, err
	}
	ie := env.Environment
	if !ie.Capabilities().InteractionsProven() {
		// The sandbox environment discovered no capability document for
		// this route: ask the bridge for it.
		p, err := c.bridge(env, provider.Options{DefaultModel: env.Model(), Name: "conformance-interactions"})
		if err != nil {
			return nil, err
		}
		req := c.step("provider.Capabilities for %s", env.Model())
		caps, err := p.Capabilities(c.ctx)
		if err != nil {
			return nil, failf(req, "the capability document", "%v", err)
		}
		if !caps.InteractionsProven() {
			return nil, skip("interactions", "the capability document of "+env.Model()+" claims no interactions")
		}
		if ie, err = p.Create(c.ctx, provider.CreateRequest{Profile: c.h.Profile,
			Workspace: &provider.Workspace{Cwd: sandbox.Workspace}}); err != nil {
			return nil, failf(c.step("provider.Create on the discovered route"), "an environment", "%v", err)
		}
		c.track(ie.Destroy)
	}
	marker := sandbox.Workspace + "/" + newID(".conformance-tool")
	prompt := toolPrompt(c.h, "echo conformance-ok > "+marker)
	exec := newID("conformance-tool")
	req := c.step("Dispatch(%q)", prompt)
	ref, err := ie.Dispatch(c.ctx, provider.Turn{Prompt: prompt, ExecutionID: exec, SessionID: exec})
	if err != nil {
		return nil, failf(req, "an admitted run", "%v", err)
	}
	s, err := ie.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		return nil, failf(c.step("environment.Session(%s)", ref.ID), "the run's session", "%v", err)
	}
	next, stop := iter.Pull2(s.Events(c.ctx, "0"))
	req = c.step("Session.Events of run %s, until the permission interaction", ref.ControlRef.RunID)
	var seen []provider.Event
	for {
		ev, err, ok := next()
		if !ok || err != nil {
			stop()
			return nil, failf(req, "a permission interaction for the "+c.h.tool.Name+" tool", "%v after %s", err, listEvents(seen))
		}
		seen = append(seen, ev)
		if ev.Type == provider.EventInteraction && ev.Interaction != nil {
			in := ev.Interaction
			if in.Kind != wire.InteractionKindPermission || in.Subject == nil || !strings.EqualFold(in.Subject.ToolName, c.h.tool.Name) {
				stop()
				return nil, failf(req, "a permission interaction for the "+c.h.tool.Name+" tool", "%s", clip(string(ev.Raw), 400))
			}
			c.track(func(context.Context) error { stop(); return nil })
			return &pending{env: env, sess: s, req: in, next: next, stop: stop, marker: marker}, nil
		}
	}
}

// command builds a digest-bound command for binding b and response r,
// the way a client that bends the rules would.
func command(op string, b wire.InteractionBinding, r wire.InteractionResponse) wire.InteractionCommand {
	d, _ := wire.InteractionCommandDigest(b, r)
	return wire.InteractionCommand{OperationID: op, Binding: b, CommandDigest: d, Response: r}
}

func allow(in *wire.InteractionRequest) wire.InteractionResponse {
	return wire.InteractionResponse{ID: in.ID, Outcome: wire.OutcomeAccepted, Data: provider.PermissionGrant(wire.GrantAllowOnce)}
}

// respond sends cmd and checks the acknowledgement's status.
func respond(c *caseCtx, p *pending, what string, cmd wire.InteractionCommand, want string) (wire.InteractionAck, error) {
	req := c.step("RespondToInteraction: %s (operation %s)", what, cmd.OperationID)
	ack, err := p.sess.RespondToInteraction(c.ctx, cmd)
	if err != nil || ack.Status != want {
		return ack, failf(req, "acknowledgement "+want, "%s (%q), %v", ack.Status, ack.Message, err)
	}
	return ack, nil
}

// finish reads the rest of the run and returns its terminal status and
// text.
func (p *pending) finish() (string, string, error) {
	defer p.stop()
	var text strings.Builder
	status := ""
	for {
		ev, err, ok := p.next()
		if !ok {
			return status, text.String(), nil
		}
		if err != nil {
			return status, text.String(), err
		}
		text.WriteString(ev.Delta)
		if ev.Type == provider.EventStatus {
			status = ev.Status
		}
	}
}

func answerCase(c *caseCtx) error {
	p, err := askPermission(c)
	if err != nil {
		return err
	}
	op := newID("conformance-op")
	cmd, err := provider.NewInteractionCommand(op, *p.req, allow(p.req))
	if err != nil {
		return failf(c.step("NewInteractionCommand"), "a command", "%v", err)
	}
	first, err := respond(c, p, "allow once", cmd, wire.InteractionAccepted)
	if err != nil {
		return err
	}
	req := c.step("RespondToInteraction: the same operation %s again", op)
	again, err := p.sess.RespondToInteraction(c.ctx, cmd)
	if err != nil || again.Status != first.Status || again.Message != first.Message || again.OperationID != first.OperationID ||
		again.CommandDigest != first.CommandDigest {
		return failf(req, fmt.Sprintf("the stored acknowledgement %+v", first), "%+v, %v", again, err)
	}
	same, _ := provider.NewInteractionCommand(newID("conformance-op"), *p.req, allow(p.req))
	if _, err := respond(c, p, "a new operation with the same answer", same, wire.InteractionAlreadyResolvedSame); err != nil {
		return err
	}
	other, _ := provider.NewInteractionCommand(newID("conformance-op"), *p.req, wire.InteractionResponse{Outcome: wire.OutcomeDeclined})
	if _, err := respond(c, p, "a new operation declining", other, wire.InteractionAlreadyResolvedDifferent); err != nil {
		return err
	}
	req = c.step("Session.Events to the end of the allowed tool turn")
	status, text, err := p.finish()
	if err != nil || status != provider.StatusCompleted {
		return failf(req, "a completed turn", "status %q, %v", status, err)
	}
	if err := c.wantText(req, text, ToolDoneText); err != nil {
		return err
	}
	req = c.step("Box.Read(%s), the file the allowed command writes", p.marker)
	if b, err := p.env.Box().Read(c.ctx, p.marker); err != nil || strings.TrimSpace(string(b)) != "conformance-ok" {
		return failf(req, `"conformance-ok"`, "%q, %v", b, err)
	}
	return nil
}

func refusalsCase(c *caseCtx) error {
	p, err := askPermission(c)
	if err != nil {
		return err
	}
	in := p.req
	b := in.ResponseBinding()
	unknownRun := b
	unknownRun.RunID = newID("conformance-no-run")
	unknownIt := b
	unknownIt.InteractionID = newID("conformance-no-interaction")
	mismatch := b
	mismatch.ExecutionID = newID("conformance-other")
	invalid := wire.InteractionResponse{ID: in.ID, Outcome: wire.OutcomeAccepted, Data: json.RawMessage(`{"grant":["fly_to_the_moon"]}`)}
	for _, tc := range []struct {
		what string
		cmd  wire.InteractionCommand
		want string
	}{
		{"a run the bridge never ran", command(newID("conformance-op"), unknownRun, allow(in)), wire.InteractionUnknownRun},
		{"an interaction the run never raised", command(newID("conformance-op"), unknownIt,
			wire.InteractionResponse{ID: unknownIt.InteractionID, Outcome: wire.OutcomeAccepted, Data: provider.PermissionGrant(wire.GrantAllowOnce)}),
			wire.InteractionUnknownInteraction},
		{"a binding naming another execution", command(newID("conformance-op"), mismatch, allow(in)), wire.InteractionBindingMismatch},
		{"a grant the answer spec does not offer", command(newID("conformance-op"), b, invalid), wire.InteractionInvalidResponse},
	} {
		if _, err := respond(c, p, tc.what, tc.cmd, tc.want); err != nil {
			return err
		}
	}
	req := c.step("Session.Cancel while the interaction is pending")
	if st, err := p.sess.Cancel(c.ctx); err != nil || !st.Terminal {
		return failf(req, "a terminal run", "%+v, %v", st, err)
	}
	late, _ := provider.NewInteractionCommand(newID("conformance-op"), *in, allow(in))
	if _, err := respond(c, p, "an answer after the run was cancelled", late, wire.InteractionCancelled); err != nil {
		return err
	}
	if _, err := p.env.Box().Read(c.ctx, p.marker); err == nil {
		return failf(c.step("Box.Read(%s)", p.marker), "no file: the command never ran", "the file exists")
	}
	return nil
}
