package codex

import (
	"encoding/json"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// serverParser turns what `codex app-server` prints during one turn into
// events, and answers it: once the reply to the turn's thread request
// names the thread, it sends turn/start; a server request the bridge does
// not serve gets an error response, so that Codex does not wait on it.
// Items are reported as `codex exec` reports them (the embedded parser).
type serverParser struct {
	*parser
	threadReq, turnReq, interruptReq string
	// start is the turn/start request's parameters, without the thread.
	start turnParams
	// thread and turn are the ids Codex gave the turn's thread and turn.
	thread, turn string
	reply        []byte
	// texts are the texts of the turn's messages and reasoning so far,
	// by item id, as their deltas built them.
	texts map[string]string
	// base is the thread's usage before the turn, last its latest total.
	base, last *totals
}

// turnParams are the parameters of turn/start.
type turnParams struct {
	ThreadID string      `json:"threadId"`
	Input    []userInput `json:"input"`
	Effort   string      `json:"effort,omitempty"`
}

// userInput is a text input of turn/start.
type userInput struct {
	Type         string     `json:"type"`
	Text         string     `json:"text"`
	TextElements []struct{} `json:"text_elements"`
}

func newServerParser(t harness.Turn) *serverParser {
	prompt, _ := harness.SplitPrompt(t)
	p := &serverParser{parser: newParser(nil), threadReq: requestID(t, "thread"), turnReq: requestID(t, "turn"),
		interruptReq: requestID(t, "interrupt"), texts: map[string]string{},
		start: turnParams{Input: []userInput{{Type: "text", Text: prompt, TextElements: []struct{}{}}}, Effort: t.Effort}}
	p.shell = shellTool
	return p
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

// Reply returns the requests and responses the parsed lines call for.
func (p *serverParser) Reply() []byte {
	r := p.reply
	p.reply = nil
	return r
}

// Interrupt returns turn/interrupt of the running turn, or nil before
// Codex named it.
func (p *serverParser) Interrupt() []byte {
	if p.thread == "" || p.turn == "" || p.done {
		return nil
	}
	return request(p.interruptReq, "turn/interrupt", map[string]string{"threadId": p.thread, "turnId": p.turn})
}

func (p *serverParser) Line(raw []byte) []harness.Event {
	var m rpcMessage
	if p.done || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case hasID && m.Method == "":
		return p.response(m)
	case hasID:
		p.refuse(m)
		return nil
	}
	var pr rpcParams
	if json.Unmarshal(m.Params, &pr) != nil || (pr.ThreadID != "" && pr.ThreadID != p.thread) {
		return nil
	}
	switch m.Method {
	case "turn/started":
		if pr.Turn != nil && p.turn == "" {
			p.turn = pr.Turn.ID
		}
	case "turn/completed":
		if pr.Turn != nil && pr.Turn.ID == p.turn {
			return p.completed(pr.Turn.Status, pr.Turn.Error)
		}
	case "error":
		if pr.Error != nil && pr.Error.Message != "" {
			p.diag = pr.Error.Message
		}
	}
	if pr.TurnID != p.turn || p.turn == "" {
		return nil
	}
	switch m.Method {
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

// response handles the reply to one of the turn's requests.
func (p *serverParser) response(m rpcMessage) []harness.Event {
	var id string
	if json.Unmarshal(m.ID, &id) != nil || (id != p.threadReq && id != p.turnReq) {
		return nil
	}
	if m.Error != nil {
		return p.fail("rpc_error", "codex refused the turn: "+m.Error.Message)
	}
	var r struct {
		Thread *struct {
			ID string `json:"id"`
		} `json:"thread"`
		Turn *struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	json.Unmarshal(m.Result, &r)
	if id == p.turnReq {
		if r.Turn != nil && p.turn == "" {
			p.turn = r.Turn.ID
		}
		return nil
	}
	if r.Thread == nil || r.Thread.ID == "" {
		return p.fail("rpc_error", "codex opened no thread")
	}
	p.thread = r.Thread.ID
	p.start.ThreadID = p.thread
	p.reply = append(p.reply, request(p.turnReq, "turn/start", p.start)...)
	return []harness.Event{{Kind: harness.KindSession, NativeSessionID: p.thread}}
}

// refuse answers a server request the bridge does not serve with an
// error (approval requests are questions, answered by the engine).
func (p *serverParser) refuse(m rpcMessage) {
	b, _ := json.Marshal(struct {
		ID    json.RawMessage `json:"id"`
		Error rpcError        `json:"error"`
	}{m.ID, rpcError{Code: -32601, Message: "the bridge does not serve " + m.Method}})
	p.reply = append(p.reply, append(b, '\n')...)
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
