package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// canonical handles one frame of a canonical stream (`event:` present).
func (d *decoder) canonical(f frame) error {
	if d.terminal != nil {
		return d.protocolErr("cli-bridge emitted an event after canonical terminal status")
	}
	if f.Event == "error" {
		var body wire.ErrorResponse
		msg := "cli-bridge canonical event stream failed"
		if json.Unmarshal([]byte(f.Data), &body) == nil && body.Error.Message != "" {
			msg = body.Error.Message
		}
		return &BridgeError{Op: d.spec.op, Type: body.Error.Type, Message: msg}
	}
	var env wire.Envelope
	if err := json.Unmarshal([]byte(f.Data), &env); err != nil || env.RunID == "" || env.EventID == "" || len(env.Event) == 0 {
		return d.protocolErr("cli-bridge emitted an invalid canonical event envelope")
	}
	if env.RunID != d.ref.RunID {
		return &IdentityMismatchError{Op: d.spec.op, Reason: "cli-bridge canonical event belongs to another retained run"}
	}
	var ev struct {
		Type    string          `json:"type"`
		Part    *Part           `json:"part"`
		Delta   *string         `json:"delta"`
		Status  string          `json:"status"`
		Detail  string          `json:"detail"`
		Backend *string         `json:"backend"`
		Event   json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(env.Event, &ev); err != nil || ev.Type == "" {
		return d.protocolErr("cli-bridge emitted an invalid canonical event envelope")
	}
	if f.Event != ev.Type {
		return d.protocolErr("cli-bridge SSE event type does not match its canonical envelope")
	}
	if !f.HasID {
		return d.protocolErr("cli-bridge canonical event has no replay cursor")
	}
	if strconv.FormatInt(env.Sequence, 10) != f.ID || env.Sequence <= 0 {
		return d.protocolErr("cli-bridge canonical event cursor does not match its sequence")
	}
	if ev.Type == EventMessagePart {
		if reason := checkPart(env.Event, ev.Part, d.ref.SessionID); reason != "" {
			return d.protocolErr("cli-bridge emitted an invalid message part: " + reason)
		}
	}
	if ev.Type == wire.EventRaw && (ev.Backend == nil || *ev.Backend == "") {
		return d.protocolErr("cli-bridge emitted a raw event without its backend")
	}
	out := Event{ID: f.ID, Type: ev.Type, EventID: env.EventID, Sequence: env.Sequence, Raw: env.Event,
		Status: ev.Status, Detail: ev.Detail, Part: ev.Part}
	if ev.Type == EventMessagePart && ev.Part != nil && ev.Part.Type == "text" && ev.Delta != nil {
		out.Delta = *ev.Delta
	}
	if ev.Type == wire.EventRaw {
		out.Usage = canonicalUsage(ev.Event)
		var models []string
		models, out.FinishReason = canonicalProviderModels(ev.Event)
		out.ProviderModels = models
	}
	if ev.Type == EventInteraction {
		req, err := d.checkInteraction(env.Event)
		if err != nil {
			return err
		}
		out.Interaction = req
	}
	if ev.Type == EventStatus && (ev.Status == StatusCompleted || ev.Status == StatusFailed || ev.Status == StatusCancelled) {
		out.RunID, out.SessionID, out.ExecutionID = d.ref.RunID, d.ref.SessionID, d.ref.ExecutionID
		d.terminal = &out
		return nil
	}
	d.text += out.Delta
	if len(out.ProviderModels) > 0 {
		d.models = out.ProviderModels
	}
	if out.FinishReason != "" {
		d.finishReason = out.FinishReason
	}
	return d.emit(f.ID, []Event{out})
}

// checkPart checks a message.part.updated event against the agent
// interface's part shape, and returns what is wrong with it, if anything:
// every part has an id, a type, and its session (the retained session,
// when the client knows it) and message; text and reasoning parts carry
// their text; tool parts name their tool and carry a state whose status is
// running, completed (with its output) or error (with the error), and
// whose input is an object.
func checkPart(raw json.RawMessage, p *Part, sessionID string) string {
	if p == nil {
		return "no part"
	}
	var fields struct {
		Part map[string]json.RawMessage `json:"part"`
	}
	if json.Unmarshal(raw, &fields) != nil {
		return "not an object"
	}
	switch {
	case p.ID == "" || p.Type == "":
		return "no id or type"
	case p.SessionID == "" || p.MessageID == "":
		return "no sessionID or messageID"
	case sessionID != "" && p.SessionID != sessionID:
		return "it belongs to another session"
	}
	switch p.Type {
	case "text", "reasoning":
		if _, ok := fields.Part["text"]; !ok {
			return "a " + p.Type + " part without its text"
		}
	case "tool":
		st := p.State
		if p.Tool == "" || st == nil {
			return "a tool part without its tool or state"
		}
		var input map[string]json.RawMessage
		if json.Unmarshal(st.Input, &input) != nil || input == nil {
			return "a tool state whose input is not an object"
		}
		switch {
		case st.Status == ToolCompleted && st.Output == nil:
			return "a completed tool state without its output"
		case st.Status == ToolError && st.Error == "":
			return "a failed tool state without its error"
		case st.Status != ToolPending && st.Status != ToolRunning && st.Status != ToolCompleted && st.Status != ToolError:
			return "a tool state of status " + strconv.Quote(st.Status)
		}
	}
	return ""
}

// checkInteraction decodes an interaction event's request, and rejects one
// whose digest does not match its content or that is bound to another run.
func (d *decoder) checkInteraction(raw json.RawMessage) (*wire.InteractionRequest, error) {
	var ev struct {
		Request *wire.InteractionRequest `json:"request"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil || ev.Request == nil || ev.Request.ID == "" {
		return nil, d.protocolErr("cli-bridge emitted an invalid interaction event")
	}
	req := ev.Request
	if digest, err := wire.InteractionRequestDigest(*req); err != nil || digest != req.RequestDigest {
		return nil, d.protocolErr("cli-bridge interaction request digest does not match its content")
	}
	b := req.Binding
	if b.RunID != d.ref.RunID || b.Provider != d.ref.Provider || b.EnvironmentID != d.ref.EnvironmentID ||
		b.SessionID != d.ref.SessionID || b.ExecutionID != d.ref.ExecutionID || b.InteractionID != req.ID {
		return nil, &IdentityMismatchError{Op: d.spec.op, Reason: "cli-bridge interaction event does not bind to the retained run"}
	}
	return req, nil
}

// canonicalProviderModels reads the models a raw usage event says the
// model API named (`providerModels`); a requested model name proves
// nothing and is never read here.
// canonicalProviderModels reads a raw usage event's served models and
// the finish reason of its turn.
func canonicalProviderModels(raw json.RawMessage) ([]string, string) {
	var pe struct {
		Type           string   `json:"type"`
		ProviderModels []string `json:"providerModels"`
		FinishReason   string   `json:"finishReason"`
	}
	if json.Unmarshal(raw, &pe) != nil || pe.Type != wire.UsagePayloadType {
		return nil, ""
	}
	return pe.ProviderModels, pe.FinishReason
}

// canonicalUsage reads a raw provider usage event's token usage.
func canonicalUsage(raw json.RawMessage) *Usage {
	var pe struct {
		Type  string          `json:"type"`
		Usage json.RawMessage `json:"usage"`
		Data  struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &pe) != nil || pe.Type != wire.UsagePayloadType {
		return nil
	}
	src := pe.Usage
	if len(src) == 0 {
		src = pe.Data.Usage
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(src, &m) != nil || m == nil {
		return nil
	}
	in, out := count(m["inputTokens"]), count(m["outputTokens"])
	if in == nil || out == nil {
		return nil
	}
	u := &Usage{InputTokens: *in, OutputTokens: *out, TotalTokens: count(m["totalTokens"]),
		CacheReadInputTokens: count(m["cacheReadInputTokens"]), CacheWriteInputTokens: count(m["cacheCreationInputTokens"]),
		Cost: cost(m["cost"]), Provenance: UsageUnknown}
	var est bool
	if v, ok := m["estimated"]; ok && json.Unmarshal(v, &est) == nil {
		u.Provenance = map[bool]string{true: UsageEstimated, false: UsageMeasured}[est]
	}
	return u
}

// finishCanonical confirms the terminal status against the run snapshot
// and yields it.
func (d *decoder) finishCanonical(ctx context.Context) error {
	if d.terminal == nil {
		return &TransportError{Op: d.spec.op, Err: fmt.Errorf("cli-bridge canonical stream ended without terminal status")}
	}
	s, err := d.c.terminalSnapshot(ctx, d.spec.op, d.r)
	if err != nil {
		return err
	}
	want := map[string]string{StatusCompleted: wire.StatusDone, StatusFailed: wire.StatusError, StatusCancelled: wire.StatusCancelled}[d.terminal.Status]
	if s.Status != want {
		return d.protocolErr(fmt.Sprintf("cli-bridge canonical terminal status %q contradicts retained run status %q", d.terminal.Status, s.Status))
	}
	if !d.covered(d.terminal.ID, 0) && !d.yield(*d.terminal) {
		return errStopped
	}
	if d.terminal.Status != StatusCompleted || d.covered(d.terminal.ID, 1) {
		return nil
	}
	// A completed turn ends with its result, as a chat stream's does: the
	// event after its terminal status (id STATUS:1), with the totals of the
	// whole turn. A reader that resumed from a cursor read only the events
	// after it, so its result is the one a reader from the start gets.
	result := Event{Type: EventResult, FinalText: d.text, FinishReason: cmp.Or(d.finishReason, wire.FinishStop),
		Usage: d.usage, ModelRequests: d.requests, ProviderModels: d.models, Status: StatusCompleted,
		RunID: d.ref.RunID, SessionID: d.ref.SessionID, ExecutionID: d.ref.ExecutionID}
	if d.terminal.ID != "" {
		result.ID = d.terminal.ID + ":1"
	}
	if d.resumed() {
		full, ok, err := d.fullResult(ctx)
		if err != nil {
			return err
		}
		if ok {
			result = full
		}
	}
	if !d.yield(result) {
		return errStopped
	}
	return nil
}

// resumedAtEnd finishes a stream that had nothing after its cursor: when
// the cursor is a retained run's terminal status, the result after it
// (STATUS:1) is still to be read.
func (d *decoder) resumedAtEnd(ctx context.Context) error {
	if !d.resumed() {
		return nil
	}
	full, ok, err := d.fullResult(ctx)
	if err != nil || !ok {
		return err
	}
	if frame, _, _ := strings.Cut(full.ID, ":"); frame != d.cur.server || d.covered(frame, 1) {
		return nil
	}
	if !d.yield(full) {
		return errStopped
	}
	return nil
}

// fullResult replays a retained run from its first event and returns the
// result a reader from the start gets; ok is false when the run is not a
// retained one or did not complete.
func (d *decoder) fullResult(ctx context.Context) (res Event, ok bool, err error) {
	var sr streamResult
	err = d.c.streamRun(ctx, d.r, streamSpec{op: d.spec.op, since: "0"}, &sr, func(ev Event) bool {
		if ev.Type == EventResult {
			res, ok = ev, true
		}
		return true
	})
	return res, ok && sr.canonical, err
}
