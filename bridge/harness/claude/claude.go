package claude

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// Adapter drives Claude Code. The zero value is ready to use.
type Adapter struct{}

var _ harness.Adapter = Adapter{}

// Name returns "claude-code".
func (Adapter) Name() string { return "claude-code" }

// Key returns "claude".
func (Adapter) Key() string { return "claude" }

// DefaultBin returns "claude".
func (Adapter) DefaultBin() string { return "claude" }

// Models lists the model aliases Claude Code accepts.
func (Adapter) Models() []string { return []string{"default", "sonnet", "opus", "haiku"} }

// NewParser returns a parser for one turn.
func (Adapter) NewParser() harness.Parser { return newParser() }

// maxArgPrompt is the largest prompt passed as an argument; larger ones go
// on stdin, far below the kernel's per-argument limit (128 KiB).
const maxArgPrompt = 64 << 10

// Command builds `claude -p ...` for a turn.
func (Adapter) Command(t harness.Turn) (harness.Command, error) {
	prompt, system := harness.SplitPrompt(t)
	if strings.TrimSpace(prompt) == "" {
		return harness.Command{}, fmt.Errorf("claude: the turn has no user message text")
	}
	args := slices.Concat(outputArgs, turnArgs(t, system))
	var stdin []byte
	if len(prompt) > maxArgPrompt || strings.HasPrefix(prompt, "-") {
		line, err := userLine(prompt)
		if err != nil {
			return harness.Command{}, err
		}
		args, stdin = append(args, streamInputArgs...), line
	} else {
		args = append(args, prompt)
	}
	return harness.Command{Path: t.Bin, Args: args, Env: Env(t), Dir: t.Cwd, Stdin: stdin}, nil
}

// outputArgs make `claude -p` print stream-json, partial messages too.
var outputArgs = []string{"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"}

// streamInputArgs make `claude -p` read its prompts from stdin, each a
// stream-json user line (userLine).
var streamInputArgs = []string{"--input-format", "stream-json"}

// turnArgs are the arguments of a turn's model, native session (resumed,
// or a fresh id) and system prompt.
func turnArgs(t harness.Turn, system string) []string {
	var args []string
	if m := t.Model; m != "" && !strings.EqualFold(m, "default") {
		args = append(args, "--model", m)
	}
	if t.NativeSessionID != "" {
		args = append(args, "--resume", t.NativeSessionID)
	} else {
		args = append(args, "--session-id", newUUID())
	}
	if system != "" {
		args = append(args, "--append-system-prompt", system)
	}
	return args
}

// userLine encodes prompt as a stream-json user line: one text block.
func userLine(prompt string) ([]byte, error) {
	line, err := json.Marshal(map[string]any{
		"type":    "user",
		"message": map[string]any{"role": "user", "content": []map[string]string{{"type": "text", "text": prompt}}},
	})
	if err != nil {
		return nil, fmt.Errorf("claude: encode prompt: %w", err)
	}
	return append(line, '\n'), nil
}

// Env is the environment of a turn: the inherited one without Claude
// Code's own and Anthropic variables, the caller's extras, then the
// bridge's settings.
func Env(t harness.Turn) []string {
	set := map[string]string{
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
	if t.StateDir != "" {
		set["CLAUDE_CONFIG_DIR"] = t.StateDir
	}
	if t.RouterURL != "" {
		set["ANTHROPIC_BASE_URL"] = strings.TrimRight(t.RouterURL, "/")
	}
	if t.RouterKey != "" {
		set["ANTHROPIC_AUTH_TOKEN"] = t.RouterKey
	}
	return harness.MergeEnv(t.Environ, dropInherited, t.Env, set)
}

func dropInherited(name string) bool {
	return name == "CLAUDECODE" || strings.HasPrefix(name, "CLAUDE_CODE_") ||
		strings.HasPrefix(name, "ANTHROPIC_") || name == "CLAUDE_CONFIG_DIR"
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
