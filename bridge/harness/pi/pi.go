package pi

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// Adapter drives Pi. The zero value is ready to use.
type Adapter struct{}

var _ harness.Adapter = Adapter{}

// Name returns "pi".
func (Adapter) Name() string { return "pi" }

// Key returns "pi".
func (Adapter) Key() string { return "pi" }

// DefaultBin returns "pi".
func (Adapter) DefaultBin() string { return "pi" }

// Models lists provider/model pairs /v1/models advertises; any pair is
// accepted.
func (Adapter) Models() []string {
	return []string{"anthropic/claude-sonnet-4-5", "openai/gpt-5.5"}
}

// NewParser returns a parser for one turn.
func (Adapter) NewParser() harness.Parser { return newParser() }

// KeyVar is the environment variable the generated provider entry reads
// the router key from.
const KeyVar = harness.RouterKeyVar

// Command builds `pi --mode rpc ...` and its stdin commands for a turn.
func (a Adapter) Command(t harness.Turn) (harness.Command, error) {
	input, err := a.TurnInput(t)
	if err != nil {
		return harness.Command{}, err
	}
	cmd, err := command(t)
	if err != nil {
		return harness.Command{}, err
	}
	cmd.Stdin = input
	return cmd, nil
}

// command builds the `pi --mode rpc` process of t, its stdin held open and
// empty.
func command(t harness.Turn) (harness.Command, error) {
	provider, model, ok := strings.Cut(t.Model, "/")
	if !ok || provider == "" || model == "" {
		return harness.Command{}, fmt.Errorf("pi: model %q is not provider/model (use a model id pi/<provider>/<model>)", t.Model)
	}
	if t.StateDir == "" {
		return harness.Command{}, fmt.Errorf("pi: the turn has no state directory")
	}
	_, system := harness.SplitPrompt(t)
	agentDir := filepath.Join(t.StateDir, "agent")
	args := []string{"--mode", "rpc", "--model", provider + "/" + model}
	if t.Effort != "" {
		args = append(args, "--thinking", t.Effort)
	}
	if system != "" {
		args = append(args, "--append-system-prompt", system)
	}
	if t.NativeSessionID != "" {
		args = append(args, "--session", t.NativeSessionID)
	}
	var files []harness.File
	if t.RouterURL != "" {
		files = append(files, harness.File{Path: filepath.Join(agentDir, "models.json"), Data: modelsJSON(t.RouterURL, provider, model)})
	}
	return harness.Command{Path: t.Bin, Args: args, Env: Env(t, agentDir), Dir: t.Cwd, Stdin: []byte{},
		HoldStdin: true, Files: files}, nil
}

// TurnInput encodes the rpc commands that start turn t: a `prompt` with
// its last user message, then a `get_state`, whose answer names the
// session.
func (Adapter) TurnInput(t harness.Turn) ([]byte, error) {
	prompt, _ := harness.SplitPrompt(t)
	if strings.TrimSpace(prompt) == "" {
		return nil, fmt.Errorf("pi: the turn has no user message text")
	}
	var stdin []byte
	for _, c := range []map[string]string{
		{"type": "prompt", "id": "prompt", "message": prompt},
		{"type": "get_state", "id": "state"},
	} {
		b, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("pi: encode command: %w", err)
		}
		stdin = append(append(stdin, b...), '\n')
	}
	return stdin, nil
}

// modelsJSON is the models.json that points provider at the router.
func modelsJSON(routerURL, provider, model string) []byte {
	root := strings.TrimRight(routerURL, "/")
	api, base := "openai-completions", root+"/v1"
	switch provider {
	case "anthropic":
		api, base = "anthropic-messages", root
	case "openai":
		api = "openai-responses"
	}
	doc := map[string]any{"providers": map[string]any{provider: map[string]any{
		"baseUrl": base, "api": api, "apiKey": "!printenv " + KeyVar,
		"models": []map[string]string{{"id": model}},
	}}}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n')
}

// Env is the environment of a turn: the inherited one without Pi's own
// variables, the caller's extras, then the agent directory, the router key
// and Pi's offline settings.
func Env(t harness.Turn, agentDir string) []string {
	set := map[string]string{
		"PI_CODING_AGENT_DIR":   agentDir,
		"PI_OFFLINE":            "1",
		"PI_SKIP_VERSION_CHECK": "1",
		"PI_TELEMETRY":          "0",
	}
	if t.RouterKey != "" && t.RouterURL != "" {
		set[KeyVar] = t.RouterKey
	}
	return harness.MergeEnv(t.Environ, func(name string) bool {
		return strings.HasPrefix(name, "PI_") || name == KeyVar
	}, t.Env, set)
}
