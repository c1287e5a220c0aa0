package pi

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

// The testdata files are real `pi --mode rpc` output against the router
// stub (Chat Completions), with a prompt and a get_state command on stdin:
// from @mariozechner/pi-coding-agent 0.73.1 (v0.73-*) and
// @earendil-works/pi-coding-agent 1.6.0 (v1-*). tool_turn: a text and a
// bash tool call, then text in four deltas; resumed_turn: the next turn
// with --session; retried_error: a model API answering 500, which Pi 1.x
// retries three times.

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
	bash := []wire.ToolCall{{Index: 0, ID: "call_stub00000102", Type: "function",
		Function: wire.ToolCallFunction{Name: "bash", Arguments: `{"command":"echo proof-pi > proof.txt"}`}}}
	results := []wire.ToolResult{{ToolCallID: "call_stub00000102", Content: "(no output)"}}
	served := []string{"served-model-x", "served-model-x"}
	stop := func(u *wire.Usage) []harness.Event {
		return []harness.Event{{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: u}}
	}
	tests := []struct {
		file          string
		want          harnesstest.Summary
		minTextDeltas int
	}{
		{"v0.73-tool_turn.jsonl", harnesstest.Summary{Session: "01a2299c-dc14-70c2-89a7-fd28b5dcd966", Text: "Running.\n\nDone after the tool.",
			ToolCalls: bash, ToolResults: results, ProviderModels: served, Ends: stop(measured(1388+1453, 15+5))}, 3},
		{"v0.73-resumed_turn.jsonl", harnesstest.Summary{Session: "01a2299c-dc14-70c2-89a7-fd28b5dcd966", Text: "unexpected extra call",
			ProviderModels: served[:1], Ends: stop(measured(1483, 6))}, 1},
		{"v1-tool_turn.jsonl", harnesstest.Summary{Session: "01a2299c-8314-772a-bc68-026fbd6ce345", Text: "Running.\n\nDone after the tool.",
			ToolCalls: bash, ToolResults: results, ProviderModels: served, Ends: stop(measured(1344+1410, 15+5))}, 5},
		{"v1-resumed_turn.jsonl", harnesstest.Summary{Session: "01a2299c-8314-772a-bc68-026fbd6ce345", Text: "unexpected extra call",
			ProviderModels: served[:1], Ends: stop(measured(1439, 6))}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			evs, p := parse(t, tt.file)
			got := harnesstest.Summarize(evs)
			if got.TextDeltas < tt.minTextDeltas {
				t.Errorf("text came in %d deltas, want at least %d", got.TextDeltas, tt.minTextDeltas)
			}
			got.TextDeltas = 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("turn (-want +got):\n%s", diff)
			}
			if !p.Done() {
				t.Error("Done() = false at the end of the turn")
			}
		})
	}
}

// TestParser_CumulativeUpdates checks 0.73's snapshots, which may run
// ahead of their own deltas, become each piece of text exactly once.
func TestParser_CumulativeUpdates(t *testing.T) {
	evs, _ := parse(t, "v0.73-tool_turn.jsonl")
	var deltas []string
	for _, ev := range evs {
		if ev.Kind == harness.KindText {
			deltas = append(deltas, ev.Text)
		}
	}
	want := []string{"Running.", "\n\nDone after", " the ", "tool."}
	if diff := cmp.Diff(want, deltas); diff != "" {
		t.Errorf("text deltas (-want +got):\n%s", diff)
	}
}

func TestParser_Errors(t *testing.T) {
	t.Run("retried error ends once, failed", func(t *testing.T) {
		evs, p := parse(t, "v1-retried_error.jsonl")
		got := harnesstest.Summarize(evs)
		if len(got.Ends) != 1 || got.Ends[0].Err == nil || got.Ends[0].Finish != wire.FinishError ||
			!strings.Contains(got.Ends[0].Err.Message, "boom") {
			t.Fatalf("ends = %+v, want one error end naming the API's message", got.Ends)
		}
		if d := p.(harness.Diagnoser).Diagnosis(); !strings.Contains(d, "boom") {
			t.Errorf("Diagnosis() = %q", d)
		}
	})
	t.Run("retry pending does not end", func(t *testing.T) {
		p := Adapter{}.NewParser()
		if evs := p.Line([]byte(`{"type":"agent_end","messages":[],"willRetry":true}`)); evs != nil || p.Done() {
			t.Errorf("agent_end willRetry:true = %+v, done %v; want nothing", evs, p.Done())
		}
	})
	t.Run("rejected prompt", func(t *testing.T) {
		p := Adapter{}.NewParser()
		evs := p.Line([]byte(`{"id":"prompt","type":"response","command":"prompt","success":false,"error":"No model selected"}`))
		if len(evs) != 1 || evs[0].Err == nil || evs[0].Err.Message != "No model selected" || !p.Done() {
			t.Errorf("events = %+v, want an error end", evs)
		}
	})
	t.Run("aborted", func(t *testing.T) {
		p := Adapter{}.NewParser()
		p.Line([]byte(`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"aborted"}}`))
		evs := p.Line([]byte(`{"type":"agent_settled","aborted":true}`))
		if len(evs) != 1 || evs[0].Err == nil || evs[0].Usage != nil {
			t.Errorf("events = %+v, want an error end without usage", evs)
		}
	})
}

