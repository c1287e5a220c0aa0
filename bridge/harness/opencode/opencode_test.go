package opencode

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// The testdata files are real `opencode run --format json` output of
// opencode 1.18.33 against the router stub: tool_turn (Chat Completions
// through @ai-sdk/openai-compatible: a text and a bash call, then text),
// resumed_turn (its `-s` continuation), anthropic_thinking_turn (the
// anthropic provider with --thinking: reasoning, text, bash, text),
// api_error (a model API answering 500) and unknown_model. served_model
// is a turn of the anthropic provider with the served-model plugin loaded
// (the adapter's own Command, the stub naming conformance-served-model in
// its message_start).

func parse(t *testing.T, name string) ([]harness.Event, harness.Parser) {
	t.Helper()
	p := Adapter{}.NewParser()
	return harnesstest.Replay(t, p, filepath.Join("testdata", name)), p
}

func i64(v int64) *int64 { return &v }
func bptr(v bool) *bool  { return &v }

func measured(in, out int64) *wire.Usage {
	return &wire.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out,
		CacheReadInputTokens: i64(0), CacheWriteInputTokens: i64(0), Estimated: bptr(false)}
}

func TestParser_Turns(t *testing.T) {
	bash := func(id, proof string) []harness.Event {
		return []harness.Event{
			{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: 0, ID: id, Type: "function",
				Function: wire.ToolCallFunction{Name: "bash", Arguments: `{"command":"echo ` + proof + ` > proof.txt","description":"write proof"}`}}},
			{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: id, Content: "(no output)"}},
		}
	}
	session := func(id string) harness.Event { return harness.Event{Kind: harness.KindSession, NativeSessionID: id} }
	text := func(s string) harness.Event { return harness.Event{Kind: harness.KindText, Text: s} }
	end := func(u *wire.Usage) harness.Event {
		return harness.Event{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: u}
	}
	tests := []struct {
		file string
		want []harness.Event
	}{
		{"tool_turn.jsonl", slices.Concat([]harness.Event{session("ses_dd65ee677ffeACaOp41bjUEycw"), text("Running.")},
			bash("call_stub00000102", "proof-oc"),
			[]harness.Event{text("\n\nDone after the tool."), end(measured(7676+7749, 22+5))})},
		{"resumed_turn.jsonl", []harness.Event{session("ses_dd65ee677ffeACaOp41bjUEycw"), text("unexpected extra call"), end(measured(7773, 6))}},
		{"served_model.jsonl", []harness.Event{{Kind: harness.KindProviderModel, ProviderModel: "conformance-served-model"},
			session("ses_dcc7372b8ffe0KLBQgaJjy6CaG"), text("hello from stub"), end(measured(7629, 4))}},
		{"anthropic_thinking_turn.jsonl", slices.Concat([]harness.Event{session("ses_dd65cdf7bffe2lpGVPjNYyZgDa"),
			{Kind: harness.KindReasoning, Text: "plan it"}, text("Running.")},
			bash("toolu_stub00000102", "proof-oc2"),
			[]harness.Event{text("\n\nDone after the tool."), end(measured(7623+7731, 22+5))})},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, p := parse(t, tt.file)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if !p.Done() {
				t.Error("Done() = false after the last step")
			}
		})
	}
}

