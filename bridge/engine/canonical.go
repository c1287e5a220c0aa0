package engine

import (
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// canonical turns harness events into the stored frames of a retained
// run: each frame is a complete runtime envelope (wire.Envelope) whose
// sequence is the one the store will give it, since the run's goroutine
// is the only writer and appends one frame per sequence number.
type canonical struct {
	runID string
	seq   int64 // of the last frame made
	// part numbers the message parts; kind is the kind of the current
	// text or reasoning part, which a delta of the same kind extends.
	part int
	kind harness.EventKind
	// tools maps a tool call index to its part id.
	tools          map[int]string
	providerModels []string
}

func newCanonical(runID string, lastSeq int64) *canonical {
	return &canonical{runID: runID, seq: lastSeq, tools: map[int]string{}}
}

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
	ID     string  `json:"id"`
	Type   string  `json:"type"`
	Text   string  `json:"text,omitempty"`
	Tool   string  `json:"tool,omitempty"`
	CallID string  `json:"callID,omitempty"`
	Input  string  `json:"input,omitempty"`
	Output *string `json:"output,omitempty"`
	Error  bool    `json:"error,omitempty"`
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
			c.kind = ev.Kind
			c.partID(typ)
		}
		d := ev.Text
		return [][]byte{c.frame(partEvent{Type: "message.part.updated",
			Part: part{ID: c.runID + ":" + typ + ":" + strconv.Itoa(c.part), Type: typ}, Delta: &d})}
	case harness.KindToolCall:
		c.kind = 0
		tc := ev.ToolCall
		id, ok := c.tools[tc.Index]
		if !ok {
			id = c.partID("tool")
			c.tools[tc.Index] = id
		}
		return [][]byte{c.frame(partEvent{Type: "message.part.updated",
			Part: part{ID: id, Type: "tool", Tool: tc.Function.Name, CallID: tc.ID, Input: tc.Function.Arguments}})}
	case harness.KindToolResult:
		c.kind = 0
		tr := ev.ToolResult
		out := tr.Content
		return [][]byte{c.frame(partEvent{Type: "message.part.updated",
			Part: part{ID: c.partID("tool-result"), Type: "tool", CallID: tr.ToolCallID, Output: &out, Error: tr.IsError}})}
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

// usageEvent is the `raw` provider event carrying a turn's usage.
type usageEvent struct {
	Type  string     `json:"type"`
	Event usageInner `json:"event"`
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
		out = append(out, c.frame(usageEvent{Type: "raw", Event: in}))
	}
	if ev.Err != nil {
		return append(out, c.status("failed", ev.Err.Type+": "+ev.Err.Message))
	}
	return append(out, c.status("completed", ""))
}
