package opencode

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// parser turns `opencode run --format json` lines into events.
type parser struct {
	done        bool
	sessionSeen bool
	texts       int
	nextTool    int
	calls       map[string]bool
	// parts are the server parts already passed on.
	parts    map[string]bool
	usage    wire.Usage
	measured bool
	// served is the last served model reported.
	served string
}

// ServedModelType is the type of the lines the served-model plugin prints:
// {"type":"boxctl.served_model","model":"..."}.
const ServedModelType = "boxctl.served_model"

func newParser() *parser { return &parser{calls: map[string]bool{}, parts: map[string]bool{}} }

func (p *parser) Done() bool { return p.done }

type line struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Model     string `json:"model"`
	Part      part   `json:"part"`
	// Properties, ID, Status, Failure and Body are those of a relayed
	// server's lines (see RunRelay).
	Properties *serveProps     `json:"properties"`
	ID         string          `json:"id"`
	Status     int             `json:"status"`
	Failure    string          `json:"failure"`
	Body       json.RawMessage `json:"body"`
	Error      *lineError      `json:"error"`
}

type lineError struct {
	Name string `json:"name"`
	Data struct {
		Message    string `json:"message"`
		StatusCode int    `json:"statusCode"`
	} `json:"data"`
}

type part struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	Synthetic bool   `json:"synthetic"`
	Time      *struct {
		End *int64 `json:"end"`
	} `json:"time"`
	Type   string `json:"type"`
	Text   string `json:"text"`
	Tool   string `json:"tool"`
	CallID string `json:"callID"`
	State  struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Output string          `json:"output"`
		Error  string          `json:"error"`
	} `json:"state"`
	Reason string  `json:"reason"`
	Tokens *tokens `json:"tokens"`
}

type tokens struct {
	Input     *int64 `json:"input"`
	Output    *int64 `json:"output"`
	Reasoning *int64 `json:"reasoning"`
	Cache     *struct {
		Read  *int64 `json:"read"`
		Write *int64 `json:"write"`
	} `json:"cache"`
}

func (p *parser) Line(raw []byte) []harness.Event {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil || p.done {
		return nil
	}
	if l.Properties != nil || l.Type == ResponseType {
		if !p.serve(&l) {
			return nil
		}
	}
	var out []harness.Event
	if l.SessionID != "" && !p.sessionSeen {
		p.sessionSeen = true
		out = append(out, harness.Event{Kind: harness.KindSession, NativeSessionID: l.SessionID})
	}
	switch l.Type {
	case ServedModelType:
		if l.Model != "" && l.Model != p.served {
			p.served = l.Model
			out = append(out, harness.Event{Kind: harness.KindProviderModel, ProviderModel: l.Model})
		}
	case "text":
		if l.Part.Text != "" {
			text := l.Part.Text
			if p.texts > 0 {
				// Parts of one turn read as paragraphs.
				text = "\n\n" + text
			}
			p.texts++
			out = append(out, harness.Event{Kind: harness.KindText, Text: text})
		}
	case "reasoning":
		if l.Part.Text != "" {
			out = append(out, harness.Event{Kind: harness.KindReasoning, Text: l.Part.Text})
		}
	case "tool_use":
		out = append(out, p.tool(l.Part)...)
	case "step_finish":
		p.add(l.Part.Tokens)
		// Tool calls continue the turn, and so may an unknown reason.
		if l.Part.Reason != "tool-calls" && l.Part.Reason != "unknown" {
			out = append(out, p.end(l.Part.Reason))
		}
	case "error":
		p.done = true
		msg, code := "opencode reported an error", ""
		if l.Error != nil {
			code = l.Error.Name
			if l.Error.Data.Message != "" {
				msg = l.Error.Data.Message
			}
		}
		out = append(out, harness.Event{Kind: harness.KindEnd, Finish: wire.FinishError, Usage: p.total(),
			Err: &wire.ErrorBody{Type: wire.TypeHarnessError, Code: code, Message: msg}})
	}
	return out
}

