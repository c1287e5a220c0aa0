package codex

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// Adapter drives the Codex CLI. The zero value is ready to use.
type Adapter struct{}

var _ harness.Adapter = Adapter{}

// Name returns "codex".
func (Adapter) Name() string { return "codex" }

// Key returns "codex".
func (Adapter) Key() string { return "codex" }

// DefaultBin returns "codex".
func (Adapter) DefaultBin() string { return "codex" }

// Models lists the models /v1/models advertises: "default" (the CLI's own
// default) and the Codex models of the OpenAI catalog.
func (Adapter) Models() []string {
	return []string{"default", "gpt-5.5", "gpt-5.4", "gpt-5.3-codex"}
}

// NewParser returns a parser for a turn of a new thread (usage baseline
// zero) of `codex exec`, or for a retained turn of `codex app-server` (the
// lines its conversation says are the turn's). Command supplies the
// parser of a resumed `codex exec` turn.
func (Adapter) NewParser() harness.Parser { return newServerParser() }

// KeyVar is the environment variable the generated model provider reads
// the router key from.
const KeyVar = harness.RouterKeyVar

// maxArgPrompt is the largest prompt passed as an argument; larger ones go
// on stdin.
const maxArgPrompt = 64 << 10

// Command builds `codex exec [resume <thread>] --json ...` for a turn.
func (Adapter) Command(t harness.Turn) (harness.Command, error) {
	prompt, _ := harness.SplitPrompt(t)
	if strings.TrimSpace(prompt) == "" {
		return harness.Command{}, fmt.Errorf("codex: the turn has no user message text")
	}
	return command(t, prompt)
}

// SpareCommand is Command's `codex exec` reading its prompt from stdin,
// started before the prompt is known: Codex reads stdin once it has
// loaded.
func (Adapter) SpareCommand(t harness.Turn) (harness.Command, error) { return command(t, "") }

// SpareInput is the turn's prompt; the end of stdin after it starts the
// turn.
func (Adapter) SpareInput(t harness.Turn) ([]byte, bool, error) {
	prompt, _ := harness.SplitPrompt(t)
	if strings.TrimSpace(prompt) == "" {
		return nil, false, fmt.Errorf("codex: the turn has no user message text")
	}
	return []byte(prompt), false, nil
}

// command builds `codex exec` of t with prompt, or with "" reading its
// prompt from a held stdin.
func command(t harness.Turn, prompt string) (harness.Command, error) {
	_, system := harness.SplitPrompt(t)
	if t.StateDir == "" {
		return harness.Command{}, fmt.Errorf("codex: the turn has no state directory for CODEX_HOME")
	}
	args := []string{"exec"}
	if t.NativeSessionID != "" {
		args = append(args, "resume")
	}
	args = append(args, "--json", "--skip-git-repo-check", "-c", `sandbox_mode="workspace-write"`,
		"-c", `approval_policy="never"`)
	if m := t.Model; m != "" && !strings.EqualFold(m, "default") {
		args = append(args, "-m", m)
	}
	if t.Effort != "" {
		args = append(args, "-c", "model_reasoning_effort="+tomlString(t.Effort))
	}
	if system != "" {
		args = append(args, "-c", "developer_instructions="+tomlString(system))
	}
	if t.NativeSessionID != "" {
		args = append(args, t.NativeSessionID)
	}
	var stdin []byte
	hold := prompt == ""
	switch {
	case hold:
		args, stdin = append(args, "-"), []byte{}
	case len(prompt) > maxArgPrompt:
		args = append(args, "-")
		stdin = []byte(prompt)
	default:
		args = append(args, "--", prompt)
	}
	base := &totals{}
	if t.NativeSessionID != "" {
		base = rolloutTotals(t.StateDir, t.NativeSessionID)
	}
	return harness.Command{Path: t.Bin, Args: args, Env: Env(t), Dir: t.Cwd, Stdin: stdin, HoldStdin: hold,
		Files: files(t), Parser: newParser(base)}, nil
}

// files are what a turn's Codex needs written first: its own temporary
// directory (see ownTmp) and the configuration that routes it through the
// router.
func files(t harness.Turn) []harness.File {
	var out []harness.File
	if tmp := ownTmp(t); tmp != "" {
		out = append(out, harness.File{Path: filepath.Join(tmp, ".keep")})
	}
	if t.RouterURL != "" {
		out = append(out, harness.File{Path: filepath.Join(t.StateDir, "config.toml"), Data: config(t.RouterURL, t.RouterKey != "")})
	}
	return out
}

// config is the CODEX_HOME/config.toml that routes Codex through the
// router's Responses API.
func config(routerURL string, keyed bool) []byte {
	var b strings.Builder
	b.WriteString("# Written by the bridge for each turn; changes are overwritten.\n")
	b.WriteString("model_provider = \"router\"\n\n[model_providers.router]\nname = \"router\"\n")
	fmt.Fprintf(&b, "base_url = %s\n", tomlString(strings.TrimRight(routerURL, "/")+"/v1"))
	if keyed {
		fmt.Fprintf(&b, "env_key = %s\n", tomlString(KeyVar))
	}
	b.WriteString("wire_api = \"responses\"\n")
	return []byte(b.String())
}

// tomlString quotes s as a TOML basic string: JSON's escapes are a subset
// of TOML's.
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Env is the environment of a turn: the inherited one without OpenAI and
// Codex variables, the caller's extras, then CODEX_HOME and the router key.
func Env(t harness.Turn) []string {
	set := map[string]string{"CODEX_HOME": t.StateDir}
	if tmp := ownTmp(t); tmp != "" {
		set["TMPDIR"] = tmp
	}
	if t.RouterKey != "" && t.RouterURL != "" {
		set[KeyVar] = t.RouterKey
	}
	return harness.MergeEnv(t.Environ, dropInherited, t.Env, set)
}

// ownTmp is the temporary directory a turn's Codex needs of its own, or
// "": Codex puts its helper aliases (codex-linux-sandbox, which a system
// bwrap older than 0.9, such as Debian bookworm's, runs by that name) in
// CODEX_HOME and refuses to when CODEX_HOME is inside the temporary
// directory, and its sandboxed tools then cannot start. Such a CODEX_HOME
// gets a temporary directory inside it instead.
func ownTmp(t harness.Turn) string {
	if t.StateDir == "" {
		return ""
	}
	tmp := t.Env["TMPDIR"]
	for _, kv := range t.Environ {
		if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok && tmp == "" {
			tmp = v
		}
	}
	if tmp == "" {
		tmp = "/tmp"
	}
	home, tmp := filepath.Clean(t.StateDir), filepath.Clean(tmp)
	if home != tmp && !strings.HasPrefix(home, strings.TrimSuffix(tmp, "/")+"/") {
		return ""
	}
	return filepath.Join(home, "tmp")
}

func dropInherited(name string) bool {
	return strings.HasPrefix(name, "OPENAI_") || strings.HasPrefix(name, "CODEX_") || name == KeyVar
}