func TestParser_Errors(t *testing.T) {
	tests := []struct{ file, code, message string }{
		{"api_error.jsonl", "APIError", "boom"},
		{"unknown_model.jsonl", "UnknownError", "Unexpected server error"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			evs, p := parse(t, tt.file)
			end := evs[len(evs)-1]
			if end.Kind != harness.KindEnd || end.Err == nil || end.Err.Code != tt.code || !strings.Contains(end.Err.Message, tt.message) || !p.Done() {
				t.Errorf("end = %+v, want error %s %q", end, tt.code, tt.message)
			}
		})
	}
	t.Run("served models", func(t *testing.T) {
		p := Adapter{}.NewParser()
		var got []string
		for _, m := range []string{"a", "a", "", "b"} {
			for _, ev := range p.Line([]byte(`{"type":"` + ServedModelType + `","model":"` + m + `"}`)) {
				got = append(got, ev.ProviderModel)
			}
		}
		if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
			t.Errorf("provider models (-want +got):\n%s", diff)
		}
	})
	t.Run("usage with cache and reasoning", func(t *testing.T) {
		p := Adapter{}.NewParser()
		p.Line([]byte(`{"type":"step_finish","part":{"reason":"tool-calls","tokens":{"input":10,"output":2,"reasoning":3,"cache":{"read":100,"write":5}}}}`))
		evs := p.Line([]byte(`{"type":"step_finish","part":{"reason":"length","tokens":{"input":1,"output":1,"reasoning":0,"cache":{"read":0,"write":0}}}}`))
		want := []harness.Event{{Kind: harness.KindEnd, Finish: wire.FinishLength, Usage: &wire.Usage{
			PromptTokens: 116, CompletionTokens: 6, TotalTokens: 122, CacheReadInputTokens: i64(100), CacheWriteInputTokens: i64(5), Estimated: bptr(false)}}}
		if diff := cmp.Diff(want, evs); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}

func TestAdapter_Command(t *testing.T) {
	state := t.TempDir()
	base := harness.Turn{
		Bin: "/opt/opencode", Model: "router-chat", StateDir: state, Cwd: "/work", Effort: "high",
		RouterURL: "http://127.0.0.1:9/", RouterKey: "rk-secret",
		Environ: []string{"PATH=/bin", "OPENCODE_CONFIG=/elsewhere", "HOME=/root"},
		Messages: []wire.Message{
			{Role: "system", Content: json.RawMessage(`"be brief"`)},
			{Role: "user", Content: json.RawMessage(`"-hello\nworld"`)},
		},
	}
	cmd, err := Adapter{}.Command(base)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run", "--format", "json", "--thinking", "-m", "router/router-chat", "--title=-hello",
		"--variant", "high"}
	if diff := cmp.Diff(want, cmd.Args); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
	if got, want := string(cmd.Stdin), "<system>\nbe brief\n</system>\n\n-hello\nworld"; got != want {
		t.Errorf("Stdin = %q, want %q", got, want)
	}
	env := harnesstest.EnvMap(cmd.Env)
	config := filepath.Join(state, "opencode.json")
	for k, v := range map[string]string{"OPENCODE_CONFIG": config, "TANGLE_API_KEY": "rk-secret", "XDG_DATA_HOME": filepath.Join(state, "data"),
		"OPENCODE_DISABLE_AUTOUPDATE": "1", "PATH": "/bin"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	plugin := filepath.Join(state, PluginFile)
	if len(cmd.Files) != 2 || cmd.Files[0].Path != plugin || !bytes.Contains(cmd.Files[0].Data, []byte(ServedModelType)) ||
		cmd.Files[1].Path != config || bytes.Contains(cmd.Files[1].Data, []byte("rk-secret")) ||
		!bytes.Contains(cmd.Files[1].Data, []byte(`"file://`+filepath.ToSlash(plugin)+`"`)) {
		t.Fatalf("Files = %+v, want the served-model plugin and an opencode.json that loads it, without the key", cmd.Files)
	}
	if v, ok := env["XDG_CONFIG_HOME"]; ok {
		t.Errorf("env XDG_CONFIG_HOME = %q outside a box image, want it unset", v)
	}
	t.Run("box image", func(t *testing.T) {
		// The jail's XDG_CONFIG_HOME comes as a caller's extra.
		turn := base
		turn.Environ = append(slices.Clone(base.Environ), "BOX_HARNESS_ROOT=/opt/boxctl/harness")
		turn.Env = map[string]string{"XDG_CONFIG_HOME": "/jail/.config"}
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		if got := harnesstest.EnvMap(cmd.Env)["XDG_CONFIG_HOME"]; got != "/opt/boxctl/harness" {
			t.Errorf("env XDG_CONFIG_HOME = %q, want the image's harness root, whose opencode prefix holds the plugin SDK", got)
		}
	})
	t.Run("unrouted", func(t *testing.T) {
		turn := base
		turn.RouterURL = ""
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		env := harnesstest.EnvMap(cmd.Env)
		if _, keyed := env["TANGLE_API_KEY"]; keyed || env["OPENCODE_CONFIG"] != config || len(cmd.Files) != 2 ||
			bytes.Contains(cmd.Files[1].Data, []byte(`"provider"`)) || !bytes.Contains(cmd.Files[1].Data, []byte(`"plugin"`)) {
			t.Errorf("unrouted turn: env %v, files %+v; want the plugin's config without a provider or key", env, cmd.Files)
		}
	})

	t.Run("provider entries", func(t *testing.T) {
		tests := []struct{ provider, npm string }{{"anthropic", ""}, {"openai", ""}, {"router", "@ai-sdk/openai-compatible"}, {"groq", "@ai-sdk/openai-compatible"}}
		for _, tt := range tests {
			var doc struct {
				Provider map[string]struct {
					NPM     string `json:"npm"`
					Options struct {
						BaseURL string `json:"baseURL"`
						APIKey  string `json:"apiKey"`
					}
					Models map[string]json.RawMessage
				}
			}
			if err := json.Unmarshal(configJSON(base.RouterURL, tt.provider, "m-1", "/state/p.js"), &doc); err != nil {
				t.Fatal(err)
			}
			p := doc.Provider[tt.provider]
			if p.NPM != tt.npm || p.Options.BaseURL != "http://127.0.0.1:9/v1" || p.Options.APIKey != "{env:TANGLE_API_KEY}" || p.Models["m-1"] == nil {
				t.Errorf("entry of %s = %+v", tt.provider, p)
			}
		}
	})
	t.Run("resume", func(t *testing.T) {
		turn := base
		turn.NativeSessionID, turn.Effort, turn.Model = "ses_1", "", "anthropic/claude-sonnet-4-5"
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(cmd.Args, "-s"); i < 0 || cmd.Args[i+1] != "ses_1" || slices.ContainsFunc(cmd.Args, func(a string) bool { return strings.HasPrefix(a, "--title") }) {
			t.Errorf("Args = %q, want -s ses_1 and no --title", cmd.Args)
		}
		if i := slices.Index(cmd.Args, "-m"); cmd.Args[i+1] != "anthropic/claude-sonnet-4-5" {
			t.Errorf("Args = %q, want -m anthropic/claude-sonnet-4-5", cmd.Args)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, model := range []string{"", "default", "anthropic/", "/x"} {
			turn := base
			turn.Model = model
			if _, err := (Adapter{}).Command(turn); err == nil {
				t.Errorf("Command(model %q) = nil error, want one", model)
			}
		}
	})
}
