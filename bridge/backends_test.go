package bridge

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAdapters_Registered checks every backend key of the protocol is
// registered under its harness name, and configured like claude.
func TestAdapters_Registered(t *testing.T) {
	names := map[string]string{}
	for key, a := range Adapters() {
		if a.Key() != key {
			t.Errorf("Adapters()[%q].Key() = %q", key, a.Key())
		}
		names[key] = a.Name()
	}
	want := map[string]string{"claude": "claude-code", "codex": "codex", "pi": "pi", "opencode": "opencode", "gemini": "gemini"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("backend key -> harness name (-want +got):\n%s", diff)
	}

	env := map[string]string{
		"BRIDGE_BACKENDS": "codex, PI,opencode,gemini", "CODEX_BIN": "/opt/codex", "PI_TIMEOUT_MS": "900",
		"OPENCODE_BIN": "/opt/opencode", "GEMINI_BIN": "/opt/gemini",
	}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
	if diff := cmp.Diff([]string{"codex", "pi", "opencode", "gemini"}, c.Backends); diff != "" {
		t.Errorf("Backends (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"codex": "/opt/codex", "opencode": "/opt/opencode", "gemini": "/opt/gemini"}, c.Bins); diff != "" {
		t.Errorf("Bins (-want +got):\n%s", diff)
	}
	if c.Timeouts["pi"] != 900*time.Millisecond {
		t.Errorf("Timeouts = %v, want pi 900ms", c.Timeouts)
	}

	c.Backends = []string{"emacs"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "claude, codex, gemini, opencode, pi") {
		t.Errorf("Validate(unknown) = %v, want the known keys listed", err)
	}
}
