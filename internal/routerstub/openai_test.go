package routerstub_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/internal/routerstub"
)

func TestResponses_NonStreaming(t *testing.T) {
	for _, path := range []string{"/v1/responses", "/responses"} {
		t.Run(path, func(t *testing.T) {
			srv, hs := newStub(t, routerstub.NewQueue(routerstub.Join(
				routerstub.Text("Running."),
				routerstub.ToolCall("exec_command", `{"cmd":"ls"}`),
			)))
			body := `{"model":"gpt-x","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}]}`
			resp := post(t, hs, path, body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d", resp.StatusCode)
			}
			if h := resp.Header.Get(routerstub.OpenAIModelHeader); h != "gpt-x" {
				t.Errorf("%s header = %q, want the served model", routerstub.OpenAIModelHeader, h)
			}
			got := decode(t, resp)
			if got["object"] != "response" || got["status"] != "completed" || got["model"] != "gpt-x" {
				t.Errorf("response = %v", got)
			}
			wantOutput := []any{
				map[string]any{"id": "msg_stub00000100", "type": "message", "status": "completed", "role": "assistant",
					"content": []any{map[string]any{"type": "output_text", "text": "Running.", "annotations": []any{}, "logprobs": []any{}}}},
				map[string]any{"id": "fc_stub00000101", "type": "function_call", "status": "completed",
					"arguments": `{"cmd":"ls"}`, "call_id": "call_stub00000101", "name": "exec_command"},
			}
			if diff := cmp.Diff(wantOutput, got["output"]); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			in := float64((len(body) + 3) / 4)
			wantUsage := map[string]any{"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0.0},
				"output_tokens": 8.0, "output_tokens_details": map[string]any{"reasoning_tokens": 0.0}, "total_tokens": in + 8}
			if diff := cmp.Diff(wantUsage, got["usage"]); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if r := srv.Requests()[0]; r.Prompt != "go" || r.Family != routerstub.FamilyResponses || r.AuthKind != routerstub.AuthBearer {
				t.Errorf("recorded %+v", r)
			}
		})
	}
}

func TestResponses_Streaming(t *testing.T) {
	_, hs := newStub(t, routerstub.NewQueue(routerstub.Join(
		routerstub.Thinking("think"),
		routerstub.Deltas("abcdef", 3),
		routerstub.ToolCall("exec_command", `{"cmd":"pwd"}`),
	)))
	resp := post(t, hs, "/v1/responses", `{"model":"gpt-x","stream":true,"input":"hi"}`)
	events := readSSE(t, resp.Body)
	wantNames := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	if diff := cmp.Diff(wantNames, names(events)); diff != "" {
		t.Fatalf("event names (-want +got):\n%s", diff)
	}
	var text, args string
	for i, e := range events {
		if e.Data["type"] != e.Name || e.Data["sequence_number"] != float64(i) {
			t.Errorf("event %d %s: type %v sequence_number %v", i, e.Name, e.Data["type"], e.Data["sequence_number"])
		}
		switch e.Name {
		case "response.output_text.delta":
			text += e.Data["delta"].(string)
			if e.Data["item_id"] != "msg_stub00000101" || e.Data["output_index"] != 1.0 {
				t.Errorf("text delta at %v/%v", e.Data["item_id"], e.Data["output_index"])
			}
		case "response.function_call_arguments.delta":
			args += e.Data["delta"].(string)
		}
	}
	if text != "abcdef" || args != `{"cmd":"pwd"}` {
		t.Errorf("text %q args %q", text, args)
	}
	if get(events[0].Data, "response", "status") != "in_progress" || get(events[0].Data, "response", "usage") != nil {
		t.Errorf("response.created = %v", events[0].Data)
	}
	added := get(events[16].Data, "item")
	if get(added, "type") != "function_call" || get(added, "arguments") != "" || get(added, "status") != "in_progress" {
		t.Errorf("function_call added = %v", added)
	}
	done := get(events[len(events)-1].Data, "response")
	if get(done, "status") != "completed" || len(get(done, "output").([]any)) != 3 ||
		get(done, "usage", "output_tokens") != float64(2+2+4+3) || get(done, "output", 0, "summary", 0, "text") != "think" {
		t.Errorf("response.completed = %v", done)
	}
}

