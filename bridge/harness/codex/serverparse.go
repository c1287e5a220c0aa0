package codex

import (
	"encoding/json"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// serverParser turns the lines of one turn that `codex app-server`
// prints into events, the lines its conversation (conversation.go) says
// are the turn's. Items are reported as `codex exec` reports them (the
// embedded parser), which also parses the lines of `codex exec`.
type serverParser struct {
	*parser
	// texts are the texts of the turn's messages and reasoning so far,
	// by item id, as their deltas built them.
	texts map[string]string
	// base is the thread's usage before the turn, last its latest total.
	base, last *totals
}

func newServerParser() *serverParser {
	return &serverParser{parser: newParser(&totals{}), texts: map[string]string{}}
}

// rpcMessage is any JSON-RPC message: a response (ID, Result or Error),
// a request (ID, Method) or a notification (Method).
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// hasID reports whether the message is a request or a response.
func (m rpcMessage) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// opened is the result of thread/start, thread/resume and turn/start.
type opened struct {
	Thread *struct {
		ID string `json:"id"`
	} `json:"thread"`
	Turn *struct {
		ID string `json:"id"`
	} `json:"turn"`
}

// rpcParams are the members of a notification's params the parser reads.
type rpcParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	Delta    string `json:"delta"`
	Turn     *struct {
		ID     string     `json:"id"`
		Status string     `json:"status"`
		Error  *turnError `json:"error"`
	} `json:"turn"`
	Item       json.RawMessage `json:"item"`
	TokenUsage *struct {
		Total breakdown `json:"total"`
		Last  breakdown `json:"last"`
	} `json:"tokenUsage"`
	ToModel string     `json:"toModel"`
	Error   *turnError `json:"error"`
}

// turnError is a TurnError: why a turn failed, or what went wrong in it.
type turnError struct {
	Message string `json:"message"`
}

// breakdown is a TokenUsageBreakdown: token counts of the app-server
// protocol.
type breakdown struct {
	Input      int64 `json:"inputTokens"`
	Cached     int64 `json:"cachedInputTokens"`
	CacheWrite int64 `json:"cacheWriteInputTokens"`
	Output     int64 `json:"outputTokens"`
	Reasoning  int64 `json:"reasoningOutputTokens"`
}

func (b breakdown) minus(o breakdown) breakdown {
	return breakdown{b.Input - o.Input, b.Cached - o.Cached, b.CacheWrite - o.CacheWrite, b.Output - o.Output, b.Reasoning - o.Reasoning}
}

func (b breakdown) totals() totals {
	return totals{Input: b.Input, Cached: b.Cached, CacheWrite: b.CacheWrite, Output: b.Output, Reasoning: b.Reasoning, cacheWrites: true}
}

