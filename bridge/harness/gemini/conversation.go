package gemini

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// The ids of the requests a conversation sends. The parser knows them: a
// prompt's answer ends its turn, and an error answer to any of them ends
// the turn that waited on it.
const (
	idInitialize   = "boxctl-initialize"
	idSession      = "boxctl-session"
	idPromptPrefix = "boxctl-prompt-"
)

// conversation is the client side of one `gemini --acp` process: it
// sends initialize, then session/new (or session/load of the session the
// process was started for), and starts each turn with session/prompt once
// the session is ready.
type conversation struct {
	cwd, resume string
	// session is the ACP session id, once session/new or session/load
	// answered.
	session string
	// loaded: session/load answered, and the session is ready once the
	// CLI has replayed its history (see Reply).
	loaded, ready bool
	// prompt is a turn's prompt held until the session is ready; prompted
	// marks that the running turn's session/prompt was written.
	prompt   *string
	prompted bool
	turns    int
	// asked are the ids of the running turn's permission requests, which
	// an interrupt answers as cancelled.
	asked []json.RawMessage
}

var _ harness.Conversant = Adapter{}

// NewConversation returns the conversation of a process started for t:
// one that loads t.NativeSessionID when set, and otherwise creates a
// session in t.Cwd.
func (Adapter) NewConversation(t harness.Turn) harness.Conversation {
	cwd := t.Cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	if t.NativeSessionID != "" {
		keepHistory(t.StateDir, t.NativeSessionID, time.Now())
	}
	return &conversation{cwd: cwd, resume: t.NativeSessionID}
}

// keepHistory moves session's conversation file out of the way of the one
// session/load is about to start. Gemini CLI 0.61.0 names a session's file
// after the minute it starts recording and the session id's first eight
// characters, and its session/load starts recording anew under that name
// before it reads the history: in the minute the session was created, it
// would write a fresh start over the file that holds the history. The
// file is given an earlier minute's name, which no later recording takes;
// the CLI finds it by the session id it holds.
func keepHistory(stateDir, session string, now time.Time) {
	if stateDir == "" || len(session) < 8 {
		return
	}
	name := func(at time.Time) string {
		return "session-" + at.UTC().Format("2006-01-02T15-04") + "-" + session[:8] + ".jsonl"
	}
	files, _ := filepath.Glob(filepath.Join(stateDir, ".gemini", "tmp", "*", "chats", name(now)))
	for _, f := range files {
		for back := 1; back <= 60; back++ {
			to := filepath.Join(filepath.Dir(f), name(now.Add(-time.Duration(back)*time.Minute)))
			if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
				os.Rename(f, to)
				break
			}
		}
	}
}

// request encodes a JSON-RPC request line.
func request(id, method string, params any) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		panic(err) // only maps, strings and slices of them
	}
	return append(b, '\n')
}

// Open returns the initialize request. The client offers no file system
// and no terminal: the CLI reads, writes and runs commands itself.
func (c *conversation) Open() []byte {
	return request(idInitialize, "initialize", map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
	})
}

// TurnInput returns the session/prompt of turn t, or nil until the
// session is ready (Reply then returns it).
func (c *conversation) TurnInput(t harness.Turn) ([]byte, error) {
	prompt, err := turnPrompt(t)
	if err != nil {
		return nil, err
	}
	c.turns++
	c.prompted, c.asked = false, nil
	c.prompt = &prompt
	return c.flush(), nil
}

// flush returns the held prompt's request once the session is ready.
func (c *conversation) flush() []byte {
	if !c.ready || c.prompt == nil {
		return nil
	}
	p := *c.prompt
	c.prompt, c.prompted = nil, true
	return request(idPromptPrefix+strconv.Itoa(c.turns), "session/prompt", map[string]any{
		"sessionId": c.session,
		"prompt":    []map[string]string{{"type": "text", "text": p}},
	})
}

// rpcLine is the part of a JSON-RPC line a conversation reads.
type rpcLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	Params struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string `json:"sessionUpdate"`
		} `json:"update"`
	} `json:"params"`
}

// Reply answers the handshake: initialize's answer is followed by
// session/new or session/load, and the session's answer by the held
// prompt. After session/load the CLI replays the session's history as
// session/update notifications, partly after its answer; it announces the
// session's commands (available_commands_update) once it has, and only
// then is the prompt written. Notifications before the prompt are not the
// turn's; every answer, request and marker line is.
func (c *conversation) Reply(line []byte) ([]byte, bool) {
	var l rpcLine
	if json.Unmarshal(line, &l) != nil {
		return nil, false
	}
	if len(l.ID) > 0 && l.Method == "" { // an answer to one of ours
		if len(l.Error) > 0 && string(l.Error) != "null" {
			return nil, true
		}
		switch id := unquote(l.ID); id {
		case idInitialize:
			if c.resume != "" {
				return request(idSession, "session/load", map[string]any{"sessionId": c.resume, "cwd": c.cwd, "mcpServers": []any{}}), true
			}
			return request(idSession, "session/new", map[string]any{"cwd": c.cwd, "mcpServers": []any{}}), true
		case idSession:
			if c.resume != "" {
				c.session, c.loaded = c.resume, true
				return nil, true
			}
			var r struct {
				SessionID string `json:"sessionId"`
			}
			json.Unmarshal(l.Result, &r)
			c.session, c.ready = r.SessionID, r.SessionID != ""
			return c.flush(), true
		}
		return nil, true
	}
	switch {
	case l.Method == "session/request_permission":
		c.asked = append(c.asked, l.ID)
		return nil, true
	case l.Method == "session/update" && c.loaded && !c.ready && l.Params.Update.SessionUpdate == "available_commands_update":
		c.ready = true
		return c.flush(), false
	case l.Method != "":
		return nil, c.prompted
	}
	return nil, true // the served-model marker
}

// Interrupt returns session/cancel, and a cancelled outcome for each
// permission request of the turn (the protocol has the client answer them
// so); nil before the turn's prompt was written.
func (c *conversation) Interrupt() []byte {
	if !c.prompted {
		return nil
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]string{"sessionId": c.session}})
	if err != nil {
		return nil
	}
	out := append(b, '\n')
	for _, id := range c.asked {
		out = append(out, outcome(id, map[string]string{"outcome": "cancelled"})...)
	}
	return out
}

// outcome encodes the answer to the permission request id.
func outcome(id json.RawMessage, o map[string]string) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"outcome": o}})
	if err != nil {
		return nil
	}
	return append(b, '\n')
}

// unquote returns a JSON string id's value, or the raw id.
func unquote(id json.RawMessage) string {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(id))
}
