package engine

import (
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
// Parts have the shape of the agent interface's message parts: every part
// names its session (the retained session's id) and message (one
// assistant message per run, messageID); a text or reasoning part carries
// its whole text so far and the event the delta it adds; a tool part
// carries its call's state (running with its input, then completed with
// its output or error), updated in place under one part id.
type canonical struct {
	// backend names the harness in raw events.
	runID, sessionID, backend string
	seq                       int64 // of the last frame made
	// part numbers the message parts; kind is the kind of the current
	// text or reasoning part, which a delta of the same kind extends, and
	// text its accumulated text.
	part int
	kind harness.EventKind
	text string
	// tools maps a tool call index to its part; calls maps a call id to it.
	tools          map[int]*toolPart
	calls          map[string]*toolPart
	providerModels []string
}

// toolPart is what a tool part's later updates repeat.
type toolPart struct {
	id, tool, callID string
	input            map[string]any
}

func newCanonical(runID, sessionID, backend string, lastSeq int64) *canonical {
	return &canonical{runID: runID, sessionID: sessionID, backend: backend, seq: lastSeq, tools: map[int]*toolPart{}, calls: map[string]*toolPart{}}
}

// messageID is the id of the run's assistant message.
func (c *canonical) messageID() string { return c.runID + ":message" }

// frame wraps one event object in its envelope.
func (c *canonical) frame(event any) []byte {
	c.seq++
	ev := mustJSON(event)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return mustJSON(wire.Envelope{RunID: c.runID, EventID: c.runID + ":" + strconv.FormatInt(c.seq, 10), Sequence: c.seq,
		Cursor: strconv.FormatInt(c.seq, 10), OccurredAt: now, ReceivedAt: now, Event: ev})
}

// part is a message part of a message.part.updated event.
type part struct {
	ID        string     `json:"id"`
	SessionID string     `json:"sessionID"`
	MessageID string     `json:"messageID"`
	Type      string     `json:"type"`
	Text      *string    `json:"text,omitempty"`
	Tool      string     `json:"tool,omitempty"`
	CallID    string     `json:"callID,omitempty"`
	State     *toolState `json:"state,omitempty"`
}

// Tool states of a tool part.
const (
	toolRunning   = "running"
	toolCompleted = "completed"
	toolError     = "error"
)

// toolState is a tool part's state: its input always, its output once
// completed, its error once failed.
type toolState struct {
	Status string         `json:"status"`
	Input  map[string]any `json:"input"`
	Output *string        `json:"output,omitempty"`
	Error  string         `json:"error,omitempty"`
}

type partEvent struct {
	Type  string  `json:"type"`
	Part  part    `json:"part"`
	Delta *string `json:"delta,omitempty"`
}

// statusEvent is a `status` event.
type statusEvent struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

func (c *canonical) status(status, detail string) []byte {
	return c.frame(statusEvent{Type: "status", Status: status, Detail: detail})
}

func (c *canonical) partID(kind string) string {
	c.part++
	return c.runID + ":" + kind + ":" + strconv.Itoa(c.part)
}

// newPart returns a part of the run's message.
func (c *canonical) newPart(id, typ string) part {
	return part{ID: id, SessionID: c.sessionID, MessageID: c.messageID(), Type: typ}
}

// toolInput decodes a tool call's JSON arguments as the state's input
// object; arguments that are not an object are kept under "arguments".
func toolInput(args string) map[string]any {
	in := map[string]any{}
	if args == "" {
		return in
	}
	if err := json.Unmarshal([]byte(args), &in); err != nil || in == nil {
		return map[string]any{"arguments": args}
	}
	return in
}

// events converts one harness event; KindEnd is handled by end.
func (c *canonical) events(ev harness.Event) [][]byte {
	switch ev.Kind {
	case harness.KindText, harness.KindReasoning:
		if ev.Text == "" {
			return nil
		}
		typ := "text"
		if ev.Kind == harness.KindReasoning {
			typ = "reasoning"
		}
		if c.kind != ev.Kind {
			c.kind, c.text = ev.Kind, ""
			c.partID(typ)
		}
		c.text += ev.Text
		d, text := ev.Text, c.text
		p := c.newPart(c.runID+":"+typ+":"+strconv.Itoa(c.part), typ)
		p.Text = &text
		return [][]byte{c.frame(partEvent{Type: "message.part.updated", Part: p, Delta: &d})}
	case harness.KindToolCall:
		c.kind = 0
		tc := ev.ToolCall
		tp, ok := c.tools[tc.Index]
		if !ok {
			tp = &toolPart{id: c.partID("tool")}
			c.tools[tc.Index] = tp
		}
		if tc.Function.Name != "" {
			tp.tool = tc.Function.Name
		}
		if tc.ID != "" {
			tp.callID = tc.ID
			c.calls[tc.ID] = tp
		}
		tp.input = toolInput(tc.Function.Arguments)
		return [][]byte{c.frame(partEvent{Type: "message.part.updated", Part: c.toolPart(tp, toolState{Status: toolRunning})})}
	case harness.KindToolResult:
		c.kind = 0
		tr := ev.ToolResult
		tp, ok := c.calls[tr.ToolCallID]
		if !ok {
			// A result of a call this run never saw (Codex's commands run
			// without one): a part of its own.
			tp = &toolPart{id: c.partID("tool"), callID: tr.ToolCallID, tool: "unknown"}
			if tr.ToolCallID != "" {
				c.calls[tr.ToolCallID] = tp
			}
		}
		st := toolState{Status: toolCompleted}
		out := tr.Content
		if tr.IsError {
			st.Status, st.Error = toolError, out
			if st.Error == "" {
				st.Error = "the tool failed"
			}
		} else {
			st.Output = &out
		}
		return [][]byte{c.frame(partEvent{Type: "message.part.updated", Part: c.toolPart(tp, st)})}
	case harness.KindProviderModel:
		for _, m := range c.providerModels {
			if m == ev.ProviderModel {
				return nil
			}
		}
		c.providerModels = append(c.providerModels, ev.ProviderModel)
	}
	return nil
}

// toolPart returns tool part tp in state st.
func (c *canonical) toolPart(tp *toolPart, st toolState) part {
	p := c.newPart(tp.id, "tool")
	p.Tool, p.CallID = tp.tool, tp.callID
	if p.Tool == "" {
		p.Tool = "unknown"
	}
	st.Input = tp.input
	if st.Input == nil {
		st.Input = map[string]any{}
	}
	p.State = &st
	return p
}

// usageEvent is the `raw` provider event carrying a turn's usage.
type usageEvent struct {
	Type    string     `json:"type"`
	Backend string     `json:"backend"`
	Event   usageInner `json:"event"`
}

type usageInner struct {
	Type           string         `json:"type"`
	Usage          map[string]any `json:"usage,omitempty"`
	ProviderModels []string       `json:"providerModels,omitempty"`
}

// end returns the last frames of a turn that ended with ev: its usage and
// served models, then the terminal status.
func (c *canonical) end(ev harness.Event) [][]byte {
	var out [][]byte
	if u := ev.Usage; u != nil || len(c.providerModels) > 0 {
		in := usageInner{Type: "usage", ProviderModels: c.providerModels}
		if u != nil {
			m := map[string]any{"inputTokens": u.PromptTokens, "outputTokens": u.CompletionTokens, "totalTokens": u.TotalTokens}
			if u.CacheReadInputTokens != nil {
				m["cacheReadInputTokens"] = *u.CacheReadInputTokens
			}
			if u.CacheWriteInputTokens != nil {
				m["cacheCreationInputTokens"] = *u.CacheWriteInputTokens
			}
			if u.Cost != nil {
				m["cost"] = *u.Cost
			}
			if u.Estimated != nil {
				m["estimated"] = *u.Estimated
			}
			in.Usage = m
		}
		out = append(out, c.frame(usageEvent{Type: "raw", Backend: c.backend, Event: in}))
	}
	if ev.Err != nil {
		return append(out, c.status("failed", ev.Err.Type+": "+ev.Err.Message))
	}
	return append(out, c.status("completed", ""))
}
