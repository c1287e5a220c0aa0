package engine

import (
	"cmp"
	"encoding/json"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// canonical turns harness events into the stored frames of a retained
// run: each frame is a complete runtime envelope (wire.Envelope) whose
// sequence is the one the store will give it, since the run's goroutine
// is the only writer and appends one frame per sequence number.
//
// Every event is a member of the agent interface's CanonicalStreamEvent
// union, within its bounds (strings of at most wire.MaxContractString
// UTF-16 code units, identifiers of at most wire.MaxContractIdentifier
// without outer white space, JSON values as wire.BoundedJSON accepts):
//
//   - Parts (message.part.updated) name their session (the retained
//     session's id) and message (one assistant message per run,
//     messageID). Part ids count up within the run, so the frames of a run
//     are a function of its harness events and a replay is byte-identical.
//   - A text or reasoning part carries its whole text so far and the event
//     the delta it adds. A part is full at the string bound: the text goes
//     on in a new part of the same kind, so nothing is cut and the deltas
//     of a kind still concatenate to what the harness said.
//   - A tool part follows its call in place under one part id: pending
//     while its arguments are still streaming (no frame per fragment, one
//     when they form a JSON object), running with its input, then
//     completed with its output or error with its error. Arguments that
//     are not a JSON object are kept as {"arguments": text}.
//   - What has no member of its own travels in one that fits: usage and
//     the served models in `raw` (backend: the harness; event: {"type":
//     "usage", ...}), and a value cut to the bounds in a `warning` (code
//     "truncated") after the frame it was cut in. A tool's input, output
//     and error are cut and announced; a status detail is cut ending in
//     "…"; over-long tool names and call ids are cut silently.
//
// The engine emits no session.updated or processing status: a retained
// run's session is fixed and named by every part.
type canonical struct {
	// backend names the harness in raw events.
	runID, sessionID, backend string
	seq                       int64 // of the last frame made
	// now stamps frames; time.Now but in tests.
	now func() time.Time
	// part numbers the message parts; kind is the kind of the current
	// text or reasoning part, which a delta of the same kind extends, text
	// its accumulated text and textLen that text's UTF-16 length.
	part    int
	kind    harness.EventKind
	text    string
	textLen int
	// tools maps a tool call index to its part; calls maps a call id to it.
	tools          map[int]*toolPart
	calls          map[string]*toolPart
	providerModels []string
}

// toolPart is what a tool part's later updates repeat.
type toolPart struct {
	id, tool, callID string
	// args are the call's arguments as the harness gave them; streamed
	// says they came in fragments, so may still be incomplete.
	args     string
	streamed bool
	// input is the state's input once known (nil while pending).
	input map[string]any
	// warned lists the fields whose cut a warning announced.
	warned map[string]bool
}

func newCanonical(runID, sessionID, backend string, lastSeq int64) *canonical {
	return &canonical{runID: runID, sessionID: sessionID, backend: backend, seq: lastSeq, now: time.Now,
		tools: map[int]*toolPart{}, calls: map[string]*toolPart{}}
}

// messageID is the id of the run's assistant message.
func (c *canonical) messageID() string { return c.runID + ":message" }

// frame wraps one event object in its envelope.
func (c *canonical) frame(event any) []byte {
	c.seq++
	ev := wire.MustJSON(event)
	now := c.now().UTC().Format(time.RFC3339Nano)
	return wire.MustJSON(wire.Envelope{RunID: c.runID, EventID: c.runID + ":" + strconv.FormatInt(c.seq, 10), Sequence: c.seq,
		Cursor: strconv.FormatInt(c.seq, 10), OccurredAt: now, ReceivedAt: now, Event: ev})
}

// status returns a status event; a detail past the string bound is cut
// and ends in "…".
func (c *canonical) status(status, detail string) []byte {
	if wire.JSLength(detail) > wire.MaxContractString {
		detail = wire.TruncateJS(detail, wire.MaxContractString-1) + "…"
	}
	return c.frame(wire.StatusEvent{Type: wire.EventStatus, Status: status, Detail: detail})
}

func (c *canonical) partID(kind string) string {
	c.part++
	return c.runID + ":" + kind + ":" + strconv.Itoa(c.part)
}

// newPart returns a part of the run's message.
func (c *canonical) newPart(id, typ string) wire.Part {
	return wire.Part{ID: id, SessionID: c.sessionID, MessageID: c.messageID(), Type: typ}
}

// identifier is s as an identifier of the interface: without outer white
// space and cut to its bound; fallback when nothing is left.
func identifier(s, fallback string) string {
	s = wire.TrimJS(wire.TruncateJS(wire.TrimJS(s), wire.MaxContractIdentifier))
	if s == "" {
		return fallback
	}
	return s
}

// events converts one harness event; KindEnd is handled by end.
func (c *canonical) events(ev harness.Event) [][]byte {
	switch ev.Kind {
	case harness.KindText, harness.KindReasoning:
		return c.textEvents(ev.Kind, ev.Text)
	case harness.KindToolCall:
		c.kind = 0
		tc := ev.ToolCall
		tp, ok := c.tools[tc.Index]
		if !ok {
			tp = &toolPart{id: c.partID("tool"), warned: map[string]bool{}}
			c.tools[tc.Index] = tp
		}
		if tc.Function.Name != "" {
			tp.tool = identifier(tc.Function.Name, "unknown")
		}
		if tc.ID != "" {
			// A call announced with its id carries its whole arguments
			// (or none yet, when they follow as fragments).
			tp.callID, tp.args = identifier(tc.ID, ""), tc.Function.Arguments
			c.calls[tc.ID] = tp
		} else {
			tp.args += tc.Function.Arguments
			tp.streamed = true
		}
		if tp.args == "" || tp.streamed && !json.Valid([]byte(tp.args)) {
			if ok {
				return nil // a fragment that does not complete the arguments
			}
			return [][]byte{c.frame(wire.PartEvent{Type: wire.EventMessagePartUpdated, Part: c.toolPart(tp, wire.ToolState{Status: wire.ToolPending})})}
		}
		in, cut := boundedInput(tp.args)
		tp.input = in
		out := [][]byte{c.frame(wire.PartEvent{Type: wire.EventMessagePartUpdated, Part: c.toolPart(tp, wire.ToolState{Status: wire.ToolRunning})})}
		if cut {
			out = append(out, c.warn(tp, "input", "the input of tool part "+tp.id+" was past the contract's bounds and was cut")...)
		}
		return out
	case harness.KindToolResult:
		c.kind = 0
		tr := ev.ToolResult
		tp, ok := c.calls[tr.ToolCallID]
		if !ok {
			// A result of a call this run never saw (Codex's commands run
			// without one): a part of its own.
			tp = &toolPart{id: c.partID("tool"), callID: identifier(tr.ToolCallID, ""), tool: "unknown", warned: map[string]bool{}}
			if tr.ToolCallID != "" {
				c.calls[tr.ToolCallID] = tp
			}
		}
		if tp.input == nil {
			tp.input, _ = boundedInput(tp.args)
		}
		st := wire.ToolState{Status: wire.ToolCompleted}
		field, text := "output", tr.Content
		if tr.IsError {
			field, st.Status = "error", wire.ToolError
			if text == "" {
				text = "the tool failed"
			}
		}
		cut := wire.JSLength(text) > wire.MaxContractString
		text = wire.TruncateJS(text, wire.MaxContractString)
		if tr.IsError {
			st.Error = text
		} else {
			st.Output = &text
		}
		out := [][]byte{c.frame(wire.PartEvent{Type: wire.EventMessagePartUpdated, Part: c.toolPart(tp, st)})}
		if cut {
			out = append(out, c.warn(tp, field, "the "+field+" of tool part "+tp.id+" was cut to "+
				strconv.Itoa(wire.MaxContractString)+" characters")...)
		}
		return out
	case harness.KindProviderModel:
		m := wire.TruncateJS(ev.ProviderModel, wire.MaxContractString)
		for _, seen := range c.providerModels {
			if seen == m {
				return nil
			}
		}
		if len(c.providerModels) < maxProviderModels {
			c.providerModels = append(c.providerModels, m)
		}
	}
	return nil
}

// maxProviderModels is the most served models a usage event lists (the
// interface's longest array).
const maxProviderModels = 1024

// textEvents appends s to the current text or reasoning part, or to new
// ones: a part whose text reached the string bound is full.
func (c *canonical) textEvents(kind harness.EventKind, s string) [][]byte {
	typ := "text"
	if kind == harness.KindReasoning {
		typ = "reasoning"
	}
	var out [][]byte
	for s != "" {
		if c.kind != kind || c.textLen >= wire.MaxContractString {
			c.kind, c.text, c.textLen = kind, "", 0
			c.partID(typ)
		}
		piece := wire.TruncateJS(s, wire.MaxContractString-c.textLen)
		if piece == "" { // the next character needs two code units, one is left
			c.kind = 0
			continue
		}
		s = s[len(piece):]
		c.text += piece
		c.textLen += wire.JSLength(piece)
		d, text := piece, c.text
		p := c.newPart(c.runID+":"+typ+":"+strconv.Itoa(c.part), typ)
		p.Text = text
		out = append(out, c.frame(wire.PartEvent{Type: wire.EventMessagePartUpdated, Part: p, Delta: &d}))
	}
	return out
}

// warn returns the warning that field of tool part tp was cut, once per
// part and field (a cut input is repeated by every later state).
func (c *canonical) warn(tp *toolPart, field, msg string) [][]byte {
	if tp.warned[field] {
		return nil
	}
	tp.warned[field] = true
	return [][]byte{c.frame(wire.WarningEvent{Type: wire.EventWarning, Code: wire.WarnTruncated, Message: msg})}
}

// boundedInput decodes a tool call's JSON arguments as the state's input
// object, within the interface's bounds. Arguments that are not an object
// are kept under "arguments"; strings past the bound are cut, and input
// still past the bounds (too deep, too wide) is kept as its arguments text,
// cut. cut reports either.
func boundedInput(args string) (in map[string]any, cut bool) {
	in = map[string]any{}
	if args == "" {
		return in, false
	}
	if err := json.Unmarshal([]byte(args), &in); err != nil || in == nil {
		in = map[string]any{"arguments": args}
	}
	if wire.BoundedJSON(wire.MustJSON(in)) {
		return in, false
	}
	if v := cutStrings(in); wire.BoundedJSON(wire.MustJSON(v)) {
		return v.(map[string]any), true
	}
	return map[string]any{"arguments": wire.TruncateJS(args, wire.MaxContractString)}, true
}

// cutStrings returns v with every string cut to the string bound.
func cutStrings(v any) any {
	switch x := v.(type) {
	case string:
		return wire.TruncateJS(x, wire.MaxContractString)
	case []any:
		for i, e := range x {
			x[i] = cutStrings(e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = cutStrings(e)
		}
	}
	return v
}

// toolPart returns tool part tp in state st: pending (its input not yet
// known), or with tp's input.
func (c *canonical) toolPart(tp *toolPart, st wire.ToolState) wire.Part {
	p := c.newPart(tp.id, "tool")
	p.Tool, p.CallID = tp.tool, tp.callID
	if p.Tool == "" {
		p.Tool = "unknown"
	}
	in := tp.input
	if in == nil || st.Status == wire.ToolPending {
		in = map[string]any{}
	}
	st.Input = wire.MustJSON(in)
	p.State = &st
	return p
}

// end returns the last frames of a turn that ended with ev: its usage,
// served models and (for a completed turn) finish reason, then the
// terminal status.
func (c *canonical) end(ev harness.Event) [][]byte {
	var out [][]byte
	finish := ""
	if ev.Err == nil {
		finish = cmp.Or(ev.Finish, wire.FinishStop)
	}
	if u := ev.Usage; u != nil || len(c.providerModels) > 0 || finish != "" {
		in := wire.UsagePayload{Type: wire.UsagePayloadType, ProviderModels: c.providerModels, FinishReason: finish}
		if u != nil {
			total := u.TotalTokens
			ru := &wire.ReportedUsage{TokenUsage: wire.TokenUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
				TotalTokens: &total, CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheWriteInputTokens},
				Estimated: u.Estimated}
			ru.Cost = u.TurnTotal().Cost
			in.Usage = ru
		}
		out = append(out, c.frame(wire.UsageEvent{Type: wire.EventRaw, Backend: identifier(c.backend, "unknown"), Event: in}))
	}
	if ev.Err != nil {
		return append(out, c.status(wire.CanonicalFailed, ev.Err.Type+": "+ev.Err.Message))
	}
	return append(out, c.status(wire.CanonicalCompleted, ""))
}