func (p *parser) tool(pt part) []harness.Event {
	if pt.CallID == "" || p.calls[pt.CallID] {
		return nil
	}
	switch pt.State.Status {
	case "completed", "error":
	default:
		return nil
	}
	p.calls[pt.CallID] = true
	args := string(pt.State.Input)
	if args == "" || args == "null" {
		args = "{}"
	}
	content := pt.State.Output
	if pt.State.Status == "error" && content == "" {
		content = pt.State.Error
	}
	i := p.nextTool
	p.nextTool++
	return []harness.Event{
		{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: i, ID: pt.CallID, Type: "function",
			Function: wire.ToolCallFunction{Name: pt.Tool, Arguments: args}}},
		{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: pt.CallID, Content: content,
			IsError: pt.State.Status == "error"}},
	}
}

// add sums a step's tokens; opencode reports input without cached input
// and output without reasoning, so both are added back.
func (p *parser) add(t *tokens) {
	if t == nil || t.Input == nil || t.Output == nil {
		return
	}
	in, out := *t.Input, *t.Output+harness.Tokens(t.Reasoning)
	if t.Cache != nil {
		in += harness.Tokens(t.Cache.Read) + harness.Tokens(t.Cache.Write)
		if t.Cache.Read != nil {
			p.usage.CacheReadInputTokens = harness.AddTokens(p.usage.CacheReadInputTokens, *t.Cache.Read)
		}
		if t.Cache.Write != nil {
			p.usage.CacheWriteInputTokens = harness.AddTokens(p.usage.CacheWriteInputTokens, *t.Cache.Write)
		}
	}
	p.usage.PromptTokens += in
	p.usage.CompletionTokens += out
	p.usage.TotalTokens += in + out
	p.measured = true
}

func (p *parser) total() *wire.Usage {
	if !p.measured {
		return nil
	}
	u := p.usage
	f := false
	u.Estimated = &f
	return &u
}

func (p *parser) end(reason string) harness.Event {
	p.done = true
	ev := harness.Event{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: p.total()}
	switch reason {
	case "length":
		ev.Finish = wire.FinishLength
	case "error":
		ev.Finish = wire.FinishError
		ev.Err = &wire.ErrorBody{Type: wire.TypeHarnessError, Code: "step_error", Message: "opencode's last step ended with an error"}
	}
	return ev
}

// serveProps are the properties of a server event the parser reads.
type serveProps struct {
	SessionID string `json:"sessionID"`
	Part      *part  `json:"part"`
	Error     *struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	} `json:"error"`
}

// serve rewrites a relayed server line as the `opencode run` line it
// stands for, and reports whether there is one: a part once it is
// complete (text and reasoning at their end, a tool call at its result,
// a step's finish), an error, the idle session that ends a turn, or an
// error answer to one of the turn's requests.
func (p *parser) serve(l *line) bool {
	if l.Type == ResponseType {
		if l.Status/100 == 2 || strings.HasPrefix(l.ID, idReplyPrefix) || strings.HasPrefix(l.ID, idAbortPrefix) {
			// A reply to a request answered meanwhile is not the turn's end.
			return false
		}
		msg := l.Failure
		if msg == "" {
			msg = fmt.Sprintf("opencode server answered %d: %s", l.Status, string(l.Body))
		}
		*l = line{Type: "error", Error: &lineError{Name: "ServerError"}}
		l.Error.Data.Message = msg
		return true
	}
	pr := l.Properties
	switch l.Type {
	case "message.part.updated":
		pt := pr.Part
		if pt == nil || pt.Synthetic {
			return false
		}
		*l = line{SessionID: pt.SessionID, Part: *pt}
		switch pt.Type {
		case "text", "reasoning":
			if pt.Time == nil || pt.Time.End == nil || p.parts[pt.ID] {
				return false
			}
			p.parts[pt.ID] = true
			l.Type = pt.Type
		case "tool":
			l.Type = "tool_use"
		case "step-finish":
			if p.parts[pt.ID] {
				return false
			}
			p.parts[pt.ID] = true
			l.Type = "step_finish"
		default:
			return false
		}
		return true
	case "session.error":
		*l = line{Type: "error", SessionID: pr.SessionID, Error: &lineError{Name: "SessionError"}}
		if pr.Error != nil {
			l.Error.Name, l.Error.Data.Message = pr.Error.Name, pr.Error.Data.Message
		}
		return true
	case "session.idle":
		if p.done {
			return false
		}
		*l = line{Type: "step_finish", SessionID: pr.SessionID}
		l.Part.Reason = "stop"
		return true
	}
	return false
}
