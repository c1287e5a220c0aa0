package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// The acp_* testdata files are the stdout of real `gemini --acp`
// processes of Gemini CLI 0.61.0 (with the served-model module loaded)
// against the router stub, whose answers name the served model
// "served-model-x", driven by this package's conversation. One process
// ran acp_new_tool_allowed (a new session; a run_shell_command call asks
// and is allowed), acp_second_turn (thinking, then text in three deltas)
// and acp_tool_denied (the call asks again and is refused); a fresh
// process resuming the session ran acp_loaded_turn (session/load in the
// minute the session was created, its history replayed), and another
// acp_loaded_again.

const acpSession = "a5d0a4c3-345c-467e-a594-5df13735644a"

// drive feeds a recorded file to conv and a fresh parser as the engine
// does, answering questions with allow, and returns what the client
// wrote (each line's method or, for an answer, its id and outcome), the
// questions and the events.
func drive(t *testing.T, conv harness.Conversation, t1 harness.Turn, file string, allow bool) ([]string, []harness.Question, []harness.Event) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var writes []string
	wrote := func(b []byte) {
		for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			var m struct {
				ID     json.RawMessage
				Method string
				Params struct{ SessionID string }
				Result struct {
					Outcome struct{ Outcome, OptionID string }
				}
			}
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("wrote %q: %v", l, err)
			}
			switch {
			case m.Method != "" && m.Params.SessionID != "":
				writes = append(writes, m.Method+" "+unquote(m.ID)+" "+m.Params.SessionID)
			case m.Method != "":
				writes = append(writes, m.Method+" "+unquote(m.ID))
			default:
				writes = append(writes, "answer "+unquote(m.ID)+" "+m.Result.Outcome.Outcome+" "+m.Result.Outcome.OptionID)
			}
		}
	}
	in, err := conv.TurnInput(t1)
	if err != nil {
		t.Fatal(err)
	}
	wrote(in)
	p := Adapter{}.NewParser()
	var qs []harness.Question
	var evs []harness.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		reply, forTurn := conv.Reply(sc.Bytes())
		wrote(reply)
		if !forTurn {
			continue
		}
		if q, ok := (Adapter{}).ParseQuestion(sc.Bytes()); ok {
			qs = append(qs, q)
			ans, err := Adapter{}.Answer(q, allow, "no")
			if err != nil {
				t.Fatal(err)
			}
			wrote(ans)
			continue
		}
		evs = append(evs, p.Line(sc.Bytes())...)
	}
	if !p.Done() {
		t.Errorf("%s: Done() = false after the file", file)
	}
	return writes, qs, evs
}

// acpEnd is the end of a completed turn with the usage of its prompt's
// answer (which counts no cached tokens).
func acpEnd(in, out int64) []harness.Event {
	return []harness.Event{{Kind: harness.KindEnd, Finish: wire.FinishStop,
		Usage: &wire.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out, Estimated: bptr(false)}}}
}

