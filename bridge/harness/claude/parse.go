package claude

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/buger/jsonparser"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// parser turns Claude Code stream-json lines into events.
type parser struct {
	done bool
	// streamed holds the ids of messages whose stream events were seen,
	// so their full `assistant` copies are not reported twice.
	streamed map[string]bool
	// blockTool maps a content block index of the current message to its
	// tool call index.
	blockTool map[int]int
	nextTool  int
	// delta holds the event of the last delta line, which Line returns
	// without allocating a slice for it.
	delta [1]harness.Event
}

func newParser() *parser {
	return &parser{streamed: map[string]bool{}, blockTool: map[int]int{}}
}

func (p *parser) Done() bool { return p.done }

type line struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	// Event and Message are decoded in the same pass as the line: a
	// turn is mostly stream events, and decoding them twice doubled the
	// parser's cost.
	Event   *streamEvent `json:"event"`
	Message *message     `json:"message"`

	// result
	IsError        bool            `json:"is_error"`
	Result         string          `json:"result"`
	StopReason     string          `json:"stop_reason"`
	TerminalReason string          `json:"terminal_reason"`
	Errors         []string        `json:"errors"`
	Usage          *anthropicUsage `json:"usage"`
}

type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

type message struct {
	ID      string         `json:"id"`
	Model   string         `json:"model"`
	Content []contentBlock `json:"content"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type streamEvent struct {
	Type         string       `json:"type"`
	Index        int          `json:"index"`
	Message      message      `json:"message"`
	ContentBlock contentBlock `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
}

func (p *parser) Line(raw []byte) []harness.Event {
	if p.done {
		return nil
	}
	if evs, ok := fastDelta(p.delta[:0], raw); ok {
		return evs
	}
	return p.line(raw)
}

// line is the general path of Line.
func (p *parser) line(raw []byte) []harness.Event {
	var l line
	// A field of an unexpected type (say a string "message" on a line
	// kind that does not use it) leaves that field empty but keeps the
	// rest of the line; only a line that is not JSON is ignored.
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(raw, &l); err != nil && !errors.As(err, &typeErr) {
		return nil
	}
	switch l.Type {
	case "system":
		if l.Subtype == "init" && l.SessionID != "" {
			return []harness.Event{{Kind: harness.KindSession, NativeSessionID: l.SessionID}}
		}
	case "stream_event":
		if l.Event != nil {
			return p.streamEvent(*l.Event)
		}
	case "assistant":
		if l.Message != nil && !p.streamed[l.Message.ID] {
			return p.fullMessage(*l.Message)
		}
	case "user":
		if l.Message != nil {
			return toolResults(*l.Message)
		}
	case "result":
		p.done = true
		return []harness.Event{p.result(l)}
	}
	return nil
}

// fastDelta parses the line that makes up nearly all of a turn, a text or
// thinking delta, without reflection (a quarter of the general path's
// cost), appending its event to dst. ok is false for every other line,
// and for any line whose fields are not plain strings or valid UTF-8: the
// general path decides those. The line's type fields are compared as
// they stand in it, so a type spelled with escapes is left to the
// general path too.
func fastDelta(dst []harness.Event, raw []byte) (_ []harness.Event, ok bool) {
	// Nearly every delta line is read in one pass; the checks below
	// decide the ones it declines.
	if kind, text, ok := scanDelta(raw); ok {
		if text == "" {
			return nil, true
		}
		k := harness.KindText
		if kind == "thinking_delta" {
			k = harness.KindReasoning
		}
		return append(dst, harness.Event{Kind: k, Text: text}), true
	}
	return checkedDelta(dst, raw)
}

// checkedDelta is fastDelta for the lines scanDelta declines.
func checkedDelta(dst []harness.Event, raw []byte) (_ []harness.Event, ok bool) {
	if !isString(raw, "stream_event", "type") || !isString(raw, "content_block_delta", "event", "type") {
		return nil, false
	}
	var kind harness.EventKind
	var field string
	switch {
	case isString(raw, "text_delta", "event", "delta", "type"):
		kind, field = harness.KindText, "text"
	case isString(raw, "thinking_delta", "event", "delta", "type"):
		kind, field = harness.KindReasoning, "thinking"
	default:
		return nil, false
	}
	text, err := jsonparser.GetString(raw, "event", "delta", field)
	if err != nil || !utf8.ValidString(text) || !json.Valid(raw) {
		return nil, false
	}
	if text == "" {
		return nil, true
	}
	return append(dst, harness.Event{Kind: kind, Text: text}), true
}

