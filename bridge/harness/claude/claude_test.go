package claude

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
)

func parseFile(t *testing.T, name string) ([]harness.Event, harness.Parser) {
	t.Helper()
	p := Adapter{}.NewParser()
	return harnesstest.Replay(t, p, name), p
}

func i64(v int64) *int64 { return &v }
func bptr(v bool) *bool  { return &v }

func TestParser_ToolTurn(t *testing.T) {
	got, p := parseFile(t, "testdata/tool_turn.jsonl")
	want := []harness.Event{
		{Kind: harness.KindSession, NativeSessionID: "5b0c6f1e-0000-4000-8000-000000000001"},
		{Kind: harness.KindProviderModel, ProviderModel: "claude-sonnet-4-5-20250929"},
		{Kind: harness.KindReasoning, Text: "Let me look."},
		{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: 0, ID: "toolu_1", Type: "function", Function: wire.ToolCallFunction{Name: "Bash"}}},
		{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: 0, Function: wire.ToolCallFunction{Arguments: `{"command":`}}},
		{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: 0, Function: wire.ToolCallFunction{Arguments: `"ls"}`}}},
		{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: "toolu_1", Content: "a.txt\nb.txt"}},
		{Kind: harness.KindProviderModel, ProviderModel: "claude-sonnet-4-5-20250929"},
		{Kind: harness.KindText, Text: "Two "},
		{Kind: harness.KindText, Text: "files."},
		{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: &wire.Usage{
			PromptTokens: 45, CompletionTokens: 25, TotalTokens: 70,
			CacheReadInputTokens: i64(0), CacheWriteInputTokens: i64(5), Estimated: bptr(false),
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !p.Done() {
		t.Error("Done() = false after result, want true")
	}
}

func TestParser_Results(t *testing.T) {
	tests := []struct {
		name       string
		line       string
		wantFinish string
		wantErr    string // error code, "" for none
		wantUsage  bool
	}{
		{"success", `{"type":"result","subtype":"success","is_error":false,"stop_reason":"end_turn","usage":{"input_tokens":0,"output_tokens":0}}`, "stop", "", true},
		{"max tokens", `{"type":"result","subtype":"success","is_error":false,"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":2}}`, "length", "", true},
		{"api error says success", `{"type":"result","subtype":"success","is_error":true,"result":"API Error: 500","terminal_reason":"api_error","usage":{"input_tokens":0,"output_tokens":0}}`, "error", "api_error", true},
		{"unknown resume", `{"type":"result","subtype":"error_during_execution","is_error":false,"errors":["No conversation found"]}`, "error", "error_during_execution", false},
		{"usage without output is not measured", `{"type":"result","subtype":"success","is_error":false,"usage":{"input_tokens":3}}`, "stop", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Adapter{}.NewParser()
			evs := p.Line([]byte(tt.line))
			if len(evs) != 1 || evs[0].Kind != harness.KindEnd {
				t.Fatalf("Line(result) = %+v, want one end event", evs)
			}
			ev := evs[0]
			if ev.Finish != tt.wantFinish {
				t.Errorf("Finish = %q, want %q", ev.Finish, tt.wantFinish)
			}
			gotCode := ""
			if ev.Err != nil {
				gotCode = ev.Err.Code
				if ev.Err.Type != wire.TypeHarnessError || ev.Err.Message == "" {
					t.Errorf("Err = %+v, want harness_error with a message", ev.Err)
				}
			}
			if gotCode != tt.wantErr {
				t.Errorf("error code = %q, want %q", gotCode, tt.wantErr)
			}
			if (ev.Usage != nil) != tt.wantUsage {
				t.Errorf("Usage = %+v, want present %v", ev.Usage, tt.wantUsage)
			}
			if ev.Usage != nil && (ev.Usage.Estimated == nil || *ev.Usage.Estimated) {
				t.Errorf("Usage.Estimated = %v, want explicit false", ev.Usage.Estimated)
			}
		})
	}
}

