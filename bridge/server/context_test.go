package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// exported is a conversation exported from another environment: a text
// message, one with a part that cannot travel, and one with none that
// can.
func exported(t *testing.T) wire.PortableContext {
	t.Helper()
	at := "2026-01-02T03:04:05.000Z"
	c := wire.PortableContext{
		Source: wire.ContextSource{RunID: "src-run", MessageID: "m3", Provider: "other", EnvironmentID: "src-env",
			SessionID: "src-session", ExecutionID: "src-exec", RequestDigest: "sha256:" + strings.Repeat("a", 64)},
		Completeness: wire.ContextComplete,
		Messages: []wire.ContextMessage{
			{ID: "m1", Role: "user", Timestamp: at, Parts: []json.RawMessage{json.RawMessage(`{"type":"text","text":"Name a colour."}`)}},
			{ID: "m2", Role: "assistant", Timestamp: at, Parts: []json.RawMessage{json.RawMessage(`{"type":"text","text":"Teal."}`),
				json.RawMessage(`{"type":"tool-call","name":"paint"}`)}},
			{ID: "m3", Role: "assistant", Timestamp: at, Parts: []json.RawMessage{json.RawMessage(`{"type":"reasoning","text":"..."}`)}},
		},
		Attachments: []wire.ContextAttachment{},
	}
	c.Digest = digested(t, c.Material())
	return c
}

func planRequest(t *testing.T, id string, max int64) wire.ContextPlanRequest {
	t.Helper()
	req := wire.ContextPlanRequest{RequestID: id, Source: exported(t), MaxInputTokens: &max,
		Destination: wire.ContextDestination{Runner: "claude-code", Provider: "test", EnvironmentID: "dst-env", SessionID: "dst-session",
			RunID: "dst-run", ExecutionID: "dst-exec", Model: "sonnet", ProfileDigest: "sha256:" + strings.Repeat("b", 64)}}
	req.RequestDigest = digested(t, req.Material())
	return req
}