// isString reports whether the value at path in raw is the JSON string
// want, written without escapes.
func isString(raw []byte, want string, path ...string) bool {
	v, typ, _, err := jsonparser.Get(raw, path...)
	return err == nil && typ == jsonparser.String && string(v) == want
}

func (p *parser) streamEvent(ev streamEvent) []harness.Event {
	switch ev.Type {
	case "message_start":
		p.blockTool = map[int]int{}
		if ev.Message.ID != "" {
			p.streamed[ev.Message.ID] = true
		}
		if ev.Message.Model != "" {
			return []harness.Event{{Kind: harness.KindProviderModel, ProviderModel: ev.Message.Model}}
		}
	case "content_block_start":
		if ev.ContentBlock.Type == "tool_use" {
			i := p.nextTool
			p.nextTool++
			p.blockTool[ev.Index] = i
			return []harness.Event{{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{
				Index: i, ID: ev.ContentBlock.ID, Type: "function",
				Function: wire.ToolCallFunction{Name: ev.ContentBlock.Name},
			}}}
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text != "" {
				return []harness.Event{{Kind: harness.KindText, Text: ev.Delta.Text}}
			}
		case "thinking_delta":
			if ev.Delta.Thinking != "" {
				return []harness.Event{{Kind: harness.KindReasoning, Text: ev.Delta.Thinking}}
			}
		case "input_json_delta":
			if i, ok := p.blockTool[ev.Index]; ok && ev.Delta.PartialJSON != "" {
				return []harness.Event{{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{
					Index: i, Function: wire.ToolCallFunction{Arguments: ev.Delta.PartialJSON},
				}}}
			}
		}
	}
	return nil
}

// fullMessage reports a message whose stream events were not seen.
func (p *parser) fullMessage(m message) []harness.Event {
	var out []harness.Event
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				out = append(out, harness.Event{Kind: harness.KindText, Text: b.Text})
			}
		case "thinking":
			if b.Thinking != "" {
				out = append(out, harness.Event{Kind: harness.KindReasoning, Text: b.Thinking})
			}
		case "tool_use":
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			out = append(out, harness.Event{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{
				Index: p.nextTool, ID: b.ID, Type: "function",
				Function: wire.ToolCallFunction{Name: b.Name, Arguments: args},
			}})
			p.nextTool++
		}
	}
	return out
}

func toolResults(m message) []harness.Event {
	var out []harness.Event
	for _, b := range m.Content {
		if b.Type != "tool_result" {
			continue
		}
		out = append(out, harness.Event{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{
			ToolCallID: b.ToolUseID, Content: wire.ContentText(b.Content), IsError: b.IsError,
		}})
	}
	return out
}

func (p *parser) result(l line) harness.Event {
	ev := harness.Event{Kind: harness.KindEnd, Usage: measured(l.Usage)}
	if l.IsError || l.Subtype != "success" {
		code := l.TerminalReason
		if code == "" {
			code = l.Subtype
		}
		msg := l.Result
		if len(l.Errors) > 0 {
			msg = strings.TrimSpace(msg + "\n" + strings.Join(l.Errors, "\n"))
		}
		if msg == "" {
			msg = "claude code reported an error (" + code + ")"
		}
		ev.Finish = wire.FinishError
		ev.Err = &wire.ErrorBody{Type: wire.TypeHarnessError, Code: code, Message: msg}
		return ev
	}
	switch l.StopReason {
	case "max_tokens":
		ev.Finish = wire.FinishLength
	default:
		ev.Finish = wire.FinishStop
	}
	return ev
}

// measured converts the result's usage; it is measured only when both
// input and output totals are present (an observed zero is kept).
func measured(u *anthropicUsage) *wire.Usage {
	if u == nil || u.InputTokens == nil || u.OutputTokens == nil {
		return nil
	}
	in := *u.InputTokens
	if u.CacheReadInputTokens != nil {
		in += *u.CacheReadInputTokens
	}
	if u.CacheCreationInputTokens != nil {
		in += *u.CacheCreationInputTokens
	}
	f := false
	return &wire.Usage{
		PromptTokens: in, CompletionTokens: *u.OutputTokens, TotalTokens: in + *u.OutputTokens,
		CacheReadInputTokens: u.CacheReadInputTokens, CacheWriteInputTokens: u.CacheCreationInputTokens,
		Estimated: &f,
	}
}
