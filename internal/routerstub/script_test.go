package routerstub_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/internal/routerstub"
)

func TestQueue_Pick(t *testing.T) {
	main := routerstub.Request{Family: routerstub.FamilyAnthropic, Tools: 3}
	side := routerstub.Request{Family: routerstub.FamilyAnthropic, Side: true}
	toolResult := routerstub.Request{Family: routerstub.FamilyResponses, Tools: 3, ToolResult: true}
	tests := []struct {
		name string
		q    *routerstub.Queue
		reqs []routerstub.Request
		want []string
	}{
		{"queue then default", routerstub.NewQueue(routerstub.Text("d"), routerstub.Text("a"), routerstub.Text("b")),
			[]routerstub.Request{main, main, main, main}, []string{"a", "b", "d", "d"}},
		{"side calls leave the queue alone", routerstub.NewQueue(routerstub.Text("d"), routerstub.Text("a")).Side(routerstub.Text("s")),
			[]routerstub.Request{side, side, main, side, main}, []string{"s", "s", "a", "s", "d"}},
		{"after tool", routerstub.NewQueue(routerstub.Text("d"), routerstub.Text("a"), routerstub.Text("b")).AfterTool(routerstub.Text("t")),
			[]routerstub.Request{main, toolResult, toolResult, main}, []string{"a", "t", "t", "b"}},
		{"tool results pop without after-tool", routerstub.NewQueue(routerstub.Text("d"), routerstub.Text("a"), routerstub.Text("b")),
			[]routerstub.Request{main, toolResult, toolResult}, []string{"a", "b", "d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range tt.reqs {
				got = append(got, tt.q.Pick(r).Text())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("picks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueue_PushLen(t *testing.T) {
	q := routerstub.NewQueue(routerstub.Text("d"))
	q.Push(routerstub.Text("a"), routerstub.Text("b"))
	if q.Len() != 2 {
		t.Fatalf("Len() = %d, want 2", q.Len())
	}
	if got := q.Pick(routerstub.Request{}).Text(); got != "a" || q.Len() != 1 {
		t.Errorf("Pick() = %q, Len() = %d, want a, 1", got, q.Len())
	}
}

func TestIsSideCall(t *testing.T) {
	tests := []struct {
		name string
		r    routerstub.Request
		want bool
	}{
		{"claude without tools", routerstub.Request{Family: routerstub.FamilyAnthropic, Path: "/v1/messages", UserAgent: "claude-cli/2.1.332 (external, sdk-cli)"}, true},
		{"claude with tools", routerstub.Request{Family: routerstub.FamilyAnthropic, Path: "/v1/messages", Tools: 12, UserAgent: "claude-cli/2.1.332"}, false},
		{"claude token count", routerstub.Request{Family: routerstub.FamilyAnthropic, Path: "/v1/messages/count_tokens", UserAgent: "claude-cli/2.1.332"}, false},
		{"other client without tools", routerstub.Request{Family: routerstub.FamilyAnthropic, Path: "/v1/messages", UserAgent: "curl/8"}, false},
		{"responses without tools", routerstub.Request{Family: routerstub.FamilyResponses, Path: "/v1/responses", UserAgent: "claude-cli/2"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := routerstub.IsSideCall(tt.r); got != tt.want {
				t.Errorf("IsSideCall() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestServer_SideCall shows a side call answered beside the queue, with
// the decision recorded.
func TestServer_SideCall(t *testing.T) {
	q := routerstub.NewQueue(routerstub.Text("default"), routerstub.Text("main")).Side(routerstub.Text("title"))
	srv, hs := newStub(t, q)
	ua := []string{"X-Api-Key", testKey, "User-Agent", "claude-cli/2.1.332 (external, sdk-cli)"}
	side := decode(t, post(t, hs, "/v1/messages", `{"model":"haiku","messages":[{"role":"user","content":"title?"}]}`, ua...))
	turn := decode(t, post(t, hs, "/v1/messages", `{"model":"opus","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"go"}]}`, ua...))
	if got := get(side, "content", 0, "text"); got != "title" {
		t.Errorf("side call answered %v, want title", got)
	}
	if got := get(turn, "content", 0, "text"); got != "main" {
		t.Errorf("turn answered %v, want main", got)
	}
	if reqs := srv.Requests(); !reqs[0].Side || reqs[1].Side {
		t.Errorf("recorded side flags %v %v, want true false", reqs[0].Side, reqs[1].Side)
	}
}

func TestServer_ToolResultDetection(t *testing.T) {
	tests := []struct {
		path, body string
		want       bool
	}{
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}`, true},
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"go"}]}]}`, false},
		{"/v1/responses", `{"model":"m","input":[{"type":"message","role":"user","content":"go"},{"type":"function_call","call_id":"c","name":"x","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`, true},
		{"/v1/responses", `{"model":"m","input":[{"type":"custom_tool_call_output","call_id":"c","output":"ok"}]}`, true},
		{"/v1/responses", `{"model":"m","input":"go"}`, false},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"tool","tool_call_id":"c","content":"ok"}]}`, true},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"go"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			srv, hs := newStub(t, routerstub.NewQueue(routerstub.Text("x")))
			post(t, hs, tt.path, tt.body)
			r := srv.Requests()[0]
			if r.ToolResult != tt.want {
				t.Errorf("ToolResult = %v, want %v", r.ToolResult, tt.want)
			}
			if !tt.want && r.Prompt != "go" {
				t.Errorf("Prompt = %q, want go", r.Prompt)
			}
		})
	}
}
