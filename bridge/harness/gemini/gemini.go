package gemini

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// Adapter drives the Gemini CLI. The zero value is ready to use.
type Adapter struct{}

var _ harness.Adapter = Adapter{}

// Name returns "gemini".
func (Adapter) Name() string { return "gemini" }

// Key returns "gemini".
func (Adapter) Key() string { return "gemini" }

// DefaultBin returns "gemini".
func (Adapter) DefaultBin() string { return "gemini" }

// Models lists the models /v1/models advertises: "default" (the CLI's own
// choice) and Gemini models.
func (Adapter) Models() []string {
	return []string{"default", "gemini-2.5-pro", "gemini-2.5-flash"}
}

// NewParser returns a parser for one turn.
func (Adapter) NewParser() harness.Parser { return newParser() }

// settings is the CLI's settings.json when it talks to the router. The
// CLI's session cleanup is off: at start it deletes every file of a
// session one of whose files holds no conversation, and a session/load
// leaves such a file beside the one with the history.
const settings = `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true, "sessionRetention": {"enabled": false}}
}
`

// Command builds `gemini -o stream-json ...` for a turn.
func (Adapter) Command(t harness.Turn) (harness.Command, error) {
	prompt, err := turnPrompt(t)
	if err != nil {
		return harness.Command{}, err
	}
	if t.StateDir == "" {
		return harness.Command{}, fmt.Errorf("gemini: the turn has no state directory for GEMINI_CLI_HOME")
	}
	args := []string{"--prompt=", "-o", "stream-json", "--approval-mode", "yolo"}
	if m := t.Model; m != "" && !strings.EqualFold(m, "default") {
		args = append(args, "-m", m)
	}
	if t.NativeSessionID != "" {
		args = append(args, "--resume", t.NativeSessionID)
	} else {
		args = append(args, "--session-id", newUUID())
	}
	var files []harness.File
	if t.RouterURL != "" {
		files = append(files, harness.File{Path: filepath.Join(t.StateDir, ".gemini", "settings.json"), Data: []byte(settings)})
	}
	return harness.Command{Path: t.Bin, Args: args, Env: Env(t), Dir: t.Cwd, Stdin: []byte(prompt), Files: files}, nil
}

// noRelaunch keeps the CLI in one process. Without it the CLI starts a
// second Node.js process with a larger heap and waits on it, ignoring
// SIGINT, SIGTERM and SIGHUP: two starts of a large bundle (`--version`
// takes 2.5 times as long) and a parent that outlives a polite stop.
const noRelaunch = "GEMINI_CLI_NO_RELAUNCH"

// VersionEnv starts the probe's CLI in one process (noRelaunch).
func (Adapter) VersionEnv() []string { return []string{noRelaunch + "=true"} }

// Env is the environment of a turn: the inherited one without Gemini and
// Google AI variables when the router is used, the caller's extras, then
// the state directory, the router and the CLI's headless settings.
func Env(t harness.Turn) []string {
	set := map[string]string{
		"GEMINI_CLI_HOME":            t.StateDir,
		"GEMINI_CLI_TRUST_WORKSPACE": "true",
		noRelaunch:                   "true",
	}
	drop := func(string) bool { return false }
	if t.RouterURL != "" {
		set["GOOGLE_GEMINI_BASE_URL"] = strings.TrimRight(t.RouterURL, "/")
		set["GEMINI_API_KEY"] = t.RouterKey
		drop = func(name string) bool {
			return strings.HasPrefix(name, "GEMINI_") || strings.HasPrefix(name, "GOOGLE_GEMINI_") ||
				strings.HasPrefix(name, "GOOGLE_GENAI_") || name == "GOOGLE_API_KEY"
		}
	}
	return harness.MergeEnv(t.Environ, drop, t.Env, set)
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
