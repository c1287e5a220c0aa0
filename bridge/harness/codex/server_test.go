package codex

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// The appserver_*.jsonl files are real `codex app-server` sessions of
// codex-cli 0.171.0 against the router stub, driven through this adapter
// (its conversation's handshake, TurnInput and replies, and Answer): "> " lines
// are what the bridge wrote, "< " lines what Codex printed (its rate-limit
// notifications left out). tool: a new thread whose model writes a
// message, asks to run `echo proof-1 > proof.txt` (approved), then
// answers in deltas; tool-resumed: the next turn of that thread in a
// fresh process; decline: the command declined; interrupt: the turn
// interrupted while its approval is pending; failed: a model API that
// answers 400. The stub names served-x as the served model.

// serverTurn is the turn the transcripts were recorded with.
func serverTurn(t *testing.T, run, native string) harness.Turn {
	return harness.Turn{RunID: run, Bin: "/opt/codex", Cwd: "/tmp/cxproj", StateDir: t.TempDir(), NativeSessionID: native,
		Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"Write the proof file."`)}}}
}

// replayServer replays a transcript as the engine runs a turn: each line
// Codex printed goes to the process's conversation, whose reply is
// written; a line of the turn then goes to ParseQuestion, and when it is
// no question to the turn's parser (NewParser's); a question is answered
// by answer (given the conversation). It fails t unless what the adapter
// writes is exactly what the transcript recorded the bridge writing.
func replayServer(t *testing.T, name string, turn harness.Turn, answer func(harness.Question, harness.Conversation) []byte) ([]harness.Event, []harness.Question) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	a := Adapter{}
	cmd, err := a.SessionCommand(turn)
	if err != nil {
		t.Fatal(err)
	}
	conv := a.NewConversation(turn)
	in, err := conv.TurnInput(turn)
	if err != nil {
		t.Fatal(err)
	}
	wrote := append(append(append([]byte(nil), cmd.Stdin...), conv.Open()...), in...)
	p := a.NewParser()
	var recorded []byte
	var evs []harness.Event
	var qs []harness.Question
	for _, l := range bytes.Split(data, []byte("\n")) {
		switch {
		case bytes.HasPrefix(l, []byte("> ")):
			recorded = append(append(recorded, l[2:]...), '\n')
		case bytes.HasPrefix(l, []byte("< ")):
			line := l[2:]
			reply, forTurn := conv.Reply(line)
			wrote = append(wrote, reply...)
			if !forTurn {
				continue
			}
			if q, ok := a.ParseQuestion(line); ok {
				qs = append(qs, q)
				wrote = append(wrote, answer(q, conv)...)
				continue
			}
			evs = append(evs, p.Line(line)...)
		}
	}
	if diff := cmp.Diff(string(recorded), string(wrote)); diff != "" {
		t.Errorf("what the adapter wrote (-recorded +adapter):\n%s", diff)
	}
	if !p.Done() {
		t.Error("Done() = false at the transcript's end")
	}
	return evs, qs
}

// answering answers every question with allow.
func answering(allow bool) func(harness.Question, harness.Conversation) []byte {
	return func(q harness.Question, _ harness.Conversation) []byte {
		b, _ := Adapter{}.Answer(q, allow, "refused")
		return b
	}
}

// approval is the question of the transcripts' command approval.
var approval = harness.Question{NativeID: "0", Kind: "permission", Tool: "exec_command",
	Input: json.RawMessage(`{"command":"/bin/bash -lc 'echo proof-1 \u003e proof.txt'","cwd":"/tmp/cxproj"}`),
	Title: "Allow exec_command to run: /bin/bash -lc 'echo proof-1 > proof.txt'"}

func TestServerParser_Transcripts(t *testing.T) {
	const thread = "01a23416-78e4-7f90-ad65-4c8c6fa78ee8"
	call := &wire.ToolCall{Index: 0, ID: "call_stub00000101", Type: "function",
		Function: wire.ToolCallFunction{Name: "exec_command", Arguments: `{"command":"/bin/bash -lc 'echo proof-1 \u003e proof.txt'"}`}}
	text := func(s string) harness.Event { return harness.Event{Kind: harness.KindText, Text: s} }
	served := harness.Event{Kind: harness.KindProviderModel, ProviderModel: "served-x"}
	tests := []struct {
		name   string
		turn   harness.Turn
		answer func(harness.Question, harness.Conversation) []byte
		want   []harness.Event
		asked  int
	}{
		{"appserver_tool.jsonl", serverTurn(t, "run-1", ""), answering(true), []harness.Event{
			{Kind: harness.KindSession, NativeSessionID: thread}, served, text("Writing."),
			{Kind: harness.KindToolCall, ToolCall: call},
			{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: "call_stub00000101"}},
			text("\n\nDone "), text("after"), text(" the "), text("tool."),
			{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: measured(31138, 19, 0, 0)},
		}, 1},
		// The thread's usage restored on resume is not the turn's.
		{"appserver_tool-resumed.jsonl", serverTurn(t, "run-2", thread), answering(true), []harness.Event{
			{Kind: harness.KindSession, NativeSessionID: thread}, served, text("secon"), text("d tur"), text("n text"),
			{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: measured(46861-31138, 23-19, 0, 0)},
		}, 0},
		{"appserver_decline.jsonl", serverTurn(t, "run-1", ""), answering(false), []harness.Event{
			{Kind: harness.KindSession, NativeSessionID: "01a23416-83ee-7c71-a366-abb391a80bfb"}, served, text("Writing."),
			{Kind: harness.KindToolCall, ToolCall: call},
			{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: "call_stub00000101", IsError: true}},
			text("\n\nDone "), text("after"), text(" the "), text("tool."),
			{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: measured(31131, 19, 0, 0)},
		}, 1},
		{"appserver_failed.jsonl", serverTurn(t, "run-1", ""), answering(true), []harness.Event{
			{Kind: harness.KindSession, NativeSessionID: "01a23416-907b-7261-9575-14d89de46d46"},
			{Kind: harness.KindEnd, Finish: wire.FinishError, Err: &wire.ErrorBody{Type: wire.TypeHarnessError, Code: "turn_failed",
				Message: `{"error":{"message":"the stub refuses this request","type":"invalid_request_error","param":null,"code":null}}` + "\n"}},
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, qs := replayServer(t, tt.name, tt.turn, tt.answer)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if len(qs) != tt.asked {
				t.Fatalf("questions = %+v, want %d", qs, tt.asked)
			}
			if tt.asked > 0 {
				if diff := cmp.Diff(approval, qs[0]); diff != "" {
					t.Errorf("question (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestServerParser_Interrupt checks a turn is interrupted with
// turn/interrupt of its thread and turn once both are known (here while
// its approval is pending), and ends as interrupted, with nothing to
// interrupt after.
func TestServerParser_Interrupt(t *testing.T) {
	turn := serverTurn(t, "run-1", "")
	conv := Adapter{}.NewConversation(turn)
	if b := conv.Interrupt(); b != nil {
		t.Errorf("Interrupt() before the turn started = %s, want nil", b)
	}
	var last harness.Conversation
	evs, qs := replayServer(t, "appserver_interrupt.jsonl", turn, func(_ harness.Question, p harness.Conversation) []byte {
		last = p
		return p.Interrupt()
	})
	if len(qs) != 1 {
		t.Fatalf("questions = %+v, want the approval", qs)
	}
	end := evs[len(evs)-1]
	want := harness.Event{Kind: harness.KindEnd, Finish: wire.FinishError,
		Err: &wire.ErrorBody{Type: wire.TypeHarnessError, Code: "interrupted", Message: "codex interrupted the turn"}}
	if diff := cmp.Diff(want, end); diff != "" {
		t.Errorf("end (-want +got):\n%s", diff)
	}
	if b := last.Interrupt(); b != nil {
		t.Errorf("Interrupt() after the end = %s, want nil", b)
	}
}

func TestAdapter_ParseQuestion(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		want       harness.Question
		ok         bool
	}{
		{"command with a reason", `{"method":"item/commandExecution/requestApproval","id":7,"params":{"kind":"command","threadId":"th","turnId":"tu","itemId":"c1","command":"rm -rf build","cwd":"/w","reason":"It deletes the build."}}`,
			harness.Question{NativeID: "7", Kind: "permission", Tool: "exec_command", Title: "It deletes the build.",
				Input: json.RawMessage(`{"command":"rm -rf build","cwd":"/w","reason":"It deletes the build."}`)}, true},
		{"string id", `{"method":"item/commandExecution/requestApproval","id":"r-1","params":{"command":"ls"}}`,
			harness.Question{NativeID: `"r-1"`, Kind: "permission", Tool: "exec_command", Title: "Allow exec_command to run: ls",
				Input: json.RawMessage(`{"command":"ls"}`)}, true},
		{"file change", `{"method":"item/fileChange/requestApproval","id":3,"params":{"threadId":"th","turnId":"tu","itemId":"p1","grantRoot":"/w"}}`,
			harness.Question{NativeID: "3", Kind: "permission", Tool: "apply_patch", Title: "Allow apply_patch to change files?",
				Input: json.RawMessage(`{"item_id":"p1","grant_root":"/w"}`)}, true},
		{"another approval is no question", `{"method":"item/permissions/requestApproval","id":4,"params":{}}`, harness.Question{}, false},
		{"no id", `{"method":"item/commandExecution/requestApproval","params":{"command":"ls"}}`, harness.Question{}, false},
		{"a notification", `{"method":"serverRequest/resolved","params":{"threadId":"th","requestId":0}}`, harness.Question{}, false},
		{"not JSON", `item/fileChange/requestApproval"`, harness.Question{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Adapter{}.ParseQuestion([]byte(tt.line))
			if ok != tt.ok {
				t.Fatalf("ParseQuestion(%s) ok = %v, want %v", tt.line, ok, tt.ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseQuestion(%s) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

func TestAdapter_Answer(t *testing.T) {
	for _, tt := range []struct {
		id    string
		allow bool
		want  string
	}{
		{"0", true, `{"id":0,"result":{"decision":"accept"}}` + "\n"},
		{`"r-1"`, false, `{"id":"r-1","result":{"decision":"decline"}}` + "\n"},
	} {
		got, err := Adapter{}.Answer(harness.Question{NativeID: tt.id}, tt.allow, "refused")
		if err != nil || string(got) != tt.want {
			t.Errorf("Answer(%s, allow %v) = %s, %v, want %s", tt.id, tt.allow, got, err, tt.want)
		}
	}
	if _, err := (Adapter{}).Answer(harness.Question{NativeID: "not json"}, true, ""); err == nil {
		t.Error("Answer with an id that is no JSON: no error")
	}
}

// TestServerParser_Refuses checks a server request the bridge does not
// serve is answered with an error, and lines of other threads and turns
// are not the turn's.
func TestServerParser_Refuses(t *testing.T) {
	turn := serverTurn(t, "r", "")
	conv, p := Adapter{}.NewConversation(turn), Adapter{}.NewParser()
	if _, err := conv.TurnInput(turn); err != nil {
		t.Fatal(err)
	}
	// line is a line Codex printed, handled as the engine does.
	line := func(l string) (reply []byte, evs []harness.Event) {
		reply, forTurn := conv.Reply([]byte(l))
		if forTurn {
			evs = p.Line([]byte(l))
		}
		return reply, evs
	}
	for _, tt := range []struct{ line, reply string }{
		{`{"method":"item/tool/requestUserInput","id":5,"params":{"threadId":"x"}}`,
			`{"id":5,"error":{"code":-32601,"message":"the bridge does not serve item/tool/requestUserInput"}}` + "\n"},
		{`{"id":"boxctl:r:thread","result":{"thread":{"id":"th"}}}`,
			`{"id":"boxctl:r:turn","method":"turn/start","params":{"threadId":"th","input":[{"type":"text","text":"Write the proof file.","text_elements":[]}]}}` + "\n"},
		{`{"id":"boxctl:other:thread","result":{"thread":{"id":"other"}}}`, ""},
	} {
		if got, _ := line(tt.line); string(got) != tt.reply {
			t.Errorf("Reply after %s = %q, want %q", tt.line, got, tt.reply)
		}
	}
	line(`{"id":"boxctl:r:turn","result":{"turn":{"id":"tu"}}}`)
	for _, l := range []string{
		`{"method":"item/agentMessage/delta","params":{"threadId":"other","turnId":"tu","itemId":"m","delta":"x"}}`,
		`{"method":"item/agentMessage/delta","params":{"threadId":"th","turnId":"old","itemId":"m","delta":"x"}}`,
		`{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"old","status":"completed"}}}`,
	} {
		if _, evs := line(l); evs != nil || p.Done() {
			t.Errorf("Line(%s) = %+v, done %v; want nothing", l, evs, p.Done())
		}
	}
	if _, evs := line(`{"id":"boxctl:r:turn","error":{"code":-32600,"message":"no such thread"}}`); len(evs) != 1 ||
		evs[0].Err == nil || evs[0].Err.Message != "codex refused the turn: no such thread" || !p.Done() {
		t.Errorf("an error reply = %+v, want the turn failed with its message", evs)
	}
}

func TestAdapter_SessionCommand(t *testing.T) {
	turn := serverTurn(t, "run-1", "")
	turn.RouterURL, turn.RouterKey, turn.Model, turn.Effort = "http://127.0.0.1:9", "rk-secret", "gpt-5.5", "high"
	turn.Environ = []string{"PATH=/bin", "OPENAI_API_KEY=leak"}
	cmd, err := Adapter{}.SessionCommand(turn)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != "/opt/codex" || !cmp.Equal(cmd.Args, []string{"app-server"}) || !cmd.HoldStdin || cmd.Dir != "/tmp/cxproj" {
		t.Errorf("SessionCommand = %+v, want `/opt/codex app-server` in the turn's directory, stdin held", cmd)
	}
	if diff := cmp.Diff(Env(turn), cmd.Env); diff != "" {
		t.Errorf("env (-Command's +SessionCommand's):\n%s", diff)
	}
	if diff := cmp.Diff(files(turn), cmd.Files); diff != "" {
		t.Errorf("files (-Command's +SessionCommand's):\n%s", diff)
	}
	conv := Adapter{}.NewConversation(turn)
	if open := conv.Open(); !bytes.HasSuffix(open, []byte(`{"method":"initialized"}`+"\n")) {
		t.Errorf("the conversation opens with %s, want the handshake", open)
	}
	for _, tt := range []struct{ native, want string }{
		{"", `{"id":"boxctl:run-1:thread","method":"thread/start","params":{"model":"gpt-5.5","cwd":"/tmp/cxproj","approvalPolicy":"untrusted","sandbox":"workspace-write"}}` + "\n"},
		{"th-1", `{"id":"boxctl:run-1:thread","method":"thread/resume","params":{"threadId":"th-1","model":"gpt-5.5","cwd":"/tmp/cxproj","approvalPolicy":"untrusted","sandbox":"workspace-write","excludeTurns":true}}` + "\n"},
	} {
		turn.NativeSessionID = tt.native
		got, err := Adapter{}.TurnInput(turn)
		if err != nil || string(got) != tt.want {
			t.Errorf("TurnInput(native %q) = %s, %v\nwant %s", tt.native, got, err, tt.want)
		}
	}
	if _, err := conv.TurnInput(turn); err != nil {
		t.Fatal(err)
	}
	if got, _ := conv.Reply([]byte(`{"id":"boxctl:run-1:thread","result":{"thread":{"id":"th-1"}}}`)); !strings.Contains(string(got), `"effort":"high"`) {
		t.Errorf("turn/start = %s, want the turn's effort", got)
	}
	rc, err := Adapter{}.RetainedCommand(turn)
	if err != nil || !cmp.Equal(rc, cmd, cmpopts.IgnoreFields(harness.Command{}, "Files")) {
		t.Errorf("RetainedCommand = %+v, %v; want the session's process", rc, err)
	}
	if _, err := (Adapter{}).TurnInput(harness.Turn{}); err == nil {
		t.Error("TurnInput without a message: no error")
	}
}
