package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestRespondInteraction(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	postTurn(t, v, "s1", turnBody("t1", "r1", "bash:echo hi"))
	events := openEvents(t, v, "/v1/runs/r1/events", "")
	asked := events.until(func(f cframe) bool { return f.typ == "interaction" })
	b := bindingOf(t, asked[len(asked)-1])
	want := wire.InteractionBinding{RunID: "r1", Provider: "test", EnvironmentID: "env-1", SessionID: "s1", ExecutionID: "exec-t1",
		InteractionID: b.InteractionID, RequestDigest: b.RequestDigest}
	if b != want || b.InteractionID == "" || !strings.HasPrefix(b.RequestDigest, "sha256:") {
		t.Fatalf("interaction binding = %+v, want %+v", b, want)
	}

	other := func(change func(*wire.InteractionBinding)) wire.InteractionBinding {
		c := b
		change(&c)
		return c
	}
	badDigest := command(t, "op-digest", b, wire.OutcomeAccepted)
	badDigest.CommandDigest = "sha256:" + strings.Repeat("0", 64)
	badOutcome := command(t, "op-outcome", b, "maybe")
	rejected := []struct {
		name       string
		cmd        wire.InteractionCommand
		wantStatus int
		wantAck    string
	}{
		{"unknown run", command(t, "op-run", other(func(c *wire.InteractionBinding) { c.RunID = "r-nope" }), wire.OutcomeAccepted), 404, wire.InteractionUnknownRun},
		{"unknown interaction", command(t, "op-iid", other(func(c *wire.InteractionBinding) { c.InteractionID = "perm-99" }), wire.OutcomeAccepted), 404, wire.InteractionUnknownInteraction},
		{"other execution", command(t, "op-exec", other(func(c *wire.InteractionBinding) { c.ExecutionID = "exec-x" }), wire.OutcomeAccepted), 409, wire.InteractionBindingMismatch},
		{"other request digest", command(t, "op-req", other(func(c *wire.InteractionBinding) { c.RequestDigest = badDigest.CommandDigest }), wire.OutcomeAccepted), 409, wire.InteractionBindingMismatch},
		{"other session", command(t, "op-ses", other(func(c *wire.InteractionBinding) { c.SessionID = "s2" }), wire.OutcomeAccepted), 409, wire.InteractionBindingMismatch},
		{"wrong command digest", badDigest, 400, wire.InteractionInvalidResponse},
		{"unknown outcome", badOutcome, 400, wire.InteractionInvalidResponse},
	}
	for _, tt := range rejected {
		t.Run(tt.name, func(t *testing.T) {
			code, ack, raw := respond(t, v, tt.cmd)
			if code != tt.wantStatus || ack.Status != tt.wantAck || ack.OperationID != tt.cmd.OperationID || ack.Binding != tt.cmd.Binding ||
				ack.CommandDigest != tt.cmd.CommandDigest || ack.Message == "" || ack.Retryable == nil || *ack.Retryable {
				t.Errorf("respond = %d %s, want %d %s bound to the command, not retryable", code, raw, tt.wantStatus, tt.wantAck)
			}
		})
	}
	t.Run("unknown field", func(t *testing.T) {
		resp := v.do(t, "POST", "/v1/runs/r1/interactions/"+b.InteractionID+"/respond",
			`{"operationId":"op-x","binding":{},"commandDigest":"","response":{"id":"x","outcome":"accepted"},"extra":1}`)
		if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 400 || e.Error.Type != wire.TypeInvalidRequest {
			t.Errorf("respond with an unknown field = %d %+v, want 400 %s", resp.StatusCode, e.Error, wire.TypeInvalidRequest)
		}
	})
	t.Run("no operation id", func(t *testing.T) {
		cmd := command(t, "", b, wire.OutcomeAccepted)
		code, _, raw := respond(t, v, cmd)
		if code != 400 || !strings.Contains(raw, wire.TypeInvalidRequest) {
			t.Errorf("respond without operationId = %d %s, want 400 %s", code, raw, wire.TypeInvalidRequest)
		}
	})

	accept := command(t, "op-accept", b, wire.OutcomeAccepted)
	code, ack, first := respond(t, v, accept)
	if code != 200 || ack.Status != wire.InteractionAccepted {
		t.Fatalf("accept = %d %s", code, first)
	}
	rest := events.all()
	if got := frameText(rest); got != "ran: hi (err <nil>)" {
		t.Errorf("reply after accepting = %q, want the command's output", got)
	}
	if last := rest[len(rest)-1]; last.body["status"] != "completed" {
		t.Errorf("run ended with %v, want completed", last.body)
	}

	answered := []struct {
		name       string
		cmd        wire.InteractionCommand
		wantStatus int
		wantAck    string
	}{
		{"same operation again", accept, 200, wire.InteractionAccepted},
		{"new operation, same answer", command(t, "op-same", b, wire.OutcomeAccepted), 200, wire.InteractionAlreadyResolvedSame},
		{"new operation, other answer", command(t, "op-other", b, wire.OutcomeDeclined), 409, wire.InteractionAlreadyResolvedDifferent},
	}
	for _, tt := range answered {
		t.Run(tt.name, func(t *testing.T) {
			code, ack, raw := respond(t, v, tt.cmd)
			if code != tt.wantStatus || ack.Status != tt.wantAck {
				t.Errorf("respond = %d %s, want %d %s", code, raw, tt.wantStatus, tt.wantAck)
			}
			if tt.cmd.OperationID == accept.OperationID && raw != first {
				t.Errorf("repeated operation = %s, want the stored %s", raw, first)
			}
		})
	}
	// A repeated operation id answers from the store even with another
	// body.
	again := command(t, "op-other", b, wire.OutcomeAccepted)
	if code, ack, _ := respond(t, v, again); code != 409 || ack.Status != wire.InteractionAlreadyResolvedDifferent {
		t.Errorf("op-other repeated with another answer = %d %s, want its stored already_resolved_different", code, ack.Status)
	}
	// The interaction replays with the run's events.
	replay := openEvents(t, v, "/v1/runs/r1/events", "").all()
	if len(replay) != len(asked)+len(rest) || bindingOf(t, replay[len(asked)-1]) != b {
		t.Errorf("replay = %d frames, want %d with the interaction at %d", len(replay), len(asked)+len(rest), len(asked))
	}
}

