package gemini

import (
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

// The testdata files are real `gemini -o stream-json` output of Gemini CLI
// 0.61.0 against the router stub (whose answers name the served model
// "served-model-x"), requesting gemini-2.5-pro: text_turn (text in five
// deltas), tool_turn (a text and a run_shell_command call, then text),
// resumed_turn (its --resume) and api_error (a model API answering 400).

func parse(t *testing.T, name string) ([]harness.Event, harness.Parser) {
	t.Helper()
	p := Adapter{}.NewParser()
	return harnesstest.Replay(t, p, filepath.Join("testdata", name)), p
}

func i64(v int64) *int64 { return &v }
func bptr(v bool) *bool  { return &v }

func usage(in, out int64) *wire.Usage {
	return &wire.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out,
		CacheReadInputTokens: i64(0), Estimated: bptr(false)}
}

func TestParser_Turns(t *testing.T) {
	const session = "11111111-2222-4333-8444-555555555555"
	text := func(s string) harness.Event { return harness.Event{Kind: harness.KindText, Text: s} }
	served := harness.Event{Kind: harness.KindProviderModel, ProviderModel: "served-model-x"}
	end := func(u *wire.Usage) harness.Event {
		return harness.Event{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: u}
	}
	tests := []struct {
		file string
		want []harness.Event
	}{
		{"text_turn.jsonl", []harness.Event{{Kind: harness.KindSession, NativeSessionID: "de4bbf23-64ab-43aa-9923-114673c91841"},
			text("Hello f"), text("rom the "), text("stub, in"), text(" several"), text(" deltas."), served, end(usage(7780, 10))}},
		{"tool_turn.jsonl", []harness.Event{{Kind: harness.KindSession, NativeSessionID: session}, text("Running."),
			{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: 0, ID: "run_shell_command__call_stub00000102", Type: "function",
				Function: wire.ToolCallFunction{Name: "run_shell_command", Arguments: `{"command":"echo proof-gm > proof.txt","description":"write proof"}`}}},
			{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: "run_shell_command__call_stub00000102"}},
			text("\n\nDone "), text("after"), text(" the "), text("tool."), served, end(usage(23552, 31))}},
		{"resumed_turn.jsonl", []harness.Event{{Kind: harness.KindSession, NativeSessionID: session},
			text("unexpected extra call"), served, end(usage(11911, 6))}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, p := parse(t, tt.file)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if !p.Done() {
				t.Error("Done() = false after result")
			}
		})
	}
}

func TestParser_Errors(t *testing.T) {
	t.Run("api error", func(t *testing.T) {
		evs, _ := parse(t, "api_error.jsonl")
		end := evs[len(evs)-1]
		if end.Kind != harness.KindEnd || end.Err == nil || !strings.Contains(end.Err.Message, "model not supported") {
			t.Fatalf("end = %+v, want the API error", end)
		}
		for _, ev := range evs {
			if ev.Kind == harness.KindProviderModel {
				t.Errorf("provider model %q reported for a failed turn (the stats key is the requested model)", ev.ProviderModel)
			}
		}
	})
	t.Run("requested model is not a served one", func(t *testing.T) {
		p := Adapter{}.NewParser()
		p.Line([]byte(`{"type":"init","session_id":"s","model":"gemini-2.5-pro"}`))
		evs := p.Line([]byte(`{"type":"result","status":"success","stats":{"input_tokens":1,"output_tokens":2,"models":{"gemini-2.5-pro":{}}}}`))
		if len(evs) != 1 || evs[0].Kind != harness.KindEnd {
			t.Errorf("events = %+v, want only the end", evs)
		}
	})
	t.Run("warning then result", func(t *testing.T) {
		p := Adapter{}.NewParser()
		if evs := p.Line([]byte(`{"type":"error","severity":"warning","message":"Loop detected"}`)); evs != nil || p.Done() {
			t.Errorf("warning = %+v, want nothing", evs)
		}
		if d := p.(harness.Diagnoser).Diagnosis(); !strings.Contains(d, "Loop detected") {
			t.Errorf("Diagnosis() = %q", d)
		}
	})
}

func TestAdapter_Command(t *testing.T) {
	state := t.TempDir()
	base := harness.Turn{
		Bin: "/opt/gemini", Model: "gemini-2.5-pro", StateDir: state, Cwd: "/work",
		RouterURL: "http://127.0.0.1:9/", RouterKey: "rk-secret",
		Environ: []string{"PATH=/bin", "GEMINI_API_KEY=leak", "GOOGLE_GENAI_USE_VERTEXAI=true", "GOOGLE_APPLICATION_CREDENTIALS=/keep"},
		Messages: []wire.Message{
			{Role: "system", Content: json.RawMessage(`"be brief"`)},
			{Role: "user", Content: json.RawMessage(`"-x hello"`)},
		},
	}
	cmd, err := Adapter{}.Command(base)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"--prompt=", "-o", "stream-json", "--approval-mode", "yolo", "-m", "gemini-2.5-pro", "--session-id"}, cmd.Args[:8]); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
	if len(cmd.Args) != 9 || len(cmd.Args[8]) != 36 {
		t.Errorf("Args = %q, want a session uuid last", cmd.Args)
	}
	if got, want := string(cmd.Stdin), "<system>\nbe brief\n</system>\n\n-x hello"; got != want {
		t.Errorf("Stdin = %q, want %q", got, want)
	}
	env := harnesstest.EnvMap(cmd.Env)
	for k, v := range map[string]string{"GEMINI_CLI_HOME": state, "GEMINI_API_KEY": "rk-secret", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9",
		"GEMINI_CLI_TRUST_WORKSPACE": "true", "GOOGLE_APPLICATION_CREDENTIALS": "/keep"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["GOOGLE_GENAI_USE_VERTEXAI"]; ok {
		t.Error("env keeps GOOGLE_GENAI_USE_VERTEXAI, want it dropped")
	}
	var s struct {
		Security struct{ Auth struct{ SelectedType string } }
	}
	if len(cmd.Files) != 1 || cmd.Files[0].Path != filepath.Join(state, ".gemini", "settings.json") ||
		json.Unmarshal(cmd.Files[0].Data, &s) != nil || s.Security.Auth.SelectedType != "gemini-api-key" {
		t.Errorf("Files = %+v, want settings selecting the API key", cmd.Files)
	}

	t.Run("resume with the default model", func(t *testing.T) {
		turn := base
		turn.NativeSessionID, turn.Model = "sess-1", "default"
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(cmd.Args, "--resume"); i < 0 || cmd.Args[i+1] != "sess-1" || slices.Contains(cmd.Args, "-m") || slices.Contains(cmd.Args, "--session-id") {
			t.Errorf("Args = %q, want --resume sess-1 without -m or --session-id", cmd.Args)
		}
	})
	t.Run("no user message", func(t *testing.T) {
		turn := base
		turn.Messages = base.Messages[:1]
		if _, err := (Adapter{}).Command(turn); err == nil {
			t.Error("Command() = nil error, want one")
		}
	})
}
