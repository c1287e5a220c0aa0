package claude

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// checkEvents fails unless evs, the events of one turn, are well formed:
// each kind carries its payload, at most one End comes and it comes last,
// an error End has a type and a message, and measured usage adds up.
func checkEvents(t *testing.T, evs []harness.Event, done bool) {
	t.Helper()
	ends := 0
	for i, ev := range evs {
		switch ev.Kind {
		case harness.KindText, harness.KindReasoning:
			if ev.Text == "" {
				t.Fatalf("event %d: empty text", i)
			}
		case harness.KindToolCall:
			if ev.ToolCall == nil {
				t.Fatalf("event %d: tool call without a call", i)
			}
		case harness.KindToolResult:
			if ev.ToolResult == nil {
				t.Fatalf("event %d: tool result without a result", i)
			}
		case harness.KindSession:
			if ev.NativeSessionID == "" {
				t.Fatalf("event %d: session without an id", i)
			}
		case harness.KindProviderModel:
			if ev.ProviderModel == "" {
				t.Fatalf("event %d: provider model without a model", i)
			}
		case harness.KindEnd:
			ends++
			if i != len(evs)-1 {
				t.Fatalf("event %d: End is followed by %d events", i, len(evs)-1-i)
			}
			if ev.Finish == "" {
				t.Fatalf("event %d: End without a finish reason", i)
			}
			if ev.Err != nil && (ev.Err.Type == "" || ev.Err.Message == "") {
				t.Fatalf("event %d: error End %+v without a type or message", i, ev.Err)
			}
			if u := ev.Usage; u != nil && (u.Estimated == nil || *u.Estimated || u.TotalTokens != u.PromptTokens+u.CompletionTokens) {
				t.Fatalf("event %d: usage %+v is not measured or does not add up", i, u)
			}
		default:
			t.Fatalf("event %d: unknown kind %d", i, ev.Kind)
		}
	}
	if ends > 1 || (ends == 1) != done {
		t.Fatalf("%d End events, parser done %v", ends, done)
	}
}

// FuzzParser feeds arbitrary output, line by line, to a turn's parser: no
// input may panic, and the events must be well formed (checkEvents).
func FuzzParser(f *testing.F) {
	turn, err := os.ReadFile("testdata/tool_turn.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(turn)
	for _, line := range bytes.Split(turn, []byte("\n")) {
		f.Add(line)
	}
	for _, s := range []string{
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\u00e9\ud83d\ude00"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ud800"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":7}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hm"}}} trailing`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}}`,
		`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["boom"],"usage":{"input_tokens":1}}`,
		`{"type":"result","subtype":"success","is_error":false,"stop_reason":"max_tokens","usage":{"input_tokens":0,"output_tokens":0}}`,
		`{"type":"assistant","message":"not an object"}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"out"}],"is_error":true}]}}`,
		"not json\n{\n\x00\xff", `{"type":"result"}{"type":"result"}`, `[]`, `null`, `""`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := Adapter{}.NewParser()
		var evs []harness.Event
		for _, line := range bytes.Split(data, []byte("\n")) {
			// The one-pass scan takes a line only as the checked path
			// reads it.
			if kind, text, ok := scanDelta(line); ok {
				checked, cok := checkedDelta(nil, line)
				var want []harness.Event
				if text != "" {
					k := harness.KindText
					if kind == "thinking_delta" {
						k = harness.KindReasoning
					}
					want = []harness.Event{{Kind: k, Text: text}}
				}
				if !cok || !cmp.Equal(checked, want) {
					t.Fatalf("scanDelta(%q) = %q %q; the checked path says %v %v", line, kind, text, checked, cok)
				}
			}
			if json.Valid(line) != validScan(line) {
				t.Fatalf("the scan of %q says valid %v, json.Valid %v", line, validScan(line), json.Valid(line))
			}
			evs = append(evs, p.Line(line)...)
		}
		checkEvents(t, evs, p.Done())
	})
}

// TestFastDelta_MatchesGeneralPath holds the reflection-free delta path to
// the general decoder for the lines it takes.
func TestFastDelta_MatchesGeneralPath(t *testing.T) {
	lines := []string{
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}},"session_id":"s","parent_tool_use_id":null,"uuid":"u"}`,
		`{"event":{"delta":{"text":"d0 ","type":"text_delta"},"index":0,"type":"content_block_delta"},"type":"stream_event"}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"let me see"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"esc \" \\ \n \t \u00e9 \ud83d\ude00 <&>"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}}`,
		` { "type" : "stream_event" , "event" : { "type" : "content_block_delta" , "delta" : { "type" : "text_delta" , "text" : "spaced" } } } `,
	}
	for _, line := range lines {
		fast, ok := fastDelta(nil, []byte(line))
		if !ok {
			t.Errorf("fastDelta(%s) declined a delta line", line)
			continue
		}
		if diff := cmp.Diff(newParser().line([]byte(line)), fast); diff != "" {
			t.Errorf("fastDelta(%s) (-general +fast):\n%s", line, diff)
		}
	}
	for _, line := range []string{
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":7}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}} trailing`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{}"}}}`,
		`{"type":"result","subtype":"success"}`,
	} {
		if evs, ok := fastDelta(nil, []byte(line)); ok {
			t.Errorf("fastDelta(%s) = %v, want it to leave the line to the general path", line, evs)
		}
	}
}

// validScan reports whether deltaScan reads line as valid JSON.
func validScan(line []byte) bool {
	s := deltaScan{raw: line}
	s.ws()
	if !s.value(0, 0) {
		return false
	}
	s.ws()
	return s.i == len(line)
}