func TestRespondInteraction_DeclineAndCancel(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	ask := func(turn string) (wire.InteractionBinding, *canonStream) {
		postTurn(t, v, "s1", turnBody(turn, "r-"+turn, "bash:echo hi"))
		events := openEvents(t, v, "/v1/runs/r-"+turn+"/events", "")
		asked := events.until(func(f cframe) bool { return f.typ == "interaction" })
		return bindingOf(t, asked[len(asked)-1]), events
	}

	b, events := ask("t1")
	if code, ack, raw := respond(t, v, command(t, "op-decline", b, wire.OutcomeDeclined)); code != 200 || ack.Status != wire.InteractionAccepted {
		t.Fatalf("decline = %d %s", code, raw)
	}
	if got := frameText(events.all()); !strings.HasPrefix(got, "denied: ") {
		t.Errorf("reply after declining = %q, want a refusal", got)
	}

	b, events = ask("t2")
	if resp, out := cancelRun(t, v, "s1", "r-t2"); resp.StatusCode != 200 || out.Effect != wire.EffectCancelled {
		t.Fatalf("cancel = %d %+v", resp.StatusCode, out)
	}
	rest := events.all()
	var closed bool
	for _, f := range rest {
		closed = closed || (f.typ == "interaction.cancel" && f.body["id"] == b.InteractionID)
	}
	if !closed || rest[len(rest)-1].body["status"] != "cancelled" {
		t.Errorf("events after cancel = %d frames, want interaction.cancel for %s and a cancelled status", len(rest), b.InteractionID)
	}
	if code, ack, raw := respond(t, v, command(t, "op-late", b, wire.OutcomeAccepted)); code != 409 || ack.Status != wire.InteractionCancelled {
		t.Errorf("answer after cancel = %d %s, want 409 %s", code, raw, wire.InteractionCancelled)
	}
}

// TestRespondInteraction_AfterShutdown: an interaction still open when
// the bridge shuts down is closed as expired, as recovery closes those a
// crash left open, so an answer sent to the restarted bridge is
// acknowledged expired (409), not cancelled, which is for a cancelled run.
func TestRespondInteraction_AfterShutdown(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	postTurn(t, v, "s1", turnBody("t1", "r-t1", "bash:echo hi"))
	events := openEvents(t, v, "/v1/runs/r-t1/events", "")
	asked := events.until(func(f cframe) bool { return f.typ == "interaction" })
	b := bindingOf(t, asked[len(asked)-1])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := v.e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rest := events.all()
	var closed bool
	for _, f := range rest {
		closed = closed || (f.typ == "interaction.cancel" && f.body["id"] == b.InteractionID && f.body["reason"] == wire.TypeBridgeShutdown)
	}
	if !closed || rest[len(rest)-1].body["status"] != "failed" {
		t.Errorf("events after shutdown = %+v, want interaction.cancel (%s) for %s and a failed status", rest, wire.TypeBridgeShutdown, b.InteractionID)
	}
	for _, op := range []string{"op-late", "op-late", "op-other"} { // a repeated operation gets its stored answer
		if code, ack, raw := respond(t, v, command(t, op, b, wire.OutcomeAccepted)); code != 409 || ack.Status != wire.InteractionExpired {
			t.Errorf("answer %s after shutdown = %d %s, want 409 %s", op, code, raw, wire.InteractionExpired)
		}
	}
}