func TestConversation_Transcripts(t *testing.T) {
	turn := func(prompt, native string) harness.Turn {
		return harness.Turn{Cwd: "/work", NativeSessionID: native, Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"` + prompt + `"`)}}}
	}
	const call = "run_shell_command__call_stub00000101"
	// Each model answer names its served model; a turn reports each
	// model once (the first turn's two answers name the same one).
	served := []string{"served-model-x"}
	type step struct {
		file   string
		allow  bool
		writes []string
		want   harnesstest.Summary
	}
	procs := []struct {
		name   string
		native string
		steps  []step
	}{
		{"new session", "", []step{
			{"acp_new_tool_allowed.jsonl", true,
				[]string{"session/new boxctl-session", "session/prompt boxctl-prompt-1 " + acpSession, "answer 0 selected proceed_once"},
				harnesstest.Summary{Session: acpSession, Text: "Writing the proof.\n\ndone after the tool", TextDeltas: 5,
					ToolCalls:   []wire.ToolCall{{ID: call, Type: "function", Function: wire.ToolCallFunction{Name: "run_shell_command", Arguments: "{}"}}},
					ToolResults: []wire.ToolResult{{ToolCallID: call}}, ProviderModels: served, Ends: acpEnd(23924, 33)}},
			{"acp_second_turn.jsonl", true, []string{"session/prompt boxctl-prompt-2 " + acpSession},
				harnesstest.Summary{Text: "Second turn in three deltas.", TextDeltas: 3, Reasoning: "****\nConsidering.",
					ProviderModels: served, Ends: acpEnd(12034, 10)}},
			{"acp_tool_denied.jsonl", false, []string{"session/prompt boxctl-prompt-3 " + acpSession, "answer 1 selected cancel"},
				harnesstest.Summary{Text: "done after the tool", TextDeltas: 4, ProviderModels: served, Ends: acpEnd(24227, 27)}},
		}},
		// The history the CLI replays after session/load is not the turn's:
		// the prompt waits for the commands announced after it.
		{"loaded session", acpSession, []step{
			{"acp_loaded_turn.jsonl", true, []string{"session/load boxctl-session " + acpSession, "session/prompt boxctl-prompt-1 " + acpSession},
				harnesstest.Summary{Text: "After the refusal.", TextDeltas: 2, ProviderModels: served, Ends: acpEnd(12178, 5)}},
		}},
		{"loaded again", acpSession, []step{
			{"acp_loaded_again.jsonl", true, []string{"session/load boxctl-session " + acpSession, "session/prompt boxctl-prompt-1 " + acpSession},
				harnesstest.Summary{Text: "Resumed in a new process.", TextDeltas: 2, ProviderModels: served, Ends: acpEnd(12250, 7)}},
		}},
	}
	for _, proc := range procs {
		t.Run(proc.name, func(t *testing.T) {
			conv := Adapter{}.NewConversation(harness.Turn{Cwd: "/work", NativeSessionID: proc.native})
			var open struct{ ID, Method string }
			if err := json.Unmarshal(conv.Open(), &open); err != nil || open.Method != "initialize" || open.ID != idInitialize {
				t.Fatalf("Open() = %q, want the initialize request", conv.Open())
			}
			for i, s := range proc.steps {
				writes, _, evs := drive(t, conv, turn("p", proc.native), s.file, s.allow)
				if diff := cmp.Diff(s.writes, writes); diff != "" {
					t.Errorf("turn %d writes (-want +got):\n%s", i+1, diff)
				}
				if diff := cmp.Diff(s.want, harnesstest.Summarize(evs)); diff != "" {
					t.Errorf("turn %d events (-want +got):\n%s", i+1, diff)
				}
			}
		})
	}
}

func TestConversation_Errors(t *testing.T) {
	conv := Adapter{}.NewConversation(harness.Turn{Cwd: "/work", NativeSessionID: "gone"})
	p := Adapter{}.NewParser()
	if in, err := conv.TurnInput(harness.Turn{Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"hi"`)}}}); err != nil || in != nil {
		t.Fatalf("TurnInput before the session = %q, %v; want it held", in, err)
	}
	if conv.Interrupt() != nil {
		t.Error("Interrupt() before the prompt is not nil")
	}
	// The load refused: the answer is the turn's, and ends it.
	line := []byte(`{"jsonrpc":"2.0","id":"boxctl-session","error":{"code":-32603,"message":"Internal error","data":{"details":"No previous sessions found for this project."}}}`)
	reply, forTurn := conv.Reply(line)
	evs := p.Line(line)
	if reply != nil || !forTurn || len(evs) != 1 || evs[0].Err == nil || !strings.Contains(evs[0].Err.Message, "No previous sessions") || !p.Done() {
		t.Errorf("refused load: reply %q, forTurn %v, events %+v; want the turn ended with the error", reply, forTurn, evs)
	}
	if _, err := conv.TurnInput(harness.Turn{}); err == nil {
		t.Error("TurnInput without a user message: no error")
	}
}