func TestParser_AssistantWithoutStream(t *testing.T) {
	p := Adapter{}.NewParser()
	got := p.Line([]byte(`{"type":"assistant","message":{"id":"m9","model":"x","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"Read","input":{"p":1}}]}}`))
	want := []harness.Event{
		{Kind: harness.KindText, Text: "hi"},
		{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: 0, ID: "t1", Type: "function", Function: wire.ToolCallFunction{Name: "Read", Arguments: `{"p":1}`}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if evs := p.Line([]byte("not json")); evs != nil {
		t.Errorf("Line(garbage) = %v, want nil", evs)
	}
}

func TestAdapter_Command(t *testing.T) {
	base := harness.Turn{
		Bin: "/opt/claude", Model: "sonnet", StateDir: "/data/s1",
		RouterURL: "http://127.0.0.1:9/", RouterKey: "rk-secret",
		Environ: []string{"PATH=/bin", "CLAUDECODE=1", "CLAUDE_CODE_ENTRYPOINT=cli", "ANTHROPIC_API_KEY=leak", "HOME=/root"},
		Env:     map[string]string{"FOO": "bar", "ANTHROPIC_BASE_URL": "http://evil"},
		Messages: []wire.Message{
			{Role: "system", Content: json.RawMessage(`"be brief"`)},
			{Role: "user", Content: json.RawMessage(`"first"`)},
			{Role: "assistant", Content: json.RawMessage(`"ok"`)},
			{Role: "user", Content: json.RawMessage(`[{"type":"text","text":"second"}]`)},
		},
	}
	t.Run("new session", func(t *testing.T) {
		cmd, err := Adapter{}.Command(base)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Path != "/opt/claude" || cmd.Stdin != nil {
			t.Errorf("Path, Stdin = %q, %q, want /opt/claude and no stdin", cmd.Path, cmd.Stdin)
		}
		for _, want := range []string{"-p", "--verbose", "--include-partial-messages", "--session-id", "--append-system-prompt"} {
			if !slices.Contains(cmd.Args, want) {
				t.Errorf("Args = %q, want %q", cmd.Args, want)
			}
		}
		if i := slices.Index(cmd.Args, "--output-format"); i < 0 || cmd.Args[i+1] != "stream-json" {
			t.Errorf("Args = %q, want --output-format stream-json", cmd.Args)
		}
		if i := slices.Index(cmd.Args, "--model"); i < 0 || cmd.Args[i+1] != "sonnet" {
			t.Errorf("Args = %q, want --model sonnet", cmd.Args)
		}
		prompt := cmd.Args[len(cmd.Args)-1]
		if !strings.Contains(prompt, "user: first") || !strings.HasSuffix(prompt, "second") {
			t.Errorf("prompt = %q, want the transcript then the last message", prompt)
		}
		env := harnesstest.EnvMap(cmd.Env)
		want := map[string]string{
			"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_AUTH_TOKEN": "rk-secret",
			"CLAUDE_CONFIG_DIR": "/data/s1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "FOO": "bar", "PATH": "/bin", "HOME": "/root",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("env %s = %q, want %q", k, env[k], v)
			}
		}
		for _, k := range []string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "ANTHROPIC_API_KEY"} {
			if _, ok := env[k]; ok {
				t.Errorf("env has inherited %s, want it stripped", k)
			}
		}
	})
	t.Run("resume sends only the last message", func(t *testing.T) {
		turn := base
		turn.NativeSessionID = "abc"
		turn.Model = "default"
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(cmd.Args, "--resume"); i < 0 || cmd.Args[i+1] != "abc" {
			t.Errorf("Args = %q, want --resume abc", cmd.Args)
		}
		if slices.Contains(cmd.Args, "--model") || slices.Contains(cmd.Args, "--session-id") {
			t.Errorf("Args = %q, want no --model for default and no --session-id on resume", cmd.Args)
		}
		if got := cmd.Args[len(cmd.Args)-1]; got != "second" {
			t.Errorf("prompt = %q, want second", got)
		}
	})
	t.Run("flag-like prompt goes on stdin", func(t *testing.T) {
		turn := base
		turn.Messages = []wire.Message{{Role: "user", Content: json.RawMessage(`"--help me"`)}}
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(cmd.Args, "--input-format"); i < 0 || cmd.Args[i+1] != "stream-json" {
			t.Errorf("Args = %q, want --input-format stream-json", cmd.Args)
		}
		var line struct {
			Type    string
			Message struct{ Content []struct{ Text string } }
		}
		if err := json.Unmarshal(cmd.Stdin, &line); err != nil || line.Type != "user" || line.Message.Content[0].Text != "--help me" {
			t.Errorf("Stdin = %q (%v), want a stream-json user line", cmd.Stdin, err)
		}
	})
	t.Run("no user message", func(t *testing.T) {
		turn := base
		turn.Messages = []wire.Message{{Role: "system", Content: json.RawMessage(`"x"`)}}
		if _, err := (Adapter{}).Command(turn); err == nil {
			t.Error("Command(no user message) = nil error, want an error")
		}
	})
}

// TestAdapter_SystemText: system and developer messages both reach Claude
// Code as --append-system-prompt, in a one-shot turn and in a retained
// session alike, and never as the prompt.
func TestAdapter_SystemText(t *testing.T) {
	msg := func(role, text string) wire.Message {
		return wire.Message{Role: role, Content: json.RawMessage(strconv.Quote(text))}
	}
	tests := []struct {
		name     string
		messages []wire.Message
		want     string
	}{
		{"developer", []wire.Message{msg("developer", "answer in French"), msg("user", "hi")}, "answer in French"},
		{"system", []wire.Message{msg("system", "be brief"), msg("user", "hi")}, "be brief"},
		{"both in order", []wire.Message{msg("system", "be brief"), msg("developer", "answer in French"), msg("user", "hi")}, "be brief\n\nanswer in French"},
	}
	build := map[string]func(harness.Turn) (harness.Command, error){
		"Command":        Adapter{}.Command,
		"SessionCommand": Adapter{}.SessionCommand,
	}
	for _, tt := range tests {
		for name, cmdOf := range build {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				cmd, err := cmdOf(harness.Turn{Bin: "claude", Messages: tt.messages})
				if err != nil {
					t.Fatal(err)
				}
				i := slices.Index(cmd.Args, "--append-system-prompt")
				if i < 0 || cmd.Args[i+1] != tt.want {
					t.Errorf("Args = %q, want --append-system-prompt %q", cmd.Args, tt.want)
				}
				if name == "Command" && cmd.Args[len(cmd.Args)-1] != "hi" {
					t.Errorf("prompt = %q, want only the user message", cmd.Args[len(cmd.Args)-1])
				}
			})
		}
	}
}
