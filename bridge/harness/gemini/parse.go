package gemini

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// parser turns `gemini -o stream-json` lines into events.
type parser struct {
	done bool
	// requested is the model the init line named.
	requested string
	nextTool  int
	tools     map[string]int
	// texts counts text runs; afterTool marks a tool seen since the last
	// text, so the next text starts a new paragraph.
	texts     int
	afterTool bool
	diag      string
	// served are the served models reported (ACP's marker lines).
	served map[string]bool
}

func newParser() *parser { return &parser{tools: map[string]int{}, served: map[string]bool{}} }

func (p *parser) Done() bool { return p.done }

// Diagnosis returns the last warning or error the CLI printed.
func (p *parser) Diagnosis() string {
	if p.diag == "" {
		return ""
	}
	return "gemini last reported: " + p.diag
}

type line struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	Model     string          `json:"model"`
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	ToolName  string          `json:"tool_name"`
	ToolID    string          `json:"tool_id"`
	Params    json.RawMessage `json:"parameters"`
	Status    string          `json:"status"`
	Output    string          `json:"output"`
	Message   string          `json:"message"`
	Error     *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *stats `json:"stats"`
}

type stats struct {
	InputTokens  *int64                     `json:"input_tokens"`
	OutputTokens *int64                     `json:"output_tokens"`
	Cached       *int64                     `json:"cached"`
	Models       map[string]json.RawMessage `json:"models"`
}

// Line parses a `gemini -o stream-json` line, or an ACP line of `gemini
// --acp` and the served-model marker its preloaded module prints.
func (p *parser) Line(raw []byte) []harness.Event {
	if p.done {
		return nil
	}
	if bytes.Contains(raw, []byte(`"jsonrpc"`)) {
		return p.rpc(raw)
	}
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil
	}
	switch l.Type {
	case servedModelType:
		if l.Model != "" && !p.served[l.Model] {
			p.served[l.Model] = true
			return []harness.Event{{Kind: harness.KindProviderModel, ProviderModel: l.Model}}
		}
	case "init":
		p.requested = l.Model
		if l.SessionID != "" {
			return []harness.Event{{Kind: harness.KindSession, NativeSessionID: l.SessionID}}
		}
	case "message":
		if l.Role == "assistant" && l.Content != "" {
			return []harness.Event{p.text(l.Content)}
		}
	case "tool_use":
		p.afterTool = true
		i := p.nextTool
		p.nextTool++
		p.tools[l.ToolID] = i
		args := string(l.Params)
		if args == "" || args == "null" {
			args = "{}"
		}
		return []harness.Event{{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{
			Index: i, ID: l.ToolID, Type: "function", Function: wire.ToolCallFunction{Name: l.ToolName, Arguments: args},
		}}}
	case "tool_result":
		p.afterTool = true
		content := l.Output
		if l.Error != nil && content == "" {
			content = l.Error.Message
		}
		return []harness.Event{{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{
			ToolCallID: l.ToolID, Content: content, IsError: l.Status == "error",
		}}}
	case "error":
		p.diag = l.Message
	case "result":
		p.done = true
		return p.result(l)
	}
	return nil
}

// text is an assistant text event: a paragraph of its own after a tool.
func (p *parser) text(s string) harness.Event {
	if p.afterTool && p.texts > 0 {
		s = "\n\n" + s
	}
	p.afterTool = false
	p.texts++
	return harness.Event{Kind: harness.KindText, Text: s}
}

func (p *parser) result(l line) []harness.Event {
	end := harness.Event{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: measured(l.Stats)}
	if l.Status != "success" {
		msg, code := p.diag, l.Status
		if l.Error != nil {
			msg, code = l.Error.Message, l.Error.Type
		}
		if msg == "" {
			msg = "gemini ended the turn with status " + l.Status
		}
		end.Finish = wire.FinishError
		end.Err = &wire.ErrorBody{Type: wire.TypeHarnessError, Code: code, Message: msg}
		return []harness.Event{end}
	}
	var out []harness.Event
	if l.Stats != nil && p.requested != "" && !strings.HasPrefix(p.requested, "auto") {
		for _, m := range slices.Sorted(maps.Keys(l.Stats.Models)) {
			if m != p.requested {
				out = append(out, harness.Event{Kind: harness.KindProviderModel, ProviderModel: m})
			}
		}
	}
	return append(out, end)
}

// measured converts the result's stats: measured only with both input and
// output totals (an observed zero is kept).
func measured(s *stats) *wire.Usage {
	if s == nil || s.InputTokens == nil || s.OutputTokens == nil {
		return nil
	}
	f := false
	return &wire.Usage{PromptTokens: *s.InputTokens, CompletionTokens: *s.OutputTokens,
		TotalTokens: *s.InputTokens + *s.OutputTokens, CacheReadInputTokens: s.Cached, Estimated: &f}
}
