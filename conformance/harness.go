package conformance

import (
	"encoding/json"
	"fmt"

	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/provider"
)

// Harness is a harness the suite runs its cases for: the pinned row and
// the agent profile of its environments.
type Harness struct {
	Pin     pins.Harness
	Profile provider.Profile
	// tool is the harness's shell tool, for the local endpoint's scripted
	// tool call.
	tool shellTool
}

// Name returns the harness name.
func (h Harness) Name() string { return h.Pin.Name }

// shellTool is how a harness's model asks to run a shell command.
type shellTool struct {
	// Name is the tool's name in the model API.
	Name string
	// Arg is the input field holding the command; Extra are fields the
	// tool also requires.
	Arg   string
	Extra map[string]string
}

// call returns the tool input that runs command.
func (t shellTool) call(command string) string {
	in := map[string]string{t.Arg: command}
	for k, v := range t.Extra {
		in[k] = v
	}
	b, _ := json.Marshal(in)
	return string(b)
}

// profiles are the agent profiles of the harnesses the suite knows: the
// model each harness's environments declare, and its shell tool.
var profiles = map[string]struct {
	model provider.ProfileModel
	tool  shellTool
}{
	"claude-code": {provider.ProfileModel{Default: "claude-sonnet-4-5"},
		shellTool{Name: "Bash", Arg: "command", Extra: map[string]string{"description": "Run the conformance command"}}},
	// Pi routes are pi/<provider>/<model>; anthropic speaks the Messages
	// API, which the local endpoint and the Router both serve.
	"pi":       {provider.ProfileModel{Default: "claude-sonnet-4-5", Provider: "anthropic"}, shellTool{Name: "bash", Arg: "command"}},
	"codex":    {provider.ProfileModel{Default: "default"}, shellTool{Name: "exec_command", Arg: "cmd"}},
	"opencode": {provider.ProfileModel{Default: "claude-sonnet-4-5", Provider: "anthropic"}, shellTool{Name: "bash", Arg: "command", Extra: map[string]string{"description": "Run the conformance command"}}},
	"gemini":   {provider.ProfileModel{Default: "gemini-2.5-pro"}, shellTool{Name: "run_shell_command", Arg: "command"}},
}

// harnesses resolves names (harness names or backend keys) against p.
func harnesses(p *pins.Pins, names []string) ([]Harness, error) {
	if len(names) == 0 {
		names = []string{"claude-code"}
	}
	var out []Harness
	seen := map[string]bool{}
	for _, n := range names {
		pin, ok := p.Harness(n)
		if !ok {
			return nil, fmt.Errorf("harness %q: %w", n, pins.ErrUnknownHarness)
		}
		if seen[pin.Name] {
			continue
		}
		seen[pin.Name] = true
		prof, ok := profiles[pin.Name]
		if !ok {
			return nil, fmt.Errorf("harness %s: the conformance suite has no profile for it", pin.Name)
		}
		out = append(out, Harness{Pin: *pin, tool: prof.tool,
			Profile: provider.Profile{Name: "conformance-" + pin.Name, Harness: pin.Name, Model: prof.model}})
	}
	return out, nil
}
