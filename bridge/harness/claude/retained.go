package claude

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

var _ harness.Persistent = Adapter{}

// RetainedCommand builds the process of one turn of a retained session:
// the session's process (SessionCommand) with the turn's prompt as its
// first stdin line; stdin stays open so that permission answers
// (control_response lines) can follow it.
func (a Adapter) RetainedCommand(t harness.Turn) (harness.Command, error) {
	line, err := a.TurnInput(t)
	if err != nil {
		return harness.Command{}, err
	}
	cmd, err := a.SessionCommand(t)
	if err != nil {
		return harness.Command{}, err
	}
	cmd.Stdin = line
	return cmd, nil
}

// SessionCommand builds the long-lived process of a retained session:
// `claude -p --input-format stream-json --permission-prompt-tool stdio`,
// which reads one user line per turn from stdin, answers it up to its
// `result` line, and waits for the next until stdin closes. A session
// with a native id resumes it; a new one gets a fresh --session-id.
func (Adapter) SessionCommand(t harness.Turn) (harness.Command, error) {
	_, system := harness.SplitPrompt(t)
	args := slices.Concat(outputArgs, streamInputArgs, []string{"--permission-prompt-tool", "stdio"}, turnArgs(t, system))
	return harness.Command{Path: t.Bin, Args: args, Env: Env(t), Dir: t.Cwd, Stdin: []byte{}, HoldStdin: true}, nil
}

// TurnInput encodes the stream-json user line of a turn: its last user
// message as one text block.
func (Adapter) TurnInput(t harness.Turn) ([]byte, error) {
	prompt, _ := harness.SplitPrompt(t)
	if strings.TrimSpace(prompt) == "" {
		return nil, fmt.Errorf("claude: the turn has no user message text")
	}
	return userLine(prompt)
}

// interruptLine is the stream-json control request that stops the running
// turn: Claude Code acknowledges it, aborts the model call or the running
// tool, and ends the turn with an error_during_execution `result`.
const interruptLine = `{"type":"control_request","request_id":"bridge-interrupt","request":{"subtype":"interrupt"}}` + "\n"

// Interrupt returns the stream-json `interrupt` control request.
func (Adapter) Interrupt() []byte { return []byte(interruptLine) }

// controlRequest is a `control_request` line.
type controlRequest struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Request   struct {
		Subtype     string          `json:"subtype"`
		ToolName    string          `json:"tool_name"`
		Input       json.RawMessage `json:"input"`
		Description string          `json:"description"`
	} `json:"request"`
}

// ParseQuestion decodes a `control_request` of subtype `can_use_tool`.
func (Adapter) ParseQuestion(line []byte) (harness.Question, bool) {
	if !strings.Contains(string(line), `"control_request"`) {
		return harness.Question{}, false
	}
	var cr controlRequest
	if err := json.Unmarshal(line, &cr); err != nil || cr.Type != "control_request" || cr.Request.Subtype != "can_use_tool" || cr.RequestID == "" {
		return harness.Question{}, false
	}
	input := cr.Request.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{}`)
	}
	title := "Allow " + cr.Request.ToolName + "?"
	if cr.Request.Description != "" {
		title = cr.Request.Description
	} else {
		var in struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(input, &in) == nil && in.Command != "" {
			title = fmt.Sprintf("Allow %s to run: %s", cr.Request.ToolName, in.Command)
		}
	}
	return harness.Question{NativeID: cr.RequestID, Kind: "permission", Tool: cr.Request.ToolName, Input: input, Title: title}, true
}

// RelaysFeedback reports that a refusal hands its message to Claude Code.
func (Adapter) RelaysFeedback() bool { return true }

// Answer encodes the `control_response` to a permission question. An
// allowed tool runs with its input unchanged.
func (Adapter) Answer(q harness.Question, allow bool, message string) ([]byte, error) {
	decision := map[string]any{"behavior": "deny", "message": message}
	if allow {
		input := q.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		decision = map[string]any{"behavior": "allow", "updatedInput": input}
	}
	b, err := json.Marshal(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": q.NativeID, "response": decision}})
	if err != nil {
		return nil, fmt.Errorf("claude: encode permission answer: %w", err)
	}
	return append(b, '\n'), nil
}

// SpareCommand is Command's `claude -p` reading its prompt from stdin as
// stream-json, started before the prompt is known: Claude Code loads
// before it reads its first line.
func (Adapter) SpareCommand(t harness.Turn) (harness.Command, error) {
	_, system := harness.SplitPrompt(t)
	args := slices.Concat(outputArgs, turnArgs(t, system), streamInputArgs)
	return harness.Command{Path: t.Bin, Args: args, Env: Env(t), Dir: t.Cwd, Stdin: []byte{}, HoldStdin: true}, nil
}

// SpareInput is the turn's stream-json user line; the end of stdin
// after it ends the turn's process once it answered.
func (a Adapter) SpareInput(t harness.Turn) ([]byte, bool, error) {
	b, err := a.TurnInput(t)
	return b, false, err
}
