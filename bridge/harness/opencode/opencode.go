package opencode

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// Adapter drives opencode. The zero value is ready to use.
type Adapter struct{}

var _ harness.Adapter = Adapter{}

// Name returns "opencode".
func (Adapter) Name() string { return "opencode" }

// Key returns "opencode".
func (Adapter) Key() string { return "opencode" }

// DefaultBin returns "opencode".
func (Adapter) DefaultBin() string { return "opencode" }

// Models lists models /v1/models advertises; any provider/model is
// accepted.
func (Adapter) Models() []string {
	return []string{"anthropic/claude-sonnet-4-5", "openai/gpt-5.5"}
}

// NewParser returns a parser for one turn.
func (Adapter) NewParser() harness.Parser { return newParser() }

// KeyVar is the environment variable the generated provider entry reads
// the router key from.
const KeyVar = harness.RouterKeyVar

// RouterProvider is the provider of a model id without one.
const RouterProvider = "router"

// Command builds `opencode run --format json ...` for a turn.
func (Adapter) Command(t harness.Turn) (harness.Command, error) {
	if t.Model == "" || strings.EqualFold(t.Model, "default") {
		return harness.Command{}, fmt.Errorf("opencode: no model (use a model id opencode/<provider>/<model>)")
	}
	provider, model, ok := strings.Cut(t.Model, "/")
	if !ok {
		provider, model = RouterProvider, t.Model
	}
	if provider == "" || model == "" {
		return harness.Command{}, fmt.Errorf("opencode: model %q is not provider/model", t.Model)
	}
	prompt, system := harness.SplitPrompt(t)
	if strings.TrimSpace(prompt) == "" {
		return harness.Command{}, fmt.Errorf("opencode: the turn has no user message text")
	}
	if t.StateDir == "" {
		return harness.Command{}, fmt.Errorf("opencode: the turn has no state directory")
	}
	args := []string{"run", "--format", "json", "--thinking", "-m", provider + "/" + model}
	if t.NativeSessionID != "" {
		args = append(args, "-s", t.NativeSessionID)
	} else {
		args = append(args, "--title="+title(prompt))
	}
	if t.Effort != "" {
		args = append(args, "--variant", t.Effort)
	}
	if system != "" {
		// opencode run takes no system prompt.
		prompt = "<system>\n" + system + "\n</system>\n\n" + prompt
	}
	config := filepath.Join(t.StateDir, "opencode.json")
	var files []harness.File
	if t.RouterURL != "" {
		files = append(files, harness.File{Path: config, Data: configJSON(t.RouterURL, provider, model)})
	}
	// The prompt goes on stdin: opencode run quotes every argument that
	// holds a space.
	return harness.Command{Path: t.Bin, Args: args, Env: Env(t, config, files != nil), Dir: t.Cwd,
		Stdin: []byte(prompt), Files: files}, nil
}

// title is the session title: the prompt's first line, shortened.
func title(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if r := []rune(line); len(r) > 60 {
		line = string(r[:60])
	}
	if line == "" {
		line = "bridge session"
	}
	return line
}

// configJSON is the opencode.json that points provider at the router.
func configJSON(routerURL, provider, model string) []byte {
	entry := map[string]any{
		"options": map[string]string{"baseURL": strings.TrimRight(routerURL, "/") + "/v1", "apiKey": "{env:" + KeyVar + "}"},
		"models":  map[string]any{model: map[string]any{}},
	}
	if provider != "anthropic" && provider != "openai" {
		entry["npm"] = "@ai-sdk/openai-compatible"
		entry["name"] = provider
	}
	doc := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"provider":   map[string]any{provider: entry},
		"autoupdate": false,
		"share":      "disabled",
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n')
}

// Env is the environment of a turn: the inherited one without opencode's
// variables, the caller's extras, then the state and config locations,
// the router key and opencode's offline settings.
func Env(t harness.Turn, config string, routed bool) []string {
	set := map[string]string{
		"XDG_DATA_HOME":                 filepath.Join(t.StateDir, "data"),
		"XDG_STATE_HOME":                filepath.Join(t.StateDir, "state"),
		"OPENCODE_DISABLE_AUTOUPDATE":   "1",
		"OPENCODE_DISABLE_MODELS_FETCH": "1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
		"OPENCODE_DISABLE_SHARE":        "1",
	}
	if routed {
		set["OPENCODE_CONFIG"] = config
		if t.RouterKey != "" {
			set[KeyVar] = t.RouterKey
		}
	}
	return harness.MergeEnv(t.Environ, func(name string) bool {
		return strings.HasPrefix(name, "OPENCODE_") || name == KeyVar
	}, t.Env, set)
}