func TestChat_NonStreaming(t *testing.T) {
	_, hs := newStubWith(t, routerstub.Options{Script: routerstub.NewQueue(routerstub.ToolCall("bash", `{"command":"ls"}`)), ModelMapping: func(m string) string { return m + "-served" }})
	body := `{"model":"chat-x","messages":[{"role":"system","content":"sys"},{"role":"user","content":"go"}]}`
	resp := post(t, hs, "/v1/chat/completions", body)
	if h := resp.Header.Get(routerstub.OpenAIModelHeader); h != "chat-x-served" {
		t.Errorf("%s header = %q, want the served model", routerstub.OpenAIModelHeader, h)
	}
	got := decode(t, resp)
	in := float64((len(body) + 3) / 4)
	want := map[string]any{
		"id": "chatcmpl-stub00000100", "object": "chat.completion", "created": got["created"], "model": "chat-x-served",
		"system_fingerprint": nil,
		"choices": []any{map[string]any{"index": 0.0, "logprobs": nil, "finish_reason": "tool_calls",
			"message": map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}, "tool_calls": []any{
				map[string]any{"id": "call_stub00000100", "type": "function",
					"function": map[string]any{"name": "bash", "arguments": `{"command":"ls"}`}}}}}},
		"usage": map[string]any{"prompt_tokens": in, "completion_tokens": 5.0, "total_tokens": in + 5,
			"prompt_tokens_details": map[string]any{"cached_tokens": 0.0}, "completion_tokens_details": map[string]any{"reasoning_tokens": 0.0}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("completion (-want +got):\n%s", diff)
	}
}

func TestChat_Streaming(t *testing.T) {
	tests := []struct {
		name, body string
		wantUsage  bool
	}{
		{"without usage", `{"model":"c","stream":true,"messages":[{"role":"user","content":"go"}]}`, false},
		{"with usage", `{"model":"c","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go"}]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs := newStub(t, routerstub.NewQueue(routerstub.Join(
				routerstub.Deltas("one two", 3), routerstub.ToolCall("bash", `{"command":"ls"}`))))
			events := readSSE(t, post(t, hs, "/chat/completions", tt.body).Body)
			last := events[len(events)-1]
			if last.Raw != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", last.Raw)
			}
			chunks := events[:len(events)-1]
			var text, args, finish string
			var usage any
			for _, c := range chunks {
				if c.Data["object"] != "chat.completion.chunk" || c.Data["model"] != "c" || c.Name != "" {
					t.Errorf("chunk %v", c.Raw)
				}
				if u := c.Data["usage"]; u != nil {
					usage = u
					if n := len(c.Data["choices"].([]any)); n != 0 {
						t.Errorf("usage chunk has %d choices, want 0", n)
					}
					continue
				}
				if s, ok := get(c.Data, "choices", 0, "delta", "content").(string); ok {
					text += s
				}
				if s, ok := get(c.Data, "choices", 0, "delta", "tool_calls", 0, "function", "arguments").(string); ok {
					args += s
				}
				if f, ok := get(c.Data, "choices", 0, "finish_reason").(string); ok {
					finish = f
				}
			}
			if get(chunks[0].Data, "choices", 0, "delta", "role") != "assistant" {
				t.Errorf("first chunk %s, want the assistant role", chunks[0].Raw)
			}
			if text != "one two" || args != `{"command":"ls"}` || finish != "tool_calls" {
				t.Errorf("text %q args %q finish %q", text, args, finish)
			}
			if (usage != nil) != tt.wantUsage || (usage != nil && get(usage, "completion_tokens") != float64(2+4+1)) {
				t.Errorf("usage = %v, want present=%v", usage, tt.wantUsage)
			}
		})
	}
}
