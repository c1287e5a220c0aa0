package harnesstest

import (
	"encoding/json"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// AnswerInteraction checks that event (an `interaction` event) asks for a
// tool permission in the agent interface's shape (an answer spec, a tool
// subject, a binding naming the interaction and a digest of its content)
// and returns its request together with the respond command body that
// answers it with outcome under operation id op. An accepted answer grants
// allow_once, as a TypeScript client sends it.
func AnswerInteraction(t testing.TB, event json.RawMessage, op, outcome string) (wire.InteractionRequest, string) {
	t.Helper()
	var ev struct {
		Request wire.InteractionRequest `json:"request"`
	}
	if err := json.Unmarshal(event, &ev); err != nil {
		t.Fatal(err)
	}
	req := ev.Request
	if d, err := wire.InteractionRequestDigest(req); err != nil || d != req.RequestDigest {
		t.Fatalf("interaction requestDigest = %s, want %s (%v)", req.RequestDigest, d, err)
	}
	if req.Kind != wire.InteractionKindPermission || req.Subject == nil || req.Subject.Type != wire.SubjectTool ||
		req.Subject.ToolName == "" || len(req.AnswerSpec.Fields) == 0 || req.Binding.InteractionID != req.ID {
		t.Fatalf("interaction request = %s, want a tool permission with an answer spec", event)
	}
	resp := wire.InteractionResponse{ID: req.ID, Outcome: outcome}
	if outcome == wire.OutcomeAccepted {
		resp.Data = json.RawMessage(`{"grant":["allow_once"]}`)
	}
	b := req.ResponseBinding()
	d, err := wire.InteractionCommandDigest(b, resp)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(wire.InteractionCommand{OperationID: op, Binding: b, CommandDigest: d, Response: resp})
	if err != nil {
		t.Fatal(err)
	}
	return req, string(body)
}

// Respond posts a respond command for interaction iid of run and decodes
// the acknowledgement.
func (l *Live) Respond(t *testing.T, run, iid, body string) (int, wire.InteractionAck) {
	t.Helper()
	resp := l.Do(t, "POST", "/v1/runs/"+run+"/interactions/"+iid+"/respond", body)
	defer resp.Body.Close()
	var ack wire.InteractionAck
	if err := json.NewDecoder(resp.Body).Decode(&ack); err != nil {
		t.Fatalf("respond to %s: decode acknowledgement: %v", iid, err)
	}
	return resp.StatusCode, ack
}

// Responder posts the respond command body for interaction iid of the run
// under test and returns the HTTP status and the acknowledgement.
type Responder func(iid, body string) (int, wire.InteractionAck)

// ResolveInteraction answers the interaction of event with outcome and
// checks every acknowledgement the protocol promises for it: the first
// answer is accepted; the same operation repeated returns the stored
// acknowledgement; a different answer under a new operation is
// already_resolved_different (409), the same answer under a new one
// already_resolved_same; an answer bound to another interaction is a
// binding_mismatch (409). It returns the interaction's request.
func ResolveInteraction(t testing.TB, event json.RawMessage, outcome string, respond Responder) wire.InteractionRequest {
	t.Helper()
	req, cmd := AnswerInteraction(t, event, "op-answer", outcome)
	code, ack := respond(req.ID, cmd)
	if code != 200 || ack.Status != wire.InteractionAccepted {
		t.Fatalf("respond = %d %+v, want 200 accepted", code, ack)
	}
	if code2, ack2 := respond(req.ID, cmd); code2 != 200 || ack2 != ack {
		t.Errorf("repeated operation = %d %+v, want the stored %+v", code2, ack2, ack)
	}
	other := wire.OutcomeAccepted
	if outcome == wire.OutcomeAccepted {
		other = wire.OutcomeDeclined
	}
	if _, cmd := AnswerInteraction(t, event, "op-other", other); true {
		if code, ack := respond(req.ID, cmd); code != 409 || ack.Status != wire.InteractionAlreadyResolvedDifferent {
			t.Errorf("different answer = %d %+v, want 409 already_resolved_different", code, ack)
		}
	}
	if _, cmd := AnswerInteraction(t, event, "op-same", outcome); true {
		if code, ack := respond(req.ID, cmd); code != 200 || ack.Status != wire.InteractionAlreadyResolvedSame {
			t.Errorf("same answer, new operation = %d %+v, want already_resolved_same", code, ack)
		}
	}
	if _, cmd := AnswerInteraction(t, event, "op-elsewhere", outcome); true {
		if code, ack := respond(req.ID+"-other", cmd); code != 409 || ack.Status != wire.InteractionBindingMismatch {
			t.Errorf("answer posted for another interaction = %d %+v, want 409 binding_mismatch", code, ack)
		}
	}
	return req
}
