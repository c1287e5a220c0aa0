package routerstub_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/internal/routerstub"
)

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"hello"}]},{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"a"}}}]}],
"tools":[{"functionDeclarations":[{"name":"ls"},{"name":"cat"}]}]}`

func TestGemini_Stream(t *testing.T) {
	reply := routerstub.Join(routerstub.Thinking("hmm"), routerstub.Deltas("Hello there", 3), routerstub.ToolCall("run_shell_command", `{"command":"ls"}`))
	srv, hs := newStubWith(t, routerstub.Options{Script: routerstub.NewQueue(reply), ServedModel: "gemini-served"})
	resp := post(t, hs, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", geminiBody, "X-Goog-Api-Key", testKey)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	events := readSSE(t, resp.Body)
	var texts, thoughts []string
	var call any
	for i, e := range events {
		if e.Name != "" {
			t.Errorf("event %d has name %q, want data-only events", i, e.Name)
		}
		if got := get(e.Data, "modelVersion"); got != "gemini-served" {
			t.Errorf("event %d modelVersion = %v, want gemini-served", i, got)
		}
		p := get(e.Data, "candidates", 0, "content", "parts", 0)
		switch {
		case get(p, "thought") == true:
			thoughts = append(thoughts, get(p, "text").(string))
		case get(p, "functionCall") != nil:
			call = get(p, "functionCall")
		default:
			texts = append(texts, get(p, "text").(string))
		}
		finish := get(e.Data, "candidates", 0, "finishReason")
		if last := i == len(events)-1; (finish == "STOP") != last {
			t.Errorf("event %d finishReason = %v; want STOP only on the last", i, finish)
		}
	}
	if diff := cmp.Diff([]string{"Hel", "lo t", "here"}, texts); diff != "" {
		t.Errorf("text parts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"hmm"}, thoughts); diff != "" {
		t.Errorf("thought parts (-want +got):\n%s", diff)
	}
	if get(call, "name") != "run_shell_command" || get(call, "args", "command") != "ls" {
		t.Errorf("functionCall = %v", call)
	}
	last := events[len(events)-1].Data
	in := get(last, "usageMetadata", "promptTokenCount").(float64)
	out := get(last, "usageMetadata", "candidatesTokenCount").(float64)
	if get(last, "usageMetadata", "totalTokenCount") != in+out || in <= 0 || out <= 0 {
		t.Errorf("usageMetadata = %v", get(last, "usageMetadata"))
	}
	reqs := srv.Requests()
	r := reqs[0]
	want := routerstub.Request{Family: routerstub.FamilyGemini, Model: "gemini-2.5-pro", Stream: true, AuthKind: routerstub.AuthGoogAPIKey,
		Authorized: true, Tools: 2, ToolResult: true, Prompt: "hello", ServedModel: "gemini-served", Status: 200,
		Usage: routerstub.Usage{InputTokens: int(in), OutputTokens: int(out)}}
	got := routerstub.Request{Family: r.Family, Model: r.Model, Stream: r.Stream, AuthKind: r.AuthKind, Authorized: r.Authorized,
		Tools: r.Tools, ToolResult: r.ToolResult, Prompt: r.Prompt, ServedModel: r.ServedModel, Status: r.Status, Usage: r.Usage}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded request (-want +got):\n%s", diff)
	}
}

func TestGemini_Unary(t *testing.T) {
	tests := []struct {
		name, path string
		header     []string
		reply      routerstub.Reply
		wantStatus int
		check      func(t *testing.T, body map[string]any)
	}{
		{"generateContent with a key parameter", "/v1beta/models/gemini-2.5-flash:generateContent?key=" + testKey, []string{"X-Other", "1"},
			routerstub.Deltas("whole text", 4), 200, func(t *testing.T, body map[string]any) {
				if got := get(body, "candidates", 0, "content", "parts", 0, "text"); got != "whole text" {
					t.Errorf("text = %v, want the whole reply", got)
				}
				if get(body, "candidates", 0, "finishReason") != "STOP" || get(body, "modelVersion") != "gemini-2.5-flash" {
					t.Errorf("body = %v", body)
				}
			}},
		{"countTokens", "/v1beta/models/gemini-2.5-flash:countTokens", []string{"X-Goog-Api-Key", testKey},
			routerstub.Text("unused"), 200, func(t *testing.T, body map[string]any) {
				if n, _ := get(body, "totalTokens").(float64); n <= 0 {
					t.Errorf("body = %v, want totalTokens", body)
				}
			}},
		{"scripted error", "/v1beta/models/gemini-2.5-flash:generateContent", []string{"X-Goog-Api-Key", testKey},
			routerstub.Error(503, "overloaded"), 503, func(t *testing.T, body map[string]any) {
				want := map[string]any{"error": map[string]any{"code": 503.0, "message": "overloaded", "status": "UNAVAILABLE"}}
				if diff := cmp.Diff(want, body); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
			}},
		{"wrong key", "/v1beta/models/gemini-2.5-flash:generateContent", []string{"X-Goog-Api-Key", "nope"},
			routerstub.Text("unused"), 401, func(t *testing.T, body map[string]any) {
				if get(body, "error", "status") != "UNAUTHENTICATED" {
					t.Errorf("body = %v", body)
				}
			}},
		{"unknown verb", "/v1beta/models/gemini-2.5-flash:embedContent", []string{"X-Goog-Api-Key", testKey},
			routerstub.Text("unused"), 404, func(t *testing.T, body map[string]any) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs := newStub(t, routerstub.NewQueue(tt.reply))
			resp := post(t, hs, tt.path, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, tt.header...)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			tt.check(t, body)
		})
	}
}

// TestGemini_StructuredOutput: a request asking for JSON of a schema gets
// an instance of it (Gemini CLI's model router retries anything else),
// whatever the script answers text; a tool call stays one.
func TestGemini_StructuredOutput(t *testing.T) {
	classifier := `{"type":"OBJECT","properties":{"complexity_reasoning":{"type":"STRING"},"complexity_score":{"type":"INTEGER"}},"required":["complexity_reasoning","complexity_score"]}`
	tests := []struct {
		name, config string
		reply        routerstub.Reply
		want         string // the answer's text; "" for a tool call
	}{
		{"responseSchema", `{"responseMimeType":"application/json","responseSchema":` + classifier + `}`, routerstub.Text("hi"),
			`{"complexity_reasoning":"stub","complexity_score":1}`},
		{"responseJsonSchema", `{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{` +
			`"choice":{"type":"string","enum":["flash","pro"]},"n":{"type":["integer","null"],"minimum":3},"tags":{"type":"array","minItems":1,"items":{"type":"boolean"}},` +
			`"v":{"const":"x"},"alt":{"anyOf":[{"type":"number","maximum":0.5}]}}}}`, routerstub.Text("hi"),
			`{"alt":0.5,"choice":"flash","n":3,"tags":[false],"v":"x"}`},
		{"text mime type", `{"responseMimeType":"text/plain","responseSchema":` + classifier + `}`, routerstub.Text("hi"), "hi"},
		{"no schema", `{"responseMimeType":"application/json"}`, routerstub.Text("hi"), "hi"},
		{"tool call", `{"responseMimeType":"application/json","responseSchema":` + classifier + `}`,
			routerstub.ToolCall("run_shell_command", `{"command":"ls"}`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, hs := newStubWith(t, routerstub.Options{Script: routerstub.NewQueue(tt.reply)})
			body := `{"contents":[{"role":"user","parts":[{"text":"route this"}]}],"generationConfig":` + tt.config + `}`
			resp := post(t, hs, "/v1beta/models/gemini-flash:generateContent", body, "X-Goog-Api-Key", testKey)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d", resp.StatusCode)
			}
			var got map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			p := get(got, "candidates", 0, "content", "parts", 0)
			if tt.want == "" {
				if get(p, "functionCall", "name") != "run_shell_command" {
					t.Errorf("part = %v, want the tool call", p)
				}
				return
			}
			if text, _ := get(p, "text").(string); text != tt.want {
				t.Errorf("text = %s, want %s", text, tt.want)
			}
			if r := srv.Requests()[0]; (len(r.Schema) > 0) != (tt.want != "hi") {
				t.Errorf("recorded schema %s", r.Schema)
			}
		})
	}
}
