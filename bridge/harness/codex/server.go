package codex

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// Retained sessions run `codex app-server`, Codex's JSON-RPC server on
// stdio, the one mode in which Codex asks before it runs a command
// (`codex exec` runs every turn under approval policy "never"). The
// session's process is initialized once; each turn then opens the thread
// (thread/start, or thread/resume of the session's native thread, which
// also rejoins a thread the process has loaded) and, once the thread's id
// is in the reply, starts the turn (turn/start), which the process's
// conversation sends (conversation.go). Threads run under approval policy
// "untrusted" in the workspace-write sandbox: every command that is not
// known to be read-only, and every file change, waits for an answer.

// approvalPolicy and sandboxMode are the settings of a retained thread.
const (
	approvalPolicy = "untrusted"
	sandboxMode    = "workspace-write"
)

// shellTool is the name of Codex's shell tool in the model API, under
// which retained turns report command executions and their approvals.
const shellTool = "exec_command"

// quiet are the notifications a retained session's process is asked not
// to send: none of them concerns a turn.
var quiet = []string{"account/rateLimits/updated", "remoteControl/status/changed", "thread/status/changed",
	"mcpServer/startupStatus/updated"}

// handshake is the stdin a session's process starts with: the initialize
// request and the initialized notification.
func handshake() []byte {
	req := request("boxctl:initialize", "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "boxctl", "title": nil, "version": "1"},
		"capabilities": map[string]any{"experimentalApi": false, "requestAttestation": false, "optOutNotificationMethods": quiet},
	})
	return append(req, `{"method":"initialized"}`+"\n"...)
}

// request encodes a JSON-RPC request line.
func request(id, method string, params any) []byte {
	b, _ := json.Marshal(struct {
		ID     string `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params"`
	}{id, method, params})
	return append(b, '\n')
}

// requestID is the id of the turn's request of kind ("thread", "turn",
// "interrupt"): unique per run, so that a reply is never taken for
// another turn's.
func requestID(t harness.Turn, kind string) string { return "boxctl:" + t.RunID + ":" + kind }

// SessionCommand builds the long-lived `codex app-server` process of a
// retained session, with the environment and configuration of Command.
// Its stdin stays open; its conversation writes the handshake.
func (Adapter) SessionCommand(t harness.Turn) (harness.Command, error) {
	if t.StateDir == "" {
		return harness.Command{}, fmt.Errorf("codex: the turn has no state directory for CODEX_HOME")
	}
	return harness.Command{Path: t.Bin, Args: []string{"app-server"}, Env: Env(t), Dir: t.Cwd,
		Stdin: []byte{}, HoldStdin: true, Files: files(t)}, nil
}

// RetainedCommand builds the process of one retained turn run in a
// process of its own: the session's process, driven by its conversation
// for its one turn.
func (a Adapter) RetainedCommand(t harness.Turn) (harness.Command, error) {
	if _, err := a.TurnInput(t); err != nil {
		return harness.Command{}, err
	}
	return a.SessionCommand(t)
}

// threadParams are the parameters of thread/start and thread/resume.
type threadParams struct {
	ThreadID              string `json:"threadId,omitempty"`
	Model                 string `json:"model,omitempty"`
	Cwd                   string `json:"cwd,omitempty"`
	ApprovalPolicy        string `json:"approvalPolicy"`
	Sandbox               string `json:"sandbox"`
	DeveloperInstructions string `json:"developerInstructions,omitempty"`
	ExcludeTurns          bool   `json:"excludeTurns,omitempty"`
}

// TurnInput encodes the request that opens the turn's thread: thread/start
// for a session without a native thread, thread/resume of it otherwise.
// The turn itself starts when the process's conversation has the reply.
func (Adapter) TurnInput(t harness.Turn) ([]byte, error) {
	prompt, system := harness.SplitPrompt(t)
	if strings.TrimSpace(prompt) == "" {
		return nil, fmt.Errorf("codex: the turn has no user message text")
	}
	p := threadParams{Cwd: t.Cwd, ApprovalPolicy: approvalPolicy, Sandbox: sandboxMode, DeveloperInstructions: system}
	if m := t.Model; m != "" && !strings.EqualFold(m, "default") {
		p.Model = m
	}
	if t.NativeSessionID == "" {
		return request(requestID(t, "thread"), "thread/start", p), nil
	}
	p.ThreadID, p.ExcludeTurns = t.NativeSessionID, true
	return request(requestID(t, "thread"), "thread/resume", p), nil
}

// Interrupt returns nil: turn/interrupt names the running turn, which
// only the process's conversation knows (its Interrupt is used).
func (Adapter) Interrupt() []byte { return nil }

// serverRequest is a JSON-RPC request from the server.
type serverRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// ParseQuestion decodes the approval requests of a command execution
// (item/commandExecution/requestApproval) and of a file change
// (item/fileChange/requestApproval). The question's NativeID is the
// request's JSON-RPC id as JSON.
func (Adapter) ParseQuestion(line []byte) (harness.Question, bool) {
	if !strings.Contains(string(line), `/requestApproval"`) {
		return harness.Question{}, false
	}
	var r serverRequest
	if err := json.Unmarshal(line, &r); err != nil || len(r.ID) == 0 || string(r.ID) == "null" {
		return harness.Question{}, false
	}
	var p struct {
		Kind      string `json:"kind"`
		Command   string `json:"command"`
		Cwd       string `json:"cwd"`
		Reason    string `json:"reason"`
		ItemID    string `json:"itemId"`
		GrantRoot string `json:"grantRoot"`
	}
	if json.Unmarshal(r.Params, &p) != nil {
		return harness.Question{}, false
	}
	q := harness.Question{NativeID: string(r.ID), Kind: "permission", Title: p.Reason}
	switch r.Method {
	case "item/commandExecution/requestApproval":
		q.Tool = shellTool
		q.Input, _ = json.Marshal(struct {
			Command string `json:"command"`
			Cwd     string `json:"cwd,omitempty"`
			Reason  string `json:"reason,omitempty"`
		}{p.Command, p.Cwd, p.Reason})
		if q.Title == "" {
			q.Title = "Allow " + shellTool + " to run: " + p.Command
		}
	case "item/fileChange/requestApproval":
		q.Tool = "apply_patch"
		q.Input, _ = json.Marshal(struct {
			ItemID    string `json:"item_id"`
			GrantRoot string `json:"grant_root,omitempty"`
			Reason    string `json:"reason,omitempty"`
		}{p.ItemID, p.GrantRoot, p.Reason})
		if q.Title == "" {
			q.Title = "Allow apply_patch to change files?"
		}
	default:
		return harness.Question{}, false
	}
	return q, true
}

// Answer encodes the JSON-RPC response to an approval request: decision
// "accept" or "decline". message is not part of Codex's answer.
func (Adapter) Answer(q harness.Question, allow bool, _ string) ([]byte, error) {
	if !json.Valid([]byte(q.NativeID)) {
		return nil, fmt.Errorf("codex: approval request id %q is not JSON", q.NativeID)
	}
	decision := "decline"
	if allow {
		decision = "accept"
	}
	b, err := json.Marshal(struct {
		ID     json.RawMessage `json:"id"`
		Result any             `json:"result"`
	}{json.RawMessage(q.NativeID), map[string]string{"decision": decision}})
	if err != nil {
		return nil, fmt.Errorf("codex: encode approval answer: %w", err)
	}
	return append(b, '\n'), nil
}