// counter reads one sample of GET /metrics.
func counter(t *testing.T, v *env, name string) string {
	t.Helper()
	sc := bufio.NewScanner(v.do(t, "GET", "/metrics", "").Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	t.Fatalf("GET /metrics has no %s", name)
	return ""
}

// TestContextTransfer plans a portable context (with no effect, and over
// a budget it refuses), then transfers the accepted plan into one fresh
// session and run, replays the transfer and refuses a changed one.
func TestContextTransfer(t *testing.T) {
	v := newEnv(t, config{})
	counts := func() []string {
		var out []string
		for _, n := range []string{"plans", "transfers", "sessions"} {
			out = append(out, counter(t, v, "bridge_context_"+n+"_total"))
		}
		return out
	}
	req := planRequest(t, "plan-1", 1000)
	code, res := postJSON[wire.ContextPlanResult](t, v, "/v1/context/plans", req)
	if code != 200 || res.Status != wire.PlanReady || res.Plan == nil {
		t.Fatalf("plan = %d %+v", code, res)
	}
	p := res.Plan
	t.Run("decisions", func(t *testing.T) {
		var got []string
		for _, m := range p.Messages {
			s := m.MessageID + ":" + m.Action
			for _, part := range m.Parts {
				s += " " + part.Action
			}
			got = append(got, s)
		}
		want := []string{"m1:include include", "m2:include include omit", "m3:omit omit"}
		if diff := cmp.Diff(want, got); diff != "" || !p.RequiresAcceptance || p.Context.Completeness != wire.ContextPartial ||
			len(p.Context.Messages) != 2 || len(p.Context.Messages[1].Parts) != 1 {
			t.Errorf("plan %+v: decisions (-want +got):\n%s", p, diff)
		}
		if p.Digest != digested(t, p.Material()) || p.Context.Digest != digested(t, p.Context.Material()) ||
			p.EstimatedTokens == nil || *p.EstimatedTokens > 1000 {
			t.Errorf("plan digests or estimate do not hold: %+v", p)
		}
		if _, again := postJSON[wire.ContextPlanResult](t, v, "/v1/context/plans", req); !cmp.Equal(again, res) {
			t.Errorf("the same request planned again = %+v, want %+v", again, res)
		}
	})
	t.Run("over the budget", func(t *testing.T) {
		code, over := postJSON[wire.ContextPlanResult](t, v, "/v1/context/plans", planRequest(t, "plan-2", 1))
		if code != 200 || over.Status != wire.PlanOverLimit || over.Plan != nil || *over.MaxInputTokens != 1 ||
			*over.EstimatedTokens <= 1 || over.Message == "" {
			t.Errorf("over-limit plan = %d %+v", code, over)
		}
	})
	if got := counts(); !cmp.Equal(got, []string{"3", "0", "0"}) {
		t.Errorf("counters after planning = %v, want 3 plans and nothing else", got)
	}

	accepted := time.Now().UTC().Format(time.RFC3339Nano)
	transfer := func(op, by string) wire.ContextTransferRequest {
		tr := wire.ContextTransferRequest{OperationID: op, Plan: *p, Acceptance: wire.PlanAcceptance{PlanDigest: p.Digest, AcceptedAt: accepted, AcceptedBy: by}}
		tr.RequestDigest = digested(t, tr.Material())
		return tr
	}
	tr := transfer("op-1", "user")
	for _, tt := range []struct {
		name string
		body wire.ContextTransferRequest
	}{
		{"system acceptance of a partial plan", transfer("op-0", "system")},
		{"acceptance of another plan", func() wire.ContextTransferRequest {
			x := tr
			x.Acceptance.PlanDigest = p.Source.Digest
			x.RequestDigest = digested(t, x.Material())
			return x
		}()},
		{"wrong digest", func() wire.ContextTransferRequest { x := tr; x.RequestDigest = p.Digest; return x }()},
	} {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			if code, e := postJSON[wire.ErrorResponse](t, v, "/v1/context/transfers", tt.body); code != 400 {
				t.Errorf("transfer = %d %+v, want 400", code, e.Error)
			}
		})
	}
	code, receipt := postJSON[wire.ContextTransferReceipt](t, v, "/v1/context/transfers", tr)
	if code != http.StatusCreated || receipt.Status != wire.TransferOK || receipt.SessionID != "dst-session" || receipt.RunID != "dst-run" ||
		receipt.SessionCreatedForOperation != "op-1" || !cmp.Equal(receipt.TransferredMessageIDs, []string{"m1", "m2"}) ||
		!cmp.Equal(receipt.OmittedMessageIDs, []string{"m3"}) || receipt.ContextDigest != p.Context.Digest {
		t.Fatalf("transfer = %d %+v", code, receipt)
	}
	if s := waitRun(t, v, "dst-run"); s.Status != wire.StatusDone {
		t.Errorf("the destination run = %+v, want done", s)
	}
	t.Run("replay", func(t *testing.T) {
		code, again := postJSON[wire.ContextTransferReceipt](t, v, "/v1/context/transfers", tr)
		want := receipt
		want.Status = wire.TransferReplay
		if diff := cmp.Diff(want, again); code != 200 || diff != "" {
			t.Errorf("repeated transfer = %d (-want +got):\n%s", code, diff)
		}
	})
	t.Run("changed request, same operation", func(t *testing.T) {
		changed := transfer("op-1", "policy")
		code, c := postJSON[wire.ContextTransferConflict](t, v, "/v1/context/transfers", changed)
		if code != 409 || c.Status != wire.TransferClash || c.ExistingRequestDigest != tr.RequestDigest {
			t.Errorf("changed transfer = %d %+v", code, c)
		}
	})
	t.Run("another operation to the same session", func(t *testing.T) {
		if code, e := postJSON[wire.ErrorResponse](t, v, "/v1/context/transfers", transfer("op-2", "user")); code != 409 ||
			e.Error.Type != wire.TypeSessionConflict {
			t.Errorf("transfer into a taken session = %d %+v, want 409 %s", code, e.Error, wire.TypeSessionConflict)
		}
	})
	if got := counts(); !cmp.Equal(got, []string{"3", "1", "1"}) {
		t.Errorf("counters after the transfers = %v, want one transfer into one fresh session", got)
	}
}