// serverItem is a ThreadItem of the app-server protocol.
type serverItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Summary          []string        `json:"summary"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
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

// execTypes are the `codex exec` item types of the app-server's.
var execTypes = map[string]string{"agentMessage": "agent_message", "reasoning": "reasoning",
	"commandExecution": "command_execution", "fileChange": "file_change", "mcpToolCall": "mcp_tool_call", "webSearch": "web_search"}

// Line parses a line of the turn: an answer to one of its requests, or a
// notification of its thread and turn. A line that is no JSON-RPC is one
// of `codex exec`.
func (p *serverParser) Line(raw []byte) []harness.Event {
	if p.done {
		return nil
	}
	var m rpcMessage
	if json.Unmarshal(raw, &m) != nil || (!m.hasID() && m.Method == "") {
		return p.parser.Line(raw)
	}
	p.shell = shellTool
	switch {
	case m.Method == "":
		return p.response(m)
	case m.hasID():
		return nil // a request: a question, or refused by the conversation
	}
	var pr rpcParams
	if json.Unmarshal(m.Params, &pr) != nil {
		return nil
	}
	switch m.Method {
	case "turn/completed":
		if pr.Turn != nil {
			return p.completed(pr.Turn.Status, pr.Turn.Error)
		}
	case "error":
		if pr.Error != nil && pr.Error.Message != "" {
			p.diag = pr.Error.Message
		}
	case "item/agentMessage/delta":
		return p.delta(pr, "agent_message", harness.KindText)
	case "item/reasoning/summaryTextDelta", "item/reasoning/textDelta":
		return p.delta(pr, "reasoning", harness.KindReasoning)
	case "item/started", "item/completed":
		return p.item(pr.Item, m.Method == "item/completed")
	case "thread/tokenUsage/updated":
		if u := pr.TokenUsage; u != nil {
			if p.base == nil {
				// The first count of the turn follows its first request.
				base := u.Total.minus(u.Last).totals()
				p.base = &base
			}
			total := u.Total.totals()
			p.last = &total
		}
	case "model/rerouted":
		if pr.ToModel != "" {
			return []harness.Event{{Kind: harness.KindProviderModel, ProviderModel: pr.ToModel}}
		}
	}
	return nil
}

// response handles the answer to the turn's thread or turn request: the
// thread's opens the turn's session, an error fails the turn.
func (p *serverParser) response(m rpcMessage) []harness.Event {
	var id string
	json.Unmarshal(m.ID, &id)
	kind := id[strings.LastIndex(id, ":")+1:]
	if !strings.HasPrefix(id, "boxctl:") || (kind != "thread" && kind != "turn") {
		return nil
	}
	if m.Error != nil {
		return p.fail("rpc_error", "codex refused the turn: "+m.Error.Message)
	}
	var r opened
	json.Unmarshal(m.Result, &r)
	if kind == "turn" {
		return nil
	}
	if r.Thread == nil || r.Thread.ID == "" {
		return p.fail("rpc_error", "codex opened no thread")
	}
	return []harness.Event{{Kind: harness.KindSession, NativeSessionID: r.Thread.ID}}
}

// delta reports a text or reasoning delta of an item.
func (p *serverParser) delta(pr rpcParams, typ string, kind harness.EventKind) []harness.Event {
	p.texts[pr.ItemID] += pr.Delta
	return p.text(item{ID: pr.ItemID, Type: typ, Text: p.texts[pr.ItemID]}, kind)
}

// item reports an item that started or completed, as the embedded parser
// reports the item's `codex exec` form. A completed message's text counts
// only where the deltas did not already report it.
func (p *serverParser) item(raw json.RawMessage, completed bool) []harness.Event {
	var si serverItem
	if json.Unmarshal(raw, &si) != nil || execTypes[si.Type] == "" {
		return nil
	}
	it := item{ID: si.ID, Type: execTypes[si.Type], Text: si.Text, Command: si.Command, AggregatedOutput: si.AggregatedOutput,
		ExitCode: si.ExitCode, Status: si.Status, Changes: si.Changes, Server: si.Server, Tool: si.Tool,
		Arguments: si.Arguments, Result: si.Result, Error: si.Error, Query: si.Query}
	switch si.Type {
	case "agentMessage", "reasoning":
		if si.Type == "reasoning" {
			it.Text = strings.Join(si.Summary, "\n\n")
		}
		if !completed || !strings.HasPrefix(it.Text, p.texts[si.ID]) {
			return nil
		}
		p.texts[si.ID] = it.Text
	}
	return p.parser.item(it, completed)
}

// completed ends the turn with Codex's status of it.
func (p *serverParser) completed(status string, turnErr *turnError) []harness.Event {
	switch status {
	case "completed":
		p.done = true
		ev := harness.Event{Kind: harness.KindEnd, Finish: wire.FinishStop}
		if p.base != nil && p.last != nil {
			ev.Usage = p.last.since(*p.base)
		}
		return []harness.Event{ev}
	case "interrupted":
		return p.fail("interrupted", "codex interrupted the turn")
	}
	msg := p.diag
	if turnErr != nil && turnErr.Message != "" {
		msg = turnErr.Message
	}
	if msg == "" {
		msg = "codex reported a failed turn"
	}
	return p.fail("turn_failed", msg)
}

// fail ends the turn with a harness error.
func (p *serverParser) fail(code, msg string) []harness.Event {
	p.done = true
	return []harness.Event{{Kind: harness.KindEnd, Finish: wire.FinishError,
		Err: &wire.ErrorBody{Type: wire.TypeHarnessError, Code: code, Message: msg}}}
}
