package engine

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// TestCanonical_shape pins the events of a retained run to the agent
// interface's shapes: parts name their session and message, text parts
// carry their whole text and the delta, a tool part goes from running with
// its input to completed or error in place, and usage is a raw event
// naming its backend.
func TestCanonical_shape(t *testing.T) {
	c := newCanonical("r1", "s1", "pi", 0)
	cached := int64(2)
	var frames [][]byte
	for _, ev := range []harness.Event{
		{Kind: harness.KindReasoning, Text: "think"},
		{Kind: harness.KindText, Text: "Hel"},
		{Kind: harness.KindText, Text: "lo"},
		{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: 0, ID: "call-1", Type: "function",
			Function: wire.ToolCallFunction{Name: "bash", Arguments: `{"command":"ls"}`}}},
		{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: "call-1", Content: "a.txt"}},
		{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: 1, ID: "call-2", Type: "function",
			Function: wire.ToolCallFunction{Name: "read", Arguments: `not json`}}},
		{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: "call-2", Content: "no such file", IsError: true}},
		{Kind: harness.KindText, Text: "Done"},
		{Kind: harness.KindProviderModel, ProviderModel: "served-1"},
	} {
		frames = append(frames, c.events(ev)...)
	}
	frames = append(frames, c.end(harness.Event{Kind: harness.KindEnd, Usage: &wire.Usage{PromptTokens: 10,
		CompletionTokens: 3, TotalTokens: 13, CacheReadInputTokens: &cached}})...)

	var got []any
	for i, f := range frames {
		var env wire.Envelope
		if err := json.Unmarshal(f, &env); err != nil {
			t.Fatal(err)
		}
		if env.RunID != "r1" || env.Sequence != int64(i+1) {
			t.Fatalf("frame %d: run %q sequence %d", i+1, env.RunID, env.Sequence)
		}
		var ev any
		if err := json.Unmarshal(env.Event, &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	const want = `[
 {"type":"message.part.updated","delta":"think","part":{"id":"r1:reasoning:1","sessionID":"s1","messageID":"r1:message","type":"reasoning","text":"think"}},
 {"type":"message.part.updated","delta":"Hel","part":{"id":"r1:text:2","sessionID":"s1","messageID":"r1:message","type":"text","text":"Hel"}},
 {"type":"message.part.updated","delta":"lo","part":{"id":"r1:text:2","sessionID":"s1","messageID":"r1:message","type":"text","text":"Hello"}},
 {"type":"message.part.updated","part":{"id":"r1:tool:3","sessionID":"s1","messageID":"r1:message","type":"tool","tool":"bash","callID":"call-1",
   "state":{"status":"running","input":{"command":"ls"}}}},
 {"type":"message.part.updated","part":{"id":"r1:tool:3","sessionID":"s1","messageID":"r1:message","type":"tool","tool":"bash","callID":"call-1",
   "state":{"status":"completed","input":{"command":"ls"},"output":"a.txt"}}},
 {"type":"message.part.updated","part":{"id":"r1:tool:4","sessionID":"s1","messageID":"r1:message","type":"tool","tool":"read","callID":"call-2",
   "state":{"status":"running","input":{"arguments":"not json"}}}},
 {"type":"message.part.updated","part":{"id":"r1:tool:4","sessionID":"s1","messageID":"r1:message","type":"tool","tool":"read","callID":"call-2",
   "state":{"status":"error","input":{"arguments":"not json"},"error":"no such file"}}},
 {"type":"message.part.updated","delta":"Done","part":{"id":"r1:text:5","sessionID":"s1","messageID":"r1:message","type":"text","text":"Done"}},
 {"type":"raw","backend":"pi","event":{"type":"usage","providerModels":["served-1"],"finishReason":"stop",
   "usage":{"inputTokens":10,"outputTokens":3,"totalTokens":13,"cacheReadInputTokens":2}}},
 {"type":"status","status":"completed"}
]`
	var wantEvents []any
	if err := json.Unmarshal([]byte(want), &wantEvents); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantEvents, got); diff != "" {
		t.Errorf("canonical events (-want +got):\n%s", diff)
	}
}

// TestCanonical_toolStates follows one tool part through the calls and
// results harnesses send: streamed arguments make one pending frame, then
// one running frame once they form a JSON object.
func TestCanonical_toolStates(t *testing.T) {
	tests := []struct {
		name  string
		steps []canonicalStep
		want  []string // status and input of each frame's tool state
	}{
		{"streamed arguments", []canonicalStep{call(0, "c1", "Bash", ""), fragment(0, `{"command"`), fragment(0, `:"ls"}`),
			result("c1", "a", false)},
			[]string{`pending {}`, `running {"command":"ls"}`, `completed {"command":"ls"}`}},
		{"announced whole", []canonicalStep{call(0, "c1", "Read", `{"path":"/x"}`), result("c1", "no", true)},
			[]string{`running {"path":"/x"}`, `error {"path":"/x"}`}},
		{"result before the arguments completed", []canonicalStep{call(0, "c1", "Bash", ""), fragment(0, `{"comm`),
			result("c1", "", true)},
			[]string{`pending {}`, `error {"arguments":"{\"comm"}`}},
		{"arguments not an object", []canonicalStep{call(0, "c1", "Edit", `"text"`)},
			[]string{`running {"arguments":"\"text\""}`}},
		{"fragment after the arguments completed", []canonicalStep{call(0, "c1", "Bash", ""), fragment(0, `{}`), fragment(0, ` `)},
			[]string{`pending {}`, `running {}`, `running {}`}},
		{"result without its call", []canonicalStep{result("cmd-1", "ok", false)},
			[]string{`completed {}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames := play(t, canonicalScenario{run: testRun("r1"), backend: "claude", steps: tt.steps})
			var got []string
			for _, ev := range decodeAll(t, frames) {
				in, err := json.Marshal(ev.Part.State.Input)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.Part.State.Status+" "+string(in))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tool states (-want +got):\n%s", diff)
			}
		})
	}
}