func TestConversation_Interrupt(t *testing.T) {
	conv := Adapter{}.NewConversation(harness.Turn{Cwd: "/work"})
	conv.Reply([]byte(`{"jsonrpc":"2.0","id":"boxctl-initialize","result":{}}`))
	conv.Reply([]byte(`{"jsonrpc":"2.0","id":"boxctl-session","result":{"sessionId":"s1"}}`))
	in, err := conv.TurnInput(harness.Turn{Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"hi"`)}}})
	if err != nil || !bytes.Contains(in, []byte(`"session/prompt"`)) {
		t.Fatalf("TurnInput = %q, %v; want the prompt at once", in, err)
	}
	if _, forTurn := conv.Reply([]byte(`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s1"}}`)); !forTurn {
		t.Error("a permission request is not the turn's")
	}
	got := strings.Split(strings.TrimSpace(string(conv.Interrupt())), "\n")
	want := []string{`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`,
		`{"id":7,"jsonrpc":"2.0","result":{"outcome":{"outcome":"cancelled"}}}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Interrupt() (-want +got):\n%s", diff)
	}
	end := newParser().Line([]byte(`{"jsonrpc":"2.0","id":"boxctl-prompt-1","result":{"stopReason":"cancelled"}}`))
	if len(end) != 1 || end[0].Err == nil || end[0].Err.Type != wire.TypeRunCancelled {
		t.Errorf("cancelled prompt = %+v, want an end with run_cancelled", end)
	}
}

func TestAdapter_PermissionQuestion(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s","options":[` +
		`{"optionId":"proceed_always","kind":"allow_always"},{"optionId":"proceed_once","kind":"allow_once"},{"optionId":"cancel","kind":"reject_once"}],` +
		`"toolCall":{"toolCallId":"run_shell_command__call_1","status":"pending","title":"echo hi > a.txt","kind":"execute"}}}`)
	q, ok := Adapter{}.ParseQuestion(line)
	if !ok || q.Tool != "run_shell_command" || q.Kind != "permission" || q.Title != "Allow run_shell_command: echo hi > a.txt" || string(q.Input) != "{}" {
		t.Fatalf("ParseQuestion = %+v, %v", q, ok)
	}
	for _, tt := range []struct {
		allow bool
		want  string
	}{
		{true, `{"id":3,"jsonrpc":"2.0","result":{"outcome":{"optionId":"proceed_once","outcome":"selected"}}}`},
		{false, `{"id":3,"jsonrpc":"2.0","result":{"outcome":{"optionId":"cancel","outcome":"selected"}}}`},
	} {
		b, err := Adapter{}.Answer(q, tt.allow, "because")
		if err != nil || strings.TrimSpace(string(b)) != tt.want {
			t.Errorf("Answer(allow=%v) = %s, %v; want %s", tt.allow, b, err, tt.want)
		}
	}
	for _, notQ := range []string{`{"jsonrpc":"2.0","method":"session/update","params":{}}`, `{"type":"boxctl_served_model","model":"m"}`} {
		if _, ok := (Adapter{}).ParseQuestion([]byte(notQ)); ok {
			t.Errorf("ParseQuestion(%s) = true", notQ)
		}
	}
	for id, want := range map[string]string{"run_shell_command__x": "run_shell_command", "write_file-1733-2": "write_file", "odd": "odd"} {
		if got := toolName(id); got != want {
			t.Errorf("toolName(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestAdapter_SessionCommand(t *testing.T) {
	state := t.TempDir()
	cmd, err := Adapter{}.SessionCommand(harness.Turn{Bin: "/opt/gemini", Model: "gemini-2.5-pro", StateDir: state, Cwd: "/work",
		RouterURL: "http://127.0.0.1:9", RouterKey: "rk", Environ: []string{"PATH=/bin", "NODE_OPTIONS=--max-old-space-size=4096"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"--acp", "-m", "gemini-2.5-pro"}, cmd.Args); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
	script := filepath.Join(state, "boxctl", "served-model.mjs")
	env := map[string]string{}
	for _, kv := range cmd.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if got, want := env["NODE_OPTIONS"], `--max-old-space-size=4096 --import="`+script+`"`; got != want {
		t.Errorf("NODE_OPTIONS = %q, want %q", got, want)
	}
	if !cmd.HoldStdin || len(cmd.Files) != 2 || cmd.Files[0].Path != script || !bytes.Contains(cmd.Files[0].Data, []byte(servedModelType)) {
		t.Errorf("command = %+v, want held stdin, the served-model module and settings", cmd)
	}
	if slices.ContainsFunc(cmd.Args, func(a string) bool { return strings.Contains(a, "rk") }) {
		t.Error("the router key is in the arguments")
	}
}

func TestKeepHistory(t *testing.T) {
	state := t.TempDir()
	chats := filepath.Join(state, ".gemini", "tmp", "work", "chats")
	if err := os.MkdirAll(chats, 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 0, 7, 30, 0, time.UTC)
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(chats, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("session-2026-12-02T00-07-4c7dff0f.jsonl") // the history, this minute
	write("session-2026-12-02T00-06-4c7dff0f.jsonl") // an earlier file of it
	write("session-2026-12-02T00-07-aaaaaaaa.jsonl") // another session
	keepHistory(state, "4c7dff0f-63fd-4c06-86bb-fcc1276d1ecd", now)
	var got []string
	entries, _ := os.ReadDir(chats)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(chats, e.Name()))
		got = append(got, e.Name()+" <- "+string(b))
	}
	want := []string{
		"session-2026-12-02T00-05-4c7dff0f.jsonl <- session-2026-12-02T00-07-4c7dff0f.jsonl",
		"session-2026-12-02T00-06-4c7dff0f.jsonl <- session-2026-12-02T00-06-4c7dff0f.jsonl",
		"session-2026-12-02T00-07-aaaaaaaa.jsonl <- session-2026-12-02T00-07-aaaaaaaa.jsonl",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chats (-want +got):\n%s", diff)
	}
}
