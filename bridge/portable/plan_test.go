package portable

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// source is a conversation from another environment: a text message, one
// with a part that cannot travel, and one with none that can.
func source(t *testing.T) wire.PortableContext {
	t.Helper()
	at := "2026-01-02T03:04:05.000Z"
	part := func(s string) json.RawMessage { return json.RawMessage(s) }
	c := wire.PortableContext{
		Source: wire.ContextSource{RunID: "src-run", Provider: "other", EnvironmentID: "src-env", SessionID: "src-session",
			ExecutionID: "src-exec"},
		Completeness: wire.ContextComplete,
		Messages: []wire.ContextMessage{
			{ID: "m1", Role: "user", Timestamp: at, Parts: []json.RawMessage{part(`{"type":"text","text":"Name a colour."}`)}},
			{ID: "m2", Role: "assistant", Timestamp: at, Parts: []json.RawMessage{part(`{"type":"text","text":"Teal."}`),
				part(`{"type":"tool-call","name":"paint"}`)}},
			{ID: "m3", Role: "assistant", Timestamp: at, Parts: []json.RawMessage{part(`{"type":"reasoning","text":"..."}`)}},
		},
		Attachments: []wire.ContextAttachment{},
	}
	var err error
	if c.Digest, err = wire.Digest(c.Material()); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPlan_Transfer plans a context, accepts the plan and checks the
// transfer of it; a transfer whose plan was changed is refused.
func TestPlan_Transfer(t *testing.T) {
	req := wire.ContextPlanRequest{RequestID: "plan-1", Source: source(t),
		Destination: wire.ContextDestination{Runner: "claude-code", Provider: "test", EnvironmentID: "dst-env",
			SessionID: "dst-session", RunID: "dst-run", ExecutionID: "dst-exec"}}
	var err error
	if req.RequestDigest, err = wire.Digest(req.Material()); err != nil {
		t.Fatal(err)
	}
	res, err := Plan(req)
	if err != nil || res.Status != wire.PlanReady {
		t.Fatalf("Plan = %+v, %v; want ready", res, err)
	}
	var actions []string
	for _, m := range res.Plan.Messages {
		actions = append(actions, m.MessageID+":"+m.Action)
		for _, p := range m.Parts {
			actions = append(actions, "  "+p.Action)
		}
	}
	want := []string{"m1:include", "  include", "m2:include", "  include", "  omit", "m3:omit", "  omit"}
	if diff := cmp.Diff(want, actions); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if !res.Plan.RequiresAcceptance || res.Plan.Context.Completeness != wire.ContextPartial || len(res.Plan.Context.Messages) != 2 {
		t.Errorf("plan = %+v, want a partial context of two messages that requires acceptance", res.Plan)
	}
	tr := wire.ContextTransferRequest{OperationID: "op-1", Plan: *res.Plan,
		Acceptance: wire.PlanAcceptance{PlanDigest: res.Plan.Digest, AcceptedBy: "user", AcceptedAt: "2026-01-02T03:04:06Z"}}
	if err := CheckTransfer(tr); err != nil {
		t.Errorf("CheckTransfer of the accepted plan = %v", err)
	}
	tr.Acceptance.AcceptedBy = "system"
	if err := CheckTransfer(tr); err == nil || !strings.Contains(err.Error(), "acceptance") {
		t.Errorf("CheckTransfer accepted by the system = %v, want a refusal", err)
	}
	tr.Acceptance.AcceptedBy = "user"
	tr.Plan.Messages[2].Action = wire.ActionInclude
	if err := CheckTransfer(tr); err == nil {
		t.Error("CheckTransfer of a plan that lets a reasoning part travel succeeded")
	}
	over := int64(1)
	req.MaxInputTokens = &over
	req.RequestDigest, _ = wire.Digest(req.Material())
	if res, err := Plan(req); err != nil || res.Status != wire.PlanOverLimit {
		t.Errorf("Plan over the budget = %+v, %v; want over_limit", res, err)
	}
}
