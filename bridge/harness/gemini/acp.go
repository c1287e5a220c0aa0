package gemini

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// servedModelScript is the Node module the ACP process preloads to report
// the model that served each model API answer (see served-model.mjs).
//
//go:embed served-model.mjs
var servedModelScript []byte

// servedModelType is the "type" of the marker line the module prints.
const servedModelType = "boxctl_served_model"

// SessionCommand builds the long-lived `gemini --acp` process of a
// retained session: the Agent Client Protocol (JSON-RPC) on stdin and
// stdout, driven by the process's conversation (NewConversation). Tools
// that need a confirmation ask through session/request_permission. The
// environment and settings are Command's, and the process preloads the
// served-model module (NODE_OPTIONS --import).
func (Adapter) SessionCommand(t harness.Turn) (harness.Command, error) {
	if t.StateDir == "" {
		return harness.Command{}, fmt.Errorf("gemini: the turn has no state directory for GEMINI_CLI_HOME")
	}
	args := []string{"--acp"}
	if m := t.Model; m != "" && !strings.EqualFold(m, "default") {
		args = append(args, "-m", m)
	}
	script := filepath.Join(t.StateDir, "boxctl", "served-model.mjs")
	files := []harness.File{{Path: script, Data: servedModelScript}}
	if t.RouterURL != "" {
		files = append(files, harness.File{Path: filepath.Join(t.StateDir, ".gemini", "settings.json"), Data: []byte(settings)})
	}
	env := Env(t)
	opts := `--import="` + script + `"`
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "NODE_OPTIONS="); ok {
			env = append(env[:i:i], env[i+1:]...)
			if v != "" {
				opts = v + " " + opts
			}
			break
		}
	}
	env = append(env, "NODE_OPTIONS="+opts)
	return harness.Command{Path: t.Bin, Args: args, Env: env, Dir: t.Cwd, Stdin: []byte{}, HoldStdin: true, Files: files}, nil
}

// RetainedCommand builds the process of one retained turn run in a
// process of its own: SessionCommand's, for its one turn.
func (a Adapter) RetainedCommand(t harness.Turn) (harness.Command, error) {
	if _, err := turnPrompt(t); err != nil {
		return harness.Command{}, err
	}
	return a.SessionCommand(t)
}

// TurnInput encodes the session/prompt of turn t in the ACP session
// t.NativeSessionID. The engine starts the turns of a Conversant adapter
// through the process's conversation, which knows the session a new
// process created; this is the same request for a process that serves
// t.NativeSessionID already.
func (Adapter) TurnInput(t harness.Turn) ([]byte, error) {
	c := &conversation{session: t.NativeSessionID, ready: t.NativeSessionID != ""}
	if !c.ready {
		return nil, fmt.Errorf("gemini: a prompt needs the ACP session id")
	}
	return c.TurnInput(t)
}

// Interrupt returns nil: session/cancel names the ACP session, which the
// process's conversation knows (its Interrupt).
func (Adapter) Interrupt() []byte { return nil }

// permissionRequest is a session/request_permission request.
type permissionRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
		ToolCall struct {
			ToolCallID string `json:"toolCallId"`
			Title      string `json:"title"`
			Kind       string `json:"kind"`
		} `json:"toolCall"`
	} `json:"params"`
}

// nativeQuestion is a Question's NativeID: the request's id and the
// options that allow and reject once.
type nativeQuestion struct {
	ID     json.RawMessage `json:"id"`
	Allow  string          `json:"allow"`
	Reject string          `json:"reject"`
}

// ParseQuestion decodes a session/request_permission request: a tool the
// CLI waits to run until the client picks one of the request's options.
// The tool is named by its call id (`<tool>__<id>`, as the CLI forms it);
// the request carries no tool input, only a title (the command, for a
// shell call).
func (Adapter) ParseQuestion(line []byte) (harness.Question, bool) {
	if !strings.Contains(string(line), `"session/request_permission"`) {
		return harness.Question{}, false
	}
	var r permissionRequest
	if err := json.Unmarshal(line, &r); err != nil || r.Method != "session/request_permission" || len(r.ID) == 0 {
		return harness.Question{}, false
	}
	nq := nativeQuestion{ID: r.ID}
	for _, o := range r.Params.Options {
		switch {
		case o.Kind == "allow_once" && nq.Allow == "":
			nq.Allow = o.OptionID
		case o.Kind == "reject_once" && nq.Reject == "":
			nq.Reject = o.OptionID
		}
	}
	native, err := json.Marshal(nq)
	if err != nil {
		return harness.Question{}, false
	}
	tool := toolName(r.Params.ToolCall.ToolCallID)
	title := "Allow " + tool + "?"
	if s := strings.TrimSpace(r.Params.ToolCall.Title); s != "" {
		title = fmt.Sprintf("Allow %s: %s", tool, s)
	}
	return harness.Question{NativeID: string(native), Kind: "permission", Tool: tool, Input: json.RawMessage(`{}`), Title: title}, true
}

// Answer encodes the answer to a permission request: the option that
// allows once, or the one that rejects once (the protocol's answer has no
// place for message). A request that offered no such option is answered
// as cancelled.
func (Adapter) Answer(q harness.Question, allow bool, _ string) ([]byte, error) {
	var nq nativeQuestion
	if err := json.Unmarshal([]byte(q.NativeID), &nq); err != nil || len(nq.ID) == 0 {
		return nil, fmt.Errorf("gemini: permission request id %q: %w", q.NativeID, err)
	}
	option := nq.Reject
	if allow {
		option = nq.Allow
	}
	o := map[string]string{"outcome": "selected", "optionId": option}
	if option == "" {
		o = map[string]string{"outcome": "cancelled"}
	}
	return outcome(nq.ID, o), nil
}

// toolName is the tool a call id names: the CLI forms them as
// `<tool>__<model's id>`, or `<tool>-<time>-<n>` when the model gave none.
func toolName(callID string) string {
	if name, _, ok := strings.Cut(callID, "__"); ok && name != "" {
		return name
	}
	if i := strings.LastIndex(callID, "-"); i > 0 {
		if j := strings.LastIndex(callID[:i], "-"); j > 0 {
			return callID[:j]
		}
	}
	return callID
}

// turnPrompt is the prompt of a turn, its system text in a <system>
// block before it.
func turnPrompt(t harness.Turn) (string, error) {
	prompt, system := harness.SplitPrompt(t)
	if strings.TrimSpace(prompt) == "" {
		return "", fmt.Errorf("gemini: the turn has no user message text")
	}
	if system != "" {
		prompt = "<system>\n" + system + "\n</system>\n\n" + prompt
	}
	return prompt, nil
}
