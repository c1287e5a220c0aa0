package gemini

import (
	"encoding/json"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// acpLine is the part of an ACP (JSON-RPC) line the parser reads.
type acpLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		SessionID  string   `json:"sessionId"`
		StopReason string   `json:"stopReason"`
		Meta       *acpMeta `json:"_meta"`
	} `json:"result"`
	Error *struct {
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	Params struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			// Content is a content block for a chunk, a list of tool
			// call contents for a tool call.
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"toolCallId"`
			Status     string          `json:"status"`
		} `json:"update"`
	} `json:"params"`
}

// acpMeta is the `_meta` of the answer to session/prompt: the turn's
// token totals.
type acpMeta struct {
	Quota *struct {
		TokenCount *struct {
			InputTokens  *int64 `json:"input_tokens"`
			OutputTokens *int64 `json:"output_tokens"`
		} `json:"token_count"`
	} `json:"quota"`
}

// chunk is the content block of a message or thought chunk.
type chunk struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolContent is one content of a tool call.
type toolContent struct {
	Type    string `json:"type"`
	Content chunk  `json:"content"`
}

// rpc parses one ACP line: the answer to session/new names the session;
// message and thought chunks become text and reasoning; a tool call (or,
// for a call that asked permission first and so was never announced, its
// update) becomes a tool call, and its completed or failed update its
// result; the answer to session/prompt ends the turn with its stop reason
// and the measured usage of its `_meta.quota`, and an error answer to any
// request of the conversation ends it with the error.
func (p *parser) rpc(raw []byte) []harness.Event {
	var l acpLine
	if json.Unmarshal(raw, &l) != nil {
		return nil
	}
	if len(l.ID) > 0 && l.Method == "" {
		id := unquote(l.ID)
		if !strings.HasPrefix(id, "boxctl-") {
			return nil
		}
		if l.Error != nil {
			p.done = true
			msg := l.Error.Message
			var d struct {
				Details string `json:"details"`
			}
			if json.Unmarshal(l.Error.Data, &d) == nil && d.Details != "" {
				msg += ": " + d.Details
			}
			return []harness.Event{{Kind: harness.KindEnd, Finish: wire.FinishError,
				Err: &wire.ErrorBody{Type: wire.TypeHarnessError, Code: "acp_error", Message: "gemini answered " + id + ": " + msg}}}
		}
		switch {
		case id == idSession && l.Result != nil && l.Result.SessionID != "":
			return []harness.Event{{Kind: harness.KindSession, NativeSessionID: l.Result.SessionID}}
		case strings.HasPrefix(id, idPromptPrefix) && l.Result != nil:
			p.done = true
			return []harness.Event{p.stopped(l.Result.StopReason, l.Result.Meta)}
		}
		return nil
	}
	if l.Method != "session/update" {
		return nil
	}
	u := l.Params.Update
	switch u.SessionUpdate {
	case "agent_message_chunk", "agent_thought_chunk":
		var c chunk
		if json.Unmarshal(u.Content, &c) != nil || c.Type != "text" || c.Text == "" {
			return nil
		}
		if u.SessionUpdate == "agent_thought_chunk" {
			return []harness.Event{{Kind: harness.KindReasoning, Text: c.Text}}
		}
		return []harness.Event{p.text(c.Text)}
	case "tool_call":
		if _, seen := p.tools[u.ToolCallID]; !seen && u.ToolCallID != "" {
			return []harness.Event{p.call(u.ToolCallID)}
		}
	case "tool_call_update":
		if u.Status != "completed" && u.Status != "failed" || u.ToolCallID == "" {
			return nil
		}
		var out []harness.Event
		if _, seen := p.tools[u.ToolCallID]; !seen {
			out = append(out, p.call(u.ToolCallID))
		}
		var contents []toolContent
		json.Unmarshal(u.Content, &contents)
		var texts []string
		for _, c := range contents {
			if c.Type == "content" && c.Content.Text != "" {
				texts = append(texts, c.Content.Text)
			}
		}
		return append(out, harness.Event{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{
			ToolCallID: u.ToolCallID, Content: strings.Join(texts, "\n"), IsError: u.Status == "failed"}})
	}
	return nil
}

// call returns the tool call event of call id. The protocol carries the
// tool's title and kind, not its input.
func (p *parser) call(id string) harness.Event {
	p.afterTool = true
	i := p.nextTool
	p.nextTool++
	p.tools[id] = i
	return harness.Event{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{
		Index: i, ID: id, Type: "function", Function: wire.ToolCallFunction{Name: toolName(id), Arguments: "{}"}}}
}

// stopped is the end of a turn the prompt's answer stopped for reason.
// A cancelled turn ends as an error, so that the run ends cancelled.
func (p *parser) stopped(reason string, meta *acpMeta) harness.Event {
	end := harness.Event{Kind: harness.KindEnd, Finish: wire.FinishStop}
	if meta != nil && meta.Quota != nil && meta.Quota.TokenCount != nil {
		tc := meta.Quota.TokenCount
		end.Usage = measured(&stats{InputTokens: tc.InputTokens, OutputTokens: tc.OutputTokens})
	}
	switch reason {
	case "end_turn", "max_turn_requests":
	case "max_tokens":
		end.Finish = wire.FinishLength
	case "cancelled":
		end.Finish = wire.FinishError
		end.Err = &wire.ErrorBody{Type: wire.TypeRunCancelled, Code: reason, Message: "gemini stopped the turn (cancelled)"}
	default:
		end.Finish = wire.FinishError
		end.Err = &wire.ErrorBody{Type: wire.TypeHarnessError, Code: reason, Message: "gemini stopped the turn: " + reason}
	}
	return end
}
