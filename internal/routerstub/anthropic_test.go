package routerstub_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/internal/routerstub"
)

func TestAnthropic_NonStreaming(t *testing.T) {
	srv, hs := newStubWith(t, routerstub.Options{Script: routerstub.NewQueue(routerstub.Join(
		routerstub.Text("Listing."),
		routerstub.ToolCall("Bash", `{"command":"ls"}`),
	)), ServedModel: "served-model"})
	body := `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Bash"}]}`
	resp := post(t, hs, "/v1/messages?beta=true", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	got := decode(t, resp)
	in := float64((len(body) + 3) / 4)
	want := map[string]any{
		"id": "msg_stub00000100", "type": "message", "role": "assistant", "model": "served-model",
		"content": []any{
			map[string]any{"type": "text", "text": "Listing."},
			map[string]any{"type": "tool_use", "id": "toolu_stub00000101", "name": "Bash", "input": map[string]any{"command": "ls"}},
		},
		"stop_reason": "tool_use", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": float64(2 + 4 + 1),
			"cache_creation_input_tokens": 0.0, "cache_read_input_tokens": 0.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "claude-x" || r.ServedModel != "served-model" || r.Query != "beta=true" || r.Stream ||
		r.AuthKind != routerstub.AuthAPIKey || r.Key != testKey || r.Tools != 1 || r.Prompt != "hi" ||
		r.Usage.InputTokens != int(in) || r.Status != 200 || string(r.Body) != body {
		t.Errorf("recorded %+v", r)
	}
}

func TestAnthropic_Streaming(t *testing.T) {
	_, hs := newStub(t, routerstub.NewQueue(routerstub.Join(
		routerstub.Thinking("plan it"),
		routerstub.Deltas("Hello, wörld!", 4),
		routerstub.ToolCall("Bash", `{"command":"ls -la"}`),
	)))
	resp := post(t, hs, "/v1/messages", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	events := readSSE(t, resp.Body)
	wantNames := []string{
		"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop",
	}
	if diff := cmp.Diff(wantNames, names(events)); diff != "" {
		t.Fatalf("event names (-want +got):\n%s", diff)
	}
	for _, e := range events {
		if e.Data["type"] != e.Name {
			t.Errorf("event %s has data type %v", e.Name, e.Data["type"])
		}
	}
	start := events[0].Data["message"]
	if get(start, "model") != "m" || get(start, "stop_reason") != nil || len(get(start, "content").([]any)) != 0 {
		t.Errorf("message_start = %v", start)
	}
	// Reassemble the blocks as a client would.
	var thinking, text, sig, args string
	for _, e := range events {
		if e.Name != "content_block_delta" {
			continue
		}
		d := e.Data["delta"].(map[string]any)
		switch d["type"] {
		case "thinking_delta":
			thinking += d["thinking"].(string)
		case "signature_delta":
			sig += d["signature"].(string)
		case "text_delta":
			text += d["text"].(string)
		case "input_json_delta":
			args += d["partial_json"].(string)
		default:
			t.Errorf("unexpected delta %v", d)
		}
	}
	if thinking != "plan it" || sig == "" || text != "Hello, wörld!" {
		t.Errorf("thinking %q signature %q text %q", thinking, sig, text)
	}
	var input map[string]string
	if err := json.Unmarshal([]byte(args), &input); err != nil || input["command"] != "ls -la" {
		t.Errorf("tool input %q: %v", args, err)
	}
	tool := events[12].Data["content_block"]
	if get(tool, "type") != "tool_use" || get(tool, "name") != "Bash" || get(tool, "id") == "" || len(get(tool, "input").(map[string]any)) != 0 {
		t.Errorf("tool content_block_start = %v", tool)
	}
	md := events[len(events)-2].Data
	if get(md, "delta", "stop_reason") != "tool_use" || get(md, "usage", "output_tokens") != float64(2+4+6) {
		t.Errorf("message_delta = %v", md)
	}
}

func TestAnthropic_CountTokens(t *testing.T) {
	srv, hs := newStub(t, routerstub.NewQueue(routerstub.Text("never used")))
	body := `{"model":"m","messages":[{"role":"user","content":"count me"}]}`
	got := decode(t, post(t, hs, "/v1/messages/count_tokens", body))
	if got["input_tokens"] != float64((len(body)+3)/4) {
		t.Errorf("count_tokens = %v", got)
	}
	if r := srv.Requests()[0]; r.Reply != "count_tokens" || r.Side {
		t.Errorf("recorded reply %q side %v, want count_tokens, not a side call", r.Reply, r.Side)
	}
}
