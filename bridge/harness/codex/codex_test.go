package codex

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// The testdata files are real `codex exec --json` output of codex-cli
// 0.171.0 against the router stub: tool_turn (a reasoning block, a text, a
// shell command, then text), resumed_turn (its `exec resume`),
// failed_turn (a model API that answers 500), reconnecting (an endpoint
// that does not listen, cut after a minute) and metadata_warning (an
// unknown model), served_model (a turn of model "default" against the stub
// that names its served model in the Openai-Model header, captured with
// the stub's conformance-served-model). rollout-token-counts holds the token_count lines of the
// rollout file of tool_turn's thread after both turns.

func parse(t *testing.T, p harness.Parser, name string) []harness.Event {
	t.Helper()
	return harnesstest.Replay(t, p, filepath.Join("testdata", name))
}

func i64(v int64) *int64 { return &v }
func bptr(v bool) *bool  { return &v }

func measured(in, out, cached, write int64) *wire.Usage {
	return &wire.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out,
		CacheReadInputTokens: i64(cached), CacheWriteInputTokens: i64(write), Estimated: bptr(false)}
}

func TestParser_ToolTurn(t *testing.T) {
	p := Adapter{}.NewParser()
	got := parse(t, p, "tool_turn.jsonl")
	want := []harness.Event{
		{Kind: harness.KindSession, NativeSessionID: "01a22992-7ed5-78c2-b4dc-051ce2154100"},
		{Kind: harness.KindReasoning, Text: "plan it"},
		{Kind: harness.KindText, Text: "Running."},
		{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: 0, ID: "item_2", Type: "function",
			Function: wire.ToolCallFunction{Name: "shell", Arguments: `{"command":"/bin/bash -lc 'echo proof-1 \u003e proof.txt'"}`}}},
		{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: "item_2", Content: ""}},
		{Kind: harness.KindText, Text: "\n\nDone after the tool."},
		{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: measured(19172, 21, 0, 0)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !p.Done() {
		t.Error("Done() = false after turn.completed, want true")
	}
}

