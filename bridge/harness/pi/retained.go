package pi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

var _ harness.Persistent = Adapter{}

// RetainedCommand builds the process of one turn of a retained session
// run in a process of its own: the same `pi --mode rpc` process as
// Command, resuming the session's native conversation with --session. Its
// stdin stays open until the turn ends, so that answers to Pi's questions
// can follow the prompt.
func (a Adapter) RetainedCommand(t harness.Turn) (harness.Command, error) {
	cmd, err := a.Command(t)
	if err != nil {
		return harness.Command{}, err
	}
	return withGate(cmd, t), nil
}

// SessionCommand builds the long-lived `pi --mode rpc` process of a
// retained session, resuming its native conversation with --session when
// it has one. Its stdin starts empty and stays open: each turn writes its
// TurnInput, and Pi answers it up to the turn's end event.
func (Adapter) SessionCommand(t harness.Turn) (harness.Command, error) {
	cmd, err := command(t)
	if err != nil {
		return harness.Command{}, err
	}
	return withGate(cmd, t), nil
}

// SpareCommand is Command's `pi --mode rpc` before its turn is known:
// its stdin held open and empty.
func (Adapter) SpareCommand(t harness.Turn) (harness.Command, error) { return command(t) }

// SpareInput is the turn's rpc commands; stdin stays open, as Command's.
func (a Adapter) SpareInput(t harness.Turn) ([]byte, bool, error) {
	b, err := a.TurnInput(t)
	return b, true, err
}

// gate is the Pi extension that asks, through a select dialog with a
// marked title, before Pi runs any tool that is not read-only (read,
// grep, find, ls).
//
//go:embed permissions.ts
var gate []byte

// gateSource is the gate as a session's process loads it: with the
// session's nonce, which every question's marker starts with.
func gateSource(stateDir string) []byte {
	sum := sha256.Sum256([]byte("boxctl pi gate " + stateDir))
	return bytes.Replace(gate, []byte(`"BRIDGE_NONCE"`), []byte(`"`+hex.EncodeToString(sum[:12])+`"`), 1)
}

// The gate's choices, and the title parts of its questions.
const (
	choiceAllow  = "allow_once"
	choiceDeny   = "deny"
	titlePrefix  = "Permission: "
	markerPrefix = " [cli-bridge-marker:"
)

// withGate loads the permission gate into a retained turn's process:
// written into the private agent directory, outside the directories Pi
// discovers extensions in, and named by --extension, so a one-shot run
// that shares the agent directory never waits on a question nobody can
// answer.
func withGate(cmd harness.Command, t harness.Turn) harness.Command {
	path := filepath.Join(t.StateDir, "agent", "boxctl", "permissions.ts")
	cmd.Files = append(cmd.Files, harness.File{Path: path, Data: gateSource(t.StateDir)})
	cmd.Args = append(cmd.Args, "--extension", path)
	return cmd
}

// abortLine is the rpc command that stops the running turn: Pi aborts the
// model call or the running tool, ends the assistant message as
// `aborted`, and ends the turn with its end event; the process stays.
const abortLine = `{"type":"abort","id":"abort"}` + "\n"

// Interrupt returns the rpc `abort` command.
func (Adapter) Interrupt() []byte { return []byte(abortLine) }

// uiRequest is an `extension_ui_request` line: a question an extension
// asks the host in rpc mode.
type uiRequest struct {
	Type    string   `json:"type"`
	ID      string   `json:"id"`
	Method  string   `json:"method"`
	Title   string   `json:"title"`
	Message string   `json:"message"`
	Options []string `json:"options"`
}

// gateQuestion decodes a question of the gate: a select of allow_once or
// deny whose title is "Permission: <tool> [<input JSON>] [cli-bridge-marker:<token>]".
func gateQuestion(r uiRequest) (harness.Question, bool) {
	title, ok := strings.CutPrefix(r.Title, titlePrefix)
	i := strings.LastIndex(title, markerPrefix)
	if !ok || i < 0 || !strings.HasSuffix(title, "]") || !slices.Equal(r.Options, []string{choiceAllow, choiceDeny}) {
		return harness.Question{}, false
	}
	tool, rest, _ := strings.Cut(title[:i], " ")
	input := json.RawMessage(`{}`)
	var obj map[string]any
	if rest != "" && json.Unmarshal([]byte(rest), &obj) == nil && obj != nil {
		input = json.RawMessage(rest)
	}
	if tool == "" {
		tool = "tool"
	}
	return harness.Question{NativeID: r.ID, Kind: "permission", Tool: tool, Input: input, Title: titlePrefix + tool,
		Options: []string{choiceAllow, choiceDeny}}, true
}

// ParseQuestion decodes an `extension_ui_request` that the host must
// answer: a question of the bridge's gate (see gateQuestion), or a
// `confirm`, a yes/no question Pi blocks on until the host answers, which
// is how Pi extensions gate tool calls. Fire-and-forget requests (notify,
// setStatus, ...) are not questions. The other free-form dialogs (select,
// input, editor) are not either: an accept-or-decline answer cannot fill
// them, so they wait for their own timeout, or for the run's watchdogs.
func (Adapter) ParseQuestion(line []byte) (harness.Question, bool) {
	if !strings.Contains(string(line), `"extension_ui_request"`) {
		return harness.Question{}, false
	}
	var r uiRequest
	if err := json.Unmarshal(line, &r); err != nil || r.Type != "extension_ui_request" || r.ID == "" {
		return harness.Question{}, false
	}
	if r.Method == "select" {
		return gateQuestion(r)
	}
	if r.Method != "confirm" {
		return harness.Question{}, false
	}
	title := r.Title
	if r.Message != "" {
		if title != "" {
			title += ": "
		}
		title += r.Message
	}
	if title == "" {
		title = "Pi asks for confirmation"
	}
	return harness.Question{NativeID: r.ID, Kind: "permission", Title: title, Input: json.RawMessage(`{}`)}, true
}

// Answer encodes the `extension_ui_response` to a question: the gate's
// allow_once or deny, or a confirm question's confirmed when allowed.
// message is not part of Pi's answer.
func (Adapter) Answer(q harness.Question, allow bool, _ string) ([]byte, error) {
	answer := map[string]any{"type": "extension_ui_response", "id": q.NativeID, "confirmed": allow}
	if len(q.Options) > 0 {
		choice := choiceDeny
		if allow {
			choice = choiceAllow
		}
		answer = map[string]any{"type": "extension_ui_response", "id": q.NativeID, "value": choice}
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return nil, fmt.Errorf("pi: encode confirmation: %w", err)
	}
	return append(b, '\n'), nil
}

// SteerInput returns the rpc `steer` command: Pi hands the message to the
// model at its next step of the running turn.
func (Adapter) SteerInput(message string) ([]byte, error) {
	b, err := json.Marshal(struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Message string `json:"message"`
	}{"steer", "steer", message})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