func TestAdapter_Command(t *testing.T) {
	state := t.TempDir()
	base := harness.Turn{
		Bin: "/opt/pi", Model: "anthropic/claude-sonnet-4-5", StateDir: state, Cwd: "/work", Effort: "high",
		RouterURL: "http://127.0.0.1:9/", RouterKey: "rk-secret",
		Environ: []string{"PATH=/bin", "PI_CODING_AGENT_DIR=/elsewhere", "HOME=/root"},
		Messages: []wire.Message{
			{Role: "system", Content: json.RawMessage(`"be brief"`)},
			{Role: "user", Content: json.RawMessage(`"hello"`)},
		},
	}
	cmd, err := Adapter{}.Command(base)
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{"--mode", "rpc", "--model", "anthropic/claude-sonnet-4-5", "--thinking", "high", "--append-system-prompt", "be brief"}
	if diff := cmp.Diff(wantArgs, cmd.Args); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
	if !cmd.HoldStdin || cmd.Dir != "/work" {
		t.Errorf("HoldStdin %v, Dir %q; want stdin held, /work", cmd.HoldStdin, cmd.Dir)
	}
	var cmds []map[string]string
	for _, l := range bytes.Split(bytes.TrimSpace(cmd.Stdin), []byte("\n")) {
		var c map[string]string
		if err := json.Unmarshal(l, &c); err != nil {
			t.Fatalf("stdin line %q: %v", l, err)
		}
		cmds = append(cmds, c)
	}
	wantCmds := []map[string]string{{"type": "prompt", "id": "prompt", "message": "hello"}, {"type": "get_state", "id": "state"}}
	if diff := cmp.Diff(wantCmds, cmds); diff != "" {
		t.Errorf("stdin commands (-want +got):\n%s", diff)
	}
	agent := filepath.Join(state, "agent")
	env := harnesstest.EnvMap(cmd.Env)
	for k, v := range map[string]string{"PI_CODING_AGENT_DIR": agent, "TANGLE_API_KEY": "rk-secret", "PI_OFFLINE": "1", "PATH": "/bin"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if len(cmd.Files) != 1 || cmd.Files[0].Path != filepath.Join(agent, "models.json") {
		t.Fatalf("Files = %+v, want agent/models.json", cmd.Files)
	}
	if bytes.Contains(cmd.Files[0].Data, []byte("rk-secret")) {
		t.Error("models.json holds the router key")
	}

	t.Run("provider entries", func(t *testing.T) {
		tests := []struct{ provider, api, baseURL string }{
			{"anthropic", "anthropic-messages", "http://127.0.0.1:9"},
			{"openai", "openai-responses", "http://127.0.0.1:9/v1"},
			{"router", "openai-completions", "http://127.0.0.1:9/v1"},
		}
		for _, tt := range tests {
			var doc struct {
				Providers map[string]struct {
					BaseURL string `json:"baseUrl"`
					API     string `json:"api"`
					APIKey  string `json:"apiKey"`
					Models  []struct{ ID string }
				}
			}
			if err := json.Unmarshal(modelsJSON(base.RouterURL, tt.provider, "m/x"), &doc); err != nil {
				t.Fatal(err)
			}
			p := doc.Providers[tt.provider]
			if p.BaseURL != tt.baseURL || p.API != tt.api || p.APIKey != "!printenv TANGLE_API_KEY" || len(p.Models) != 1 || p.Models[0].ID != "m/x" {
				t.Errorf("models.json entry of %s = %+v, want %s at %s", tt.provider, p, tt.api, tt.baseURL)
			}
		}
	})
	t.Run("resume", func(t *testing.T) {
		turn := base
		turn.NativeSessionID, turn.Effort = "01a2", ""
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(cmd.Args, "--session"); i < 0 || cmd.Args[i+1] != "01a2" {
			t.Errorf("Args = %q, want --session 01a2", cmd.Args)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, model := range []string{"", "default", "claude", "anthropic/"} {
			turn := base
			turn.Model = model
			if _, err := (Adapter{}).Command(turn); err == nil {
				t.Errorf("Command(model %q) = nil error, want one", model)
			}
		}
	})
}
