package opencode

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/internal/imageenv"
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
	plugin := filepath.Join(t.StateDir, PluginFile)
	files := []harness.File{
		{Path: plugin, Data: servedModelPlugin},
		{Path: config, Data: configJSON(t.RouterURL, provider, model, plugin)},
	}
	// The prompt goes on stdin: opencode run quotes every argument that
	// holds a space.
	return harness.Command{Path: t.Bin, Args: args, Env: Env(t, config), Dir: t.Cwd,
		Stdin: []byte(prompt), Files: files}, nil
}

// PluginFile is the served-model plugin's file in a turn's state
// directory.
const PluginFile = "boxctl-served-model.js"

// servedModelPlugin is the opencode plugin that reports the served model
// of each model API answer (see servedmodel.js).
//
//go:embed servedmodel.js
var servedModelPlugin []byte

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

// configJSON is the opencode.json of a turn: it loads the served-model
// plugin by path and, when routerURL is set, points provider at the
// router.
func configJSON(routerURL, provider, model, plugin string) []byte {
	doc := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"plugin":     []string{(&url.URL{Scheme: "file", Path: filepath.ToSlash(plugin)}).String()},
		"autoupdate": false,
		"share":      "disabled",
	}
	if routerURL != "" {
		entry := map[string]any{
			"options": map[string]string{"baseURL": strings.TrimRight(routerURL, "/") + "/v1", "apiKey": "{env:" + KeyVar + "}"},
			"models":  map[string]any{model: map[string]any{}},
		}
		if provider != "anthropic" && provider != "openai" {
			entry["npm"] = "@ai-sdk/openai-compatible"
			entry["name"] = provider
		}
		doc["provider"] = map[string]any{provider: entry}
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n')
}

// Env is the environment of a turn: the inherited one without opencode's
// variables, the caller's extras, then the state and config locations
// (in a box image, the global configuration directory is opencode's
// install prefix), the router key and opencode's offline settings.
func Env(t harness.Turn, config string) []string {
	set := map[string]string{
		"OPENCODE_CONFIG":               config,
		"XDG_DATA_HOME":                 filepath.Join(t.StateDir, "data"),
		"XDG_STATE_HOME":                filepath.Join(t.StateDir, "state"),
		"OPENCODE_DISABLE_AUTOUPDATE":   "1",
		"OPENCODE_DISABLE_MODELS_FETCH": "1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
		"OPENCODE_DISABLE_SHARE":        "1",
	}
	if root := environ(t.Environ, imageenv.HarnessRoot); root != "" {
		// opencode's global configuration directory is
		// $XDG_CONFIG_HOME/opencode: in a box image, opencode's install
		// prefix, where the image installed the plugin SDK opencode would
		// otherwise install there at every start.
		set["XDG_CONFIG_HOME"] = root
	}
	if t.RouterURL != "" && t.RouterKey != "" {
		set[KeyVar] = t.RouterKey
	}
	return harness.MergeEnv(t.Environ, func(name string) bool {
		return strings.HasPrefix(name, "OPENCODE_") || name == KeyVar
	}, t.Env, set)
}

// environ is the value of name in env ("" when unset).
func environ(env []string, name string) string {
	for _, kv := range slices.Backward(env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}
