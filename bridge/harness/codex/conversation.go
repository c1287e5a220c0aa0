package codex

import (
	"encoding/json"

	"github.com/tangle-network/boxctl/bridge/harness"
)

var _ harness.Conversant = Adapter{}

// conversation is the client side of one `codex app-server` process: it
// opens with the handshake, starts each turn by opening its thread
// (TurnInput), sends turn/start once the thread's id is in the reply,
// refuses the server requests the bridge does not serve so that Codex does
// not wait on them, and knows the running turn to interrupt. Only the
// lines of the running turn's thread and turn are the turn's.
type conversation struct {
	// threadReq, turnReq and interruptReq are the ids of the running
	// turn's requests; threadReq is empty before the first turn.
	threadReq, turnReq, interruptReq string
	// start is the turn/start request's parameters, the thread set once
	// it is open.
	start turnParams
	// thread and turn are the ids Codex gave the turn's thread and turn.
	thread, turn string
	// done: the turn ended, or failed to start.
	done bool
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

// NewConversation returns the conversation of a process started for a
// turn; each turn names its thread in TurnInput.
func (Adapter) NewConversation(harness.Turn) harness.Conversation { return &conversation{} }

// Open returns the handshake: the initialize request and the initialized
// notification.
func (c *conversation) Open() []byte { return handshake() }

// TurnInput returns the request that opens turn t's thread (the
// adapter's TurnInput); the turn starts once the reply names the thread.
func (c *conversation) TurnInput(t harness.Turn) ([]byte, error) {
	in, err := Adapter{}.TurnInput(t)
	if err != nil {
		return nil, err
	}
	prompt, _ := harness.SplitPrompt(t)
	*c = conversation{threadReq: requestID(t, "thread"), turnReq: requestID(t, "turn"), interruptReq: requestID(t, "interrupt"),
		start: turnParams{Input: []userInput{{Type: "text", Text: prompt, TextElements: []struct{}{}}}, Effort: t.Effort}}
	return in, nil
}

// Reply answers a line Codex printed: the thread's reply with turn/start,
// a server request the bridge does not serve with an error (approval
// requests are questions, answered by the engine). The turn's lines are
// the replies to its requests, its approval requests, and the
// notifications of its thread and turn.
func (c *conversation) Reply(line []byte) ([]byte, bool) {
	var m rpcMessage
	if c.threadReq == "" || c.done || json.Unmarshal(line, &m) != nil {
		return nil, false
	}
	switch {
	case m.hasID() && m.Method == "":
		return c.response(m)
	case m.hasID():
		if _, ok := (Adapter{}).ParseQuestion(line); ok {
			return nil, true
		}
		return refusal(m), false
	case m.Method == "":
		return nil, false
	}
	var pr rpcParams
	if json.Unmarshal(m.Params, &pr) != nil || (pr.ThreadID != "" && pr.ThreadID != c.thread) {
		return nil, false
	}
	switch m.Method {
	case "turn/started":
		if pr.Turn != nil && c.turn == "" {
			c.turn = pr.Turn.ID
		}
		return nil, false
	case "turn/completed":
		c.done = pr.Turn != nil && pr.Turn.ID == c.turn
		return nil, c.done
	case "error":
		return nil, true
	}
	return nil, c.turn != "" && pr.TurnID == c.turn
}

// response handles the reply to one of the turn's requests.
func (c *conversation) response(m rpcMessage) ([]byte, bool) {
	var id string
	if json.Unmarshal(m.ID, &id) != nil || (id != c.threadReq && id != c.turnReq) {
		return nil, false
	}
	if m.Error != nil {
		c.done = true
		return nil, true
	}
	var r opened
	json.Unmarshal(m.Result, &r)
	if id == c.turnReq {
		if r.Turn != nil && c.turn == "" {
			c.turn = r.Turn.ID
		}
		return nil, true
	}
	if r.Thread == nil || r.Thread.ID == "" {
		c.done = true
		return nil, true
	}
	c.thread = r.Thread.ID
	c.start.ThreadID = c.thread
	return request(c.turnReq, "turn/start", c.start), true
}

// refusal is the error response to a server request the bridge does not
// serve.
func refusal(m rpcMessage) []byte {
	b, _ := json.Marshal(struct {
		ID    json.RawMessage `json:"id"`
		Error rpcError        `json:"error"`
	}{m.ID, rpcError{Code: -32601, Message: "the bridge does not serve " + m.Method}})
	return append(b, '\n')
}

// Interrupt returns turn/interrupt of the running turn, or nil before
// Codex named it and after it ended.
func (c *conversation) Interrupt() []byte {
	if c.thread == "" || c.turn == "" || c.done {
		return nil
	}
	return request(c.interruptReq, "turn/interrupt", map[string]string{"threadId": c.thread, "turnId": c.turn})
}
