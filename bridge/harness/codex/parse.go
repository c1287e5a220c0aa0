package codex

import (
	"encoding/json"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// parser turns `codex exec --json` lines into events.
type parser struct {
	// base is the thread's cumulative usage before the turn; nil when
	// unknown.
	base *totals
	done bool
	// diag is the last error Codex printed without ending the turn.
	diag string
	// sent is how much of each text item was reported, by item id.
	sent map[string]int
	// tools maps the item id of a tool call to its index; results marks
	// the calls whose result was reported.
	tools    map[string]int
	results  map[string]bool
	texts    int // agent messages begun
	nextTool int
	// shell names the tool of a command execution.
	shell string
}

func newParser(base *totals) *parser {
	return &parser{base: base, sent: map[string]int{}, tools: map[string]int{}, results: map[string]bool{}, shell: "shell"}
}

func (p *parser) Done() bool { return p.done }

// Diagnosis returns the last error Codex reported without ending the turn,
// such as its "Reconnecting..." retries of an unreachable endpoint.
func (p *parser) Diagnosis() string {
	if p.diag == "" {
		return ""
	}
	return "codex last reported: " + p.diag
}

type line struct {
	Type     string  `json:"type"`
	ThreadID string  `json:"thread_id"`
	Message  string  `json:"message"`
	Item     item    `json:"item"`
	Usage    *totals `json:"usage"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type item struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Message          string          `json:"message"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            *struct {
		Message string `json:"message"`
	} `json:"error"`
	Query string `json:"query"`
}

func (p *parser) Line(raw []byte) []harness.Event {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil || p.done {
		return nil
	}
	switch l.Type {
	case "thread.started":
		if l.ThreadID != "" {
			return []harness.Event{{Kind: harness.KindSession, NativeSessionID: l.ThreadID}}
		}
	case "item.started", "item.updated", "item.completed":
		return p.item(l.Item, l.Type == "item.completed")
	case "error":
		p.diag = l.Message
	case "turn.completed":
		p.done = true
		ev := harness.Event{Kind: harness.KindEnd, Finish: wire.FinishStop}
		if l.Usage != nil && p.base != nil {
			ev.Usage = l.Usage.since(*p.base)
		}
		return []harness.Event{ev}
	case "turn.failed":
		p.done = true
		msg := p.diag
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		if msg == "" {
			msg = "codex reported a failed turn"
		}
		return []harness.Event{{Kind: harness.KindEnd, Finish: wire.FinishError,
			Err: &wire.ErrorBody{Type: wire.TypeHarnessError, Code: "turn_failed", Message: msg}}}
	}
	return nil
}

func (p *parser) item(it item, completed bool) []harness.Event {
	switch it.Type {
	case "agent_message":
		return p.text(it, harness.KindText)
	case "reasoning":
		return p.text(it, harness.KindReasoning)
	case "error":
		// A warning, such as unknown model metadata; the turn goes on.
		if m := reroutedTo(it.Message); m != "" {
			return []harness.Event{{Kind: harness.KindProviderModel, ProviderModel: m}}
		}
		p.diag = it.Message
	case "command_execution":
		args, _ := json.Marshal(map[string]string{"command": it.Command})
		return p.tool(it, completed, p.shell, string(args), func() (string, bool) {
			failed := it.Status == "failed" || it.Status == "declined" || (it.ExitCode != nil && *it.ExitCode != 0)
			return it.AggregatedOutput, failed
		})
	case "file_change":
		args, _ := json.Marshal(map[string]json.RawMessage{"changes": orNull(it.Changes)})
		return p.tool(it, completed, "apply_patch", string(args), func() (string, bool) {
			return it.Status, it.Status != "completed"
		})
	case "mcp_tool_call":
		return p.tool(it, completed, "mcp__"+it.Server+"__"+it.Tool, string(orObject(it.Arguments)), func() (string, bool) {
			if it.Error != nil {
				return it.Error.Message, true
			}
			return wire.ContentText(mcpContent(it.Result)), it.Status == "failed"
		})
	case "web_search":
		args, _ := json.Marshal(map[string]string{"query": it.Query})
		return p.tool(it, completed, "web_search", string(args), func() (string, bool) { return "", false })
	}
	return nil
}

// reroutePrefix begins the warning Codex reports when the model API named
// a served model (its Openai-Model response header) other than the one
// requested: "model rerouted: <requested> -> <served> (<reason>)".
const reroutePrefix = "model rerouted: "

// reroutedTo returns the served model of a reroute warning, or "".
func reroutedTo(msg string) string {
	rest, ok := strings.CutPrefix(msg, reroutePrefix)
	if !ok {
		return ""
	}
	_, served, ok := strings.Cut(rest, " -> ")
	if !ok {
		return ""
	}
	if i := strings.LastIndex(served, " ("); i >= 0 && strings.HasSuffix(served, ")") {
		served = served[:i]
	}
	return strings.TrimSpace(served)
}

// text reports what an item's text adds to what was already reported.
func (p *parser) text(it item, kind harness.EventKind) []harness.Event {
	sent, seen := p.sent[it.ID]
	if sent >= len(it.Text) {
		return nil
	}
	add := it.Text[sent:]
	p.sent[it.ID] = len(it.Text)
	if kind == harness.KindText && !seen {
		// Messages of one turn read as paragraphs, as Codex shows them.
		if p.texts > 0 {
			add = "\n\n" + add
		}
		p.texts++
	}
	return []harness.Event{{Kind: kind, Text: add}}
}

// tool reports a tool call when first seen and its result when completed.
func (p *parser) tool(it item, completed bool, name, args string, result func() (string, bool)) []harness.Event {
	var out []harness.Event
	i, ok := p.tools[it.ID]
	if !ok {
		i = p.nextTool
		p.nextTool++
		p.tools[it.ID] = i
		out = append(out, harness.Event{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{
			Index: i, ID: it.ID, Type: "function", Function: wire.ToolCallFunction{Name: name, Arguments: args},
		}})
	}
	if completed && !p.results[it.ID] {
		p.results[it.ID] = true
		content, failed := result()
		out = append(out, harness.Event{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{
			ToolCallID: it.ID, Content: content, IsError: failed,
		}})
	}
	return out
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func orObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage("{}")
	}
	return b
}

// mcpContent returns the content array of an MCP tool result.
func mcpContent(b json.RawMessage) json.RawMessage {
	var r struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	return r.Content
}
