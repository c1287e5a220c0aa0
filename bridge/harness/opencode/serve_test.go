package opencode

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestConversation(t *testing.T) {
	turn := harness.Turn{Model: "anthropic/claude-sonnet-4-5", Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"hi"`)}}}
	c := Adapter{}.NewConversation(turn)
	if got := string(c.Open()); !strings.Contains(got, `"path":"/session"`) || !strings.Contains(got, `"id":"`+idSession+`"`) {
		t.Fatalf("Open = %s, want POST /session", got)
	}
	if in, err := c.TurnInput(turn); err != nil || in != nil {
		t.Fatalf("TurnInput before the session = %s, %v; want nil until it exists", in, err)
	}
	if c.Interrupt() != nil {
		t.Error("Interrupt before the prompt is not nil")
	}
	steps := []struct {
		line        string
		reply       string
		forTurn     bool
		description string
	}{
		{`{"type":"` + ReadyType + `"}`, "", false, "relay ready"},
		{`{"type":"` + ResponseType + `","id":"` + idSession + `","status":200,"body":{"id":"ses_1"}}`,
			`"path":"/session/ses_1/prompt_async"`, true, "session created: the held prompt"},
		{`{"type":"session.idle","properties":{"sessionID":"ses_1"}}`, "", false, "an earlier turn's idle"},
		{`{"type":"session.status","properties":{"sessionID":"ses_1","status":{"type":"busy"}}}`, "", true, "busy"},
		{`{"type":"session.idle","properties":{"sessionID":"ses_1"}}`, "", true, "the turn's idle"},
		{`{"type":"` + ServedModelType + `","model":"m"}`, "", true, "served model"},
	}
	for _, s := range steps {
		reply, forTurn := c.Reply([]byte(s.line))
		if forTurn != s.forTurn || (s.reply == "") != (reply == nil) || !strings.Contains(string(reply), s.reply) {
			t.Errorf("%s: Reply = %s, %v; want %q, %v", s.description, reply, forTurn, s.reply, s.forTurn)
		}
	}
	if got := string(c.Interrupt()); !strings.Contains(got, `"path":"/session/ses_1/abort"`) {
		t.Errorf("Interrupt = %s, want the session's abort", got)
	}
}

func TestAdapter_Permission(t *testing.T) {
	line := `{"id":"evt_1","type":"permission.asked","properties":{"id":"per_1","sessionID":"ses_1","permission":"bash",` +
		`"patterns":["echo ran > m"],"metadata":{"command":"echo ran > m"},"always":["echo *"],"tool":{"messageID":"msg_1","callID":"call_1"}}}`
	q, ok := Adapter{}.ParseQuestion([]byte(line))
	want := harness.Question{NativeID: "per_1", Kind: "permission", Tool: "bash", Input: json.RawMessage(`{"command":"echo ran > m"}`),
		Title: "Allow bash: echo ran > m"}
	if diff := cmp.Diff(want, q); !ok || diff != "" {
		t.Fatalf("ParseQuestion = %v (-want +got):\n%s", ok, diff)
	}
	if _, ok := (Adapter{}).ParseQuestion([]byte(`{"type":"permission.replied","properties":{"requestID":"per_1"}}`)); ok {
		t.Error("permission.replied parsed as a question")
	}
	tests := []struct {
		allow   bool
		message string
		want    string
	}{
		{true, "ignored", `{"id":"boxctl-reply-per_1","method":"POST","path":"/permission/per_1/reply","body":{"reply":"once"}}`},
		{false, "no", `{"id":"boxctl-reply-per_1","method":"POST","path":"/permission/per_1/reply","body":{"message":"no","reply":"reject"}}`},
	}
	for _, tt := range tests {
		got, err := Adapter{}.Answer(q, tt.allow, tt.message)
		if err != nil || string(got) != tt.want+"\n" {
			t.Errorf("Answer(%v) = %s, %v; want %s", tt.allow, got, err, tt.want)
		}
	}
}

func TestParser_Served(t *testing.T) {
	lines := []string{
		`{"type":"server.connected","properties":{}}`,
		`{"type":"message.part.updated","properties":{"part":{"id":"p1","sessionID":"ses_1","type":"text","text":"hi"}}}`,
		`{"type":"message.part.updated","properties":{"part":{"id":"p1","sessionID":"ses_1","type":"text","text":"hello","time":{"start":1,"end":2}}}}`,
		`{"type":"message.part.updated","properties":{"part":{"id":"p1","sessionID":"ses_1","type":"text","text":"hello","time":{"start":1,"end":2}}}}`,
		`{"type":"message.part.updated","properties":{"part":{"id":"p2","sessionID":"ses_1","type":"tool","tool":"bash","callID":"c1","state":{"status":"running"}}}}`,
		`{"type":"message.part.updated","properties":{"part":{"id":"p2","sessionID":"ses_1","type":"tool","tool":"bash","callID":"c1","state":{"status":"completed","input":{"command":"ls"},"output":"x"}}}}`,
		`{"type":"message.part.updated","properties":{"part":{"id":"p3","sessionID":"ses_1","type":"step-finish","reason":"tool-calls","tokens":{"input":3,"output":1,"reasoning":0,"cache":{"read":0,"write":0}}}}}`,
		`{"type":"session.idle","properties":{"sessionID":"ses_1"}}`,
	}
	p := newParser()
	var got []harness.Event
	for _, l := range lines {
		got = append(got, p.Line([]byte(l))...)
	}
	f := false
	want := []harness.Event{
		{Kind: harness.KindSession, NativeSessionID: "ses_1"},
		{Kind: harness.KindText, Text: "hello"},
		{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{ID: "c1", Type: "function", Function: wire.ToolCallFunction{Name: "bash", Arguments: `{"command":"ls"}`}}},
		{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: "c1", Content: "x"}},
		{Kind: harness.KindEnd, Finish: wire.FinishStop, Usage: &wire.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4,
			CacheReadInputTokens: ptr(int64(0)), CacheWriteInputTokens: ptr(int64(0)), Estimated: &f}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	t.Run("errors", func(t *testing.T) {
		for _, l := range []string{
			`{"type":"session.error","properties":{"sessionID":"ses_1","error":{"name":"APIError","data":{"message":"boom"}}}}`,
			`{"type":"` + ResponseType + `","id":"boxctl-prompt-1","status":400,"body":{"_tag":"BadRequest"}}`,
		} {
			evs := newParser().Line([]byte(l))
			if n := len(evs); n == 0 || evs[n-1].Kind != harness.KindEnd || evs[n-1].Err == nil {
				t.Errorf("Line(%s) = %+v, want an error end", l, evs)
			}
		}
		if evs := newParser().Line([]byte(`{"type":"` + ResponseType + `","id":"boxctl-reply-per_1","status":404}`)); len(evs) != 0 {
			t.Errorf("a failed reply ended the turn: %+v", evs)
		}
	})
}

func ptr[T any](v T) *T { return &v }
