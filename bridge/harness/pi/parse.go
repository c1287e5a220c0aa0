package pi

import (
	"encoding/json"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// parser turns Pi rpc-mode lines into events; see the package doc.
type parser struct {
	done        bool
	sessionSeen bool
	// sent is how much text of each content block of the current
	// assistant message was reported, by content index.
	sent map[int]int
	// calls marks the tool call ids already reported.
	calls    map[string]bool
	nextTool int
	// texts counts the assistant messages that reported text; msgText
	// says whether the current one did.
	texts   int
	msgText bool
	// usage sums the assistant messages of the turn; measured reports
	// that at least one carried usage.
	usage    wire.Usage
	measured bool
	// last is the stop reason and error of the last assistant message.
	lastStop, lastErr string
	diag              string
}

func newParser() *parser {
	return &parser{sent: map[int]int{}, calls: map[string]bool{}}
}

func (p *parser) Done() bool { return p.done }

// Diagnosis returns the last error Pi reported.
func (p *parser) Diagnosis() string {
	if p.diag == "" {
		return ""
	}
	return "pi last reported: " + p.diag
}

type line struct {
	Type    string          `json:"type"`
	Command string          `json:"command"`
	Success *bool           `json:"success"`
	Error   string          `json:"error"`
	Data    json.RawMessage `json:"data"`

	Message *message    `json:"message"`
	Event   *eventDelta `json:"assistantMessageEvent"`

	ToolCallID string          `json:"toolCallId"`
	Result     json.RawMessage `json:"result"`
	IsError    bool            `json:"isError"`

	WillRetry    *bool  `json:"willRetry"`
	ErrorMessage string `json:"errorMessage"`
	FinalError   string `json:"finalError"`
}

type message struct {
	Role          string  `json:"role"`
	Content       []block `json:"content"`
	StopReason    string  `json:"stopReason"`
	ErrorMessage  string  `json:"errorMessage"`
	ResponseModel string  `json:"responseModel"`
	Usage         *usage  `json:"usage"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type usage struct {
	Input      *int64 `json:"input"`
	Output     *int64 `json:"output"`
	CacheRead  *int64 `json:"cacheRead"`
	CacheWrite *int64 `json:"cacheWrite"`
}

type eventDelta struct {
	Type         string   `json:"type"`
	ContentIndex int      `json:"contentIndex"`
	Delta        string   `json:"delta"`
	Partial      *message `json:"partial"`
	ToolCall     *block   `json:"toolCall"`
}

func (p *parser) Line(raw []byte) []harness.Event {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil || p.done {
		return nil
	}
	switch l.Type {
	case "response":
		return p.response(l)
	case "message_start":
		if l.Message != nil && l.Message.Role == "assistant" {
			p.sent, p.msgText = map[int]int{}, false
		}
	case "message_update":
		return p.update(l)
	case "message_end":
		if l.Message != nil && l.Message.Role == "assistant" {
			return p.messageEnd(*l.Message)
		}
	case "tool_execution_end":
		return []harness.Event{{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{
			ToolCallID: l.ToolCallID, Content: resultText(l.Result), IsError: l.IsError,
		}}}
	case "auto_retry_start":
		p.diag = l.ErrorMessage
	case "auto_retry_end":
		if l.FinalError != "" {
			p.diag = l.FinalError
		}
	case "agent_end":
		// 1.x says whether it will retry and ends at agent_settled; 0.73
		// has no such field and ends here.
		if l.WillRetry == nil {
			return p.end()
		}
	case "agent_settled":
		return p.end()
	}
	return nil
}

func (p *parser) response(l line) []harness.Event {
	switch {
	case l.Success != nil && !*l.Success:
		msg := l.Error
		if msg == "" {
			msg = "pi refused the " + l.Command + " command"
		}
		p.diag = msg
		if l.Command == "prompt" {
			p.done = true
			return []harness.Event{{Kind: harness.KindEnd, Finish: wire.FinishError,
				Err: &wire.ErrorBody{Type: wire.TypeHarnessError, Code: "prompt_rejected", Message: msg}}}
		}
	case l.Command == "get_state" && !p.sessionSeen:
		var st struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(l.Data, &st) == nil && st.SessionID != "" {
			p.sessionSeen = true
			return []harness.Event{{Kind: harness.KindSession, NativeSessionID: st.SessionID}}
		}
	}
	return nil
}

// update reports what a message_update adds: the growth of the snapshot
// when there is one (0.73), else the delta (1.x).
func (p *parser) update(l line) []harness.Event {
	ev := l.Event
	if ev == nil {
		return nil
	}
	snap := l.Message
	if snap == nil {
		snap = ev.Partial
	}
	var out []harness.Event
	if snap != nil {
		out = p.grow(snap.Content)
	} else {
		switch ev.Type {
		case "text_delta":
			out = p.add(ev.ContentIndex, harness.KindText, ev.Delta)
		case "thinking_delta":
			out = p.add(ev.ContentIndex, harness.KindReasoning, ev.Delta)
		}
	}
	if ev.Type == "toolcall_end" && ev.ToolCall != nil {
		out = append(out, p.toolCall(*ev.ToolCall)...)
	}
	return out
}

// grow reports the text each block of a snapshot has beyond what was sent.
func (p *parser) grow(content []block) []harness.Event {
	var out []harness.Event
	for i, b := range content {
		var kind harness.EventKind
		var text string
		switch b.Type {
		case "text":
			kind, text = harness.KindText, b.Text
		case "thinking":
			kind, text = harness.KindReasoning, b.Thinking
		default:
			continue
		}
		if sent := p.sent[i]; len(text) > sent {
			out = append(out, p.add(i, kind, text[sent:])...)
		}
	}
	return out
}

func (p *parser) add(index int, kind harness.EventKind, text string) []harness.Event {
	if text == "" {
		return nil
	}
	p.sent[index] += len(text)
	if kind == harness.KindText && !p.msgText {
		// Messages of one turn read as paragraphs.
		if p.texts > 0 {
			text = "\n\n" + text
		}
		p.texts++
		p.msgText = true
	}
	return []harness.Event{{Kind: kind, Text: text}}
}

func (p *parser) toolCall(b block) []harness.Event {
	if b.ID == "" || p.calls[b.ID] {
		return nil
	}
	p.calls[b.ID] = true
	args := string(b.Arguments)
	if args == "" || args == "null" {
		args = "{}"
	}
	i := p.nextTool
	p.nextTool++
	return []harness.Event{{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{
		Index: i, ID: b.ID, Type: "function", Function: wire.ToolCallFunction{Name: b.Name, Arguments: args},
	}}}
}

func (p *parser) messageEnd(m message) []harness.Event {
	out := p.grow(m.Content)
	for _, b := range m.Content {
		if b.Type == "toolCall" {
			out = append(out, p.toolCall(b)...)
		}
	}
	p.sent, p.msgText = map[int]int{}, false
	if m.ResponseModel != "" {
		out = append(out, harness.Event{Kind: harness.KindProviderModel, ProviderModel: m.ResponseModel})
	}
	if u := m.Usage; u != nil && u.Input != nil && u.Output != nil {
		in := *u.Input + harness.Tokens(u.CacheRead) + harness.Tokens(u.CacheWrite)
		p.usage.PromptTokens += in
		p.usage.CompletionTokens += *u.Output
		p.usage.TotalTokens += in + *u.Output
		if u.CacheRead != nil {
			p.usage.CacheReadInputTokens = harness.AddTokens(p.usage.CacheReadInputTokens, *u.CacheRead)
		}
		if u.CacheWrite != nil {
			p.usage.CacheWriteInputTokens = harness.AddTokens(p.usage.CacheWriteInputTokens, *u.CacheWrite)
		}
		p.measured = true
	}
	p.lastStop, p.lastErr = m.StopReason, m.ErrorMessage
	if m.ErrorMessage != "" {
		p.diag = m.ErrorMessage
	}
	return out
}

func (p *parser) end() []harness.Event {
	p.done = true
	ev := harness.Event{Kind: harness.KindEnd, Finish: wire.FinishStop}
	if p.measured {
		u := p.usage
		f := false
		u.Estimated = &f
		ev.Usage = &u
	}
	switch p.lastStop {
	case "length":
		ev.Finish = wire.FinishLength
	case "error", "aborted":
		msg := p.lastErr
		if msg == "" {
			msg = "pi ended the turn: " + p.lastStop
		}
		ev.Finish = wire.FinishError
		ev.Err = &wire.ErrorBody{Type: wire.TypeHarnessError, Code: p.lastStop, Message: msg}
	}
	return []harness.Event{ev}
}

// resultText flattens a tool result's content to its text parts.
func resultText(raw json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}