// TestParser_ServedModel checks the served model of Codex's reroute
// warning is reported, and the warning is not the turn's diagnosis.
func TestParser_ServedModel(t *testing.T) {
	p := Adapter{}.NewParser()
	var models []string
	for _, ev := range parse(t, p, "served_model.jsonl") {
		if ev.Kind == harness.KindProviderModel {
			models = append(models, ev.ProviderModel)
		}
	}
	if diff := cmp.Diff([]string{"conformance-served-model"}, models); diff != "" || !p.Done() {
		t.Errorf("provider models (-want +got):\n%s\ndone %v", diff, p.Done())
	}
	for _, tc := range []struct{ msg, want string }{
		{"model rerouted: gpt-5.5 -> gpt-5.2 (HighRiskCyberActivity)", "gpt-5.2"},
		{"model rerouted: a -> b", "b"},
		{"model rerouted: a", ""},
		{"Model metadata for `x` not found.", ""},
	} {
		if got := reroutedTo(tc.msg); got != tc.want {
			t.Errorf("reroutedTo(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// TestParser_ResumedUsage checks the per-turn usage of a resumed turn is
// the difference from the totals of the thread's rollout before it.
func TestParser_ResumedUsage(t *testing.T) {
	const thread = "01a22992-7ed5-78c2-b4dc-051ce2154100"
	rollout, err := os.ReadFile("testdata/rollout-token-counts.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// The rollout as it was before the resumed turn: up to the first
	// task_complete.
	var before []byte
	for _, l := range bytes.SplitAfter(rollout, []byte("\n")) {
		before = append(before, l...)
		if bytes.Contains(l, []byte(`"task_complete"`)) {
			break
		}
	}
	tests := []struct {
		name    string
		rollout []byte // nil: no rollout file
		want    *wire.Usage
	}{
		{"baseline from the rollout", before, measured(28927-19172, 27-21, 0, 0)},
		{"no rollout leaves usage unknown", nil, nil},
		{"rollout without counts leaves usage unknown", []byte(`{"type":"session_meta","payload":{}}` + "\n"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.rollout != nil {
				dir := filepath.Join(home, "sessions", "2026", "11", "29")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "rollout-2026-11-29T23-09-56-"+thread+".jsonl"), tt.rollout, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd, err := Adapter{}.Command(harness.Turn{Bin: "codex", StateDir: home, NativeSessionID: thread,
				Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"And again"`)}}})
			if err != nil {
				t.Fatal(err)
			}
			evs := parse(t, cmd.Parser, "resumed_turn.jsonl")
			end := evs[len(evs)-1]
			if end.Kind != harness.KindEnd {
				t.Fatalf("last event = %+v, want the end", end)
			}
			if diff := cmp.Diff(tt.want, end.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParser_Failures(t *testing.T) {
	t.Run("failed turn", func(t *testing.T) {
		p := Adapter{}.NewParser()
		evs := parse(t, p, "failed_turn.jsonl")
		end := evs[len(evs)-1]
		if end.Kind != harness.KindEnd || end.Finish != wire.FinishError || end.Err == nil ||
			end.Err.Type != wire.TypeHarnessError || !strings.Contains(end.Err.Message, "high demand") {
			t.Errorf("end = %+v, want a harness_error naming the API's message", end)
		}
		if !p.Done() {
			t.Error("Done() = false after turn.failed")
		}
	})
	t.Run("reconnecting never ends the turn", func(t *testing.T) {
		p := Adapter{}.NewParser()
		for _, ev := range parse(t, p, "reconnecting.jsonl") {
			if ev.Kind != harness.KindSession {
				t.Errorf("event %+v, want only the session", ev)
			}
		}
		if p.Done() {
			t.Error("Done() = true, want the turn still open")
		}
		d := p.(harness.Diagnoser).Diagnosis()
		if !strings.Contains(d, "Reconnecting... waiting for network") {
			t.Errorf("Diagnosis() = %q, want the last reconnect message", d)
		}
	})
	t.Run("warning item", func(t *testing.T) {
		p := Adapter{}.NewParser()
		evs := parse(t, p, "metadata_warning.jsonl")
		var text string
		for _, ev := range evs {
			if ev.Kind == harness.KindText {
				text += ev.Text
			}
		}
		if text != "Hello from the stub, in several deltas." || !p.Done() {
			t.Errorf("text = %q, done %v; want the message and the end", text, p.Done())
		}
	})
	t.Run("garbage", func(t *testing.T) {
		if evs := (Adapter{}).NewParser().Line([]byte("Reading additional input from stdin...")); evs != nil {
			t.Errorf("Line(garbage) = %v, want nil", evs)
		}
	})
}

// TestParser_Updates checks an item reported in growing updates yields
// each new suffix once.
func TestParser_Updates(t *testing.T) {
	p := Adapter{}.NewParser()
	var got string
	for _, l := range []string{
		`{"type":"item.started","item":{"id":"i1","type":"agent_message","text":""}}`,
		`{"type":"item.updated","item":{"id":"i1","type":"agent_message","text":"Hel"}}`,
		`{"type":"item.updated","item":{"id":"i1","type":"agent_message","text":"Hello"}}`,
		`{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"Hello"}}`,
	} {
		for _, ev := range p.Line([]byte(l)) {
			got += ev.Text + "|"
		}
	}
	if got != "Hel|lo|" {
		t.Errorf("deltas = %q, want %q", got, "Hel|lo|")
	}
}

func TestAdapter_Command(t *testing.T) {
	state := t.TempDir()
	base := harness.Turn{
		Bin: "/opt/codex", Model: "gpt-5.5", StateDir: state, Cwd: "/work", Effort: "high",
		RouterURL: "http://127.0.0.1:9/", RouterKey: "rk-secret",
		Environ: []string{"PATH=/bin", "OPENAI_API_KEY=leak", "CODEX_HOME=/elsewhere", "HOME=/root", "TMPDIR=/var/tmp/elsewhere"},
		Env:     map[string]string{"FOO": "bar", "TANGLE_API_KEY": "caller"},
		Messages: []wire.Message{
			{Role: "system", Content: json.RawMessage(`"be brief"`)},
			{Role: "user", Content: json.RawMessage(`"first"`)},
			{Role: "assistant", Content: json.RawMessage(`"ok"`)},
			{Role: "user", Content: json.RawMessage(`"-second"`)},
		},
	}
	t.Run("new thread", func(t *testing.T) {
		cmd, err := Adapter{}.Command(base)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Path != "/opt/codex" || cmd.Dir != "/work" || cmd.Stdin != nil || cmd.HoldStdin || cmd.Parser == nil {
			t.Errorf("Command = %+v, want /opt/codex in /work, stdin /dev/null, its own parser", cmd)
		}
		wantHead := []string{"exec", "--json", "--skip-git-repo-check", "-c", `sandbox_mode="workspace-write"`,
			"-c", `approval_policy="never"`, "-m", "gpt-5.5", "-c", `model_reasoning_effort="high"`,
			"-c", `developer_instructions="be brief"`, "--"}
		if diff := cmp.Diff(wantHead, cmd.Args[:len(cmd.Args)-1]); diff != "" {
			t.Errorf("Args (-want +got):\n%s", diff)
		}
		prompt := cmd.Args[len(cmd.Args)-1]
		if !strings.Contains(prompt, "user: first") || !strings.HasSuffix(prompt, "-second") {
			t.Errorf("prompt = %q, want the transcript then the last message", prompt)
		}
		env := harnesstest.EnvMap(cmd.Env)
		for k, v := range map[string]string{"CODEX_HOME": state, "TANGLE_API_KEY": "rk-secret", "FOO": "bar", "PATH": "/bin"} {
			if env[k] != v {
				t.Errorf("env %s = %q, want %q", k, env[k], v)
			}
		}
		if _, ok := env["OPENAI_API_KEY"]; ok {
			t.Error("env has inherited OPENAI_API_KEY, want it dropped")
		}
		wantConfig := `# Written by the bridge for each turn; changes are overwritten.
model_provider = "router"

[model_providers.router]
name = "router"
base_url = "http://127.0.0.1:9/v1"
env_key = "TANGLE_API_KEY"
wire_api = "responses"
`
		want := []harness.File{{Path: filepath.Join(state, "config.toml"), Data: []byte(wantConfig)}}
		if diff := cmp.Diff(want, cmd.Files); diff != "" {
			t.Errorf("Files (-want +got):\n%s", diff)
		}
		if strings.Contains(wantConfig, "rk-secret") {
			t.Error("the config holds the router key")
		}
	})
	t.Run("CODEX_HOME inside the temporary directory", func(t *testing.T) {
		// Codex makes no helper aliases there, and a system bwrap before 0.9
		// cannot run its sandbox without them: the turn gets a TMPDIR of its
		// own, created before it starts.
		for _, tc := range []struct {
			name string
			turn func(harness.Turn) harness.Turn
		}{
			{"inherited TMPDIR", func(tu harness.Turn) harness.Turn {
				tu.Environ = append(tu.Environ[:len(tu.Environ):len(tu.Environ)], "TMPDIR="+filepath.Dir(state))
				tu.Environ = slices.DeleteFunc(tu.Environ, func(kv string) bool { return kv == "TMPDIR=/var/tmp/elsewhere" })
				return tu
			}},
			{"caller's TMPDIR", func(tu harness.Turn) harness.Turn {
				tu.Env = map[string]string{"TMPDIR": state}
				return tu
			}},
		} {
			cmd, err := Adapter{}.Command(tc.turn(base))
			if err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(state, "tmp")
			if got := harnesstest.EnvMap(cmd.Env)["TMPDIR"]; got != tmp {
				t.Errorf("%s: TMPDIR = %q, want %q", tc.name, got, tmp)
			}
			if len(cmd.Files) == 0 || cmd.Files[0].Path != filepath.Join(tmp, ".keep") {
				t.Errorf("%s: Files = %+v, want %s/.keep first", tc.name, cmd.Files, tmp)
			}
		}
	})
	t.Run("resume", func(t *testing.T) {
		turn := base
		turn.NativeSessionID, turn.Model, turn.Effort = "th-1", "default", ""
		turn.Messages = turn.Messages[1:]
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"exec", "resume", "--json", "--skip-git-repo-check", "-c", `sandbox_mode="workspace-write"`,
			"-c", `approval_policy="never"`, "th-1", "--", "-second"}
		if diff := cmp.Diff(want, cmd.Args); diff != "" {
			t.Errorf("Args (-want +got):\n%s", diff)
		}
	})
	t.Run("large prompt goes on stdin", func(t *testing.T) {
		turn := base
		big := strings.Repeat("x", maxArgPrompt+1)
		b, _ := json.Marshal(big)
		turn.Messages = []wire.Message{{Role: "user", Content: b}}
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Args[len(cmd.Args)-1] != "-" || string(cmd.Stdin) != big {
			t.Errorf("last arg %q, stdin %d bytes; want - and the prompt on stdin", cmd.Args[len(cmd.Args)-1], len(cmd.Stdin))
		}
	})
	t.Run("no router", func(t *testing.T) {
		turn := base
		turn.RouterURL, turn.RouterKey = "", ""
		cmd, err := Adapter{}.Command(turn)
		if err != nil {
			t.Fatal(err)
		}
		if len(cmd.Files) != 0 || harnesstest.EnvMap(cmd.Env)["TANGLE_API_KEY"] == "rk-secret" {
			t.Errorf("Files = %v, want no generated config without a router", cmd.Files)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for name, turn := range map[string]harness.Turn{
			"no user message": {Bin: "codex", StateDir: state, Messages: []wire.Message{{Role: "system", Content: json.RawMessage(`"x"`)}}},
			"no state dir":    {Bin: "codex", Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"x"`)}}},
		} {
			if _, err := (Adapter{}).Command(turn); err == nil {
				t.Errorf("Command(%s) = nil error, want one", name)
			}
		}
	})
	if !slices.Contains(Adapter{}.Models(), "default") {
		t.Error("Models() lacks default")
	}
}
