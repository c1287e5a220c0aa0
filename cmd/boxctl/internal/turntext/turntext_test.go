package turntext_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/turntext"
	"github.com/tangle-network/boxctl/provider"
)

func i64(n int64) *int64 { return &n }

func TestRenderer_Text(t *testing.T) {
	input := json.RawMessage(`{"command":"ls -la"}`)
	out := "file list"
	tests := []struct {
		name                   string
		events                 []provider.Event
		wantOut, wantStatus    string
		wantState, wantFailure string
	}{
		{
			name: "completed turn with tools and usage",
			events: []provider.Event{
				{Type: provider.EventStatus, Status: provider.StatusStarted},
				{Type: provider.EventMessagePart, Part: &provider.Part{ID: "t1", Type: "text", Text: "Hel"}, Delta: "Hel"},
				{Type: provider.EventMessagePart, Part: &provider.Part{ID: "t1", Type: "text", Text: "Hello"}, Delta: "lo"},
				{Type: provider.EventMessagePart, Part: &provider.Part{ID: "r1", Type: "reasoning", Text: "think"}, Delta: "think"},
				{Type: provider.EventMessagePart, Part: &provider.Part{ID: "c1", Type: "tool", Tool: "Bash",
					State: &provider.ToolState{Status: provider.ToolRunning, Input: input}}},
				{Type: provider.EventMessagePart, Part: &provider.Part{ID: "c1", Type: "tool", Tool: "Bash",
					State: &provider.ToolState{Status: provider.ToolCompleted, Input: input, Output: &out}}},
				{Type: provider.EventMessagePart, Part: &provider.Part{ID: "c2", Type: "tool", Tool: "Read",
					State: &provider.ToolState{Status: provider.ToolRunning, Input: json.RawMessage(`{"path":"a"}`)}}},
				{Type: provider.EventMessagePart, Part: &provider.Part{ID: "t2", Type: "text", Text: " done.\n"}, Delta: " done.\n"},
				{Type: provider.EventUsage, Usage: &provider.Usage{InputTokens: 10, OutputTokens: 3, Provenance: provider.UsageMeasured}},
				{Type: provider.EventUsage, Usage: &provider.Usage{InputTokens: 5, OutputTokens: 2, CacheReadInputTokens: i64(4), Provenance: provider.UsageMeasured}},
				{Type: provider.EventResult, FinalText: "Hello done.", ProviderModels: []string{"claude-sonnet-x"}, Status: provider.StatusCompleted},
			},
			wantOut: "Hello\n done.\n",
			wantStatus: `⏺ Bash [completed] {"command":"ls -la"}` + "\n" +
				`⏺ Read [running] {"path":"a"}` + "\n" +
				"── completed · served by claude-sonnet-x · 15 input + 5 output tokens (4 cached)\n",
			wantState: provider.StatusCompleted,
		},
		{
			name: "failed turn ends the partial text",
			events: []provider.Event{
				{Type: provider.EventMessagePart, Part: &provider.Part{ID: "t", Type: "text"}, Delta: "partial"},
				{Type: provider.EventStatus, Status: provider.StatusFailed, Detail: "turn timeout 1s exceeded"},
			},
			wantOut:    "partial\n",
			wantStatus: "── failed · served model not reported · usage not reported\n",
			wantState:  provider.StatusFailed, wantFailure: "turn timeout 1s exceeded",
		},
		{
			name: "cancelled without a detail",
			events: []provider.Event{
				{Type: provider.EventStatus, Status: provider.StatusCancelled},
			},
			wantStatus: "── cancelled · served model not reported · usage not reported\n",
			wantState:  provider.StatusCancelled, wantFailure: "the run cancelled",
		},
		{
			name: "final text without deltas, estimated usage, a tool error and a question",
			events: []provider.Event{
				{Type: provider.EventInteraction, Interaction: &wire.InteractionRequest{Kind: "permission", Title: "Run rm?"}},
				{Type: provider.EventMessagePart, Part: &provider.Part{ID: "c", Type: "tool",
					State: &provider.ToolState{Status: provider.ToolError, Input: input, Error: "no\nsuch  file"}}},
				{Type: provider.EventResult, FinalText: "answer", Usage: &provider.Usage{InputTokens: 1, OutputTokens: 2, Provenance: "estimated"}},
			},
			wantOut: "answer\n",
			wantStatus: "? the harness asks (permission): Run rm?; answer it through the provider API\n" +
				"⏺ tool [error] no such file\n" +
				"── completed · served model not reported · 1 input + 2 output tokens, estimated\n",
			wantState: provider.StatusCompleted,
		},
		{
			name:    "no terminal status: no closing line",
			events:  []provider.Event{{Type: provider.EventMessagePart, Part: &provider.Part{ID: "t", Type: "text"}, Delta: "cut"}},
			wantOut: "cut\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			r := turntext.New(turntext.Options{Out: &stdout, Status: &stderr})
			for _, ev := range tt.events {
				if err := r.Event(ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.End(); err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tt.wantOut {
				t.Errorf("Out = %q, want %q", stdout.String(), tt.wantOut)
			}
			if stderr.String() != tt.wantStatus {
				t.Errorf("Status =\n%s\nwant\n%s", stderr.String(), tt.wantStatus)
			}
			if st, f := r.Status(); st != tt.wantState || f != tt.wantFailure {
				t.Errorf("Status() = %q, %q; want %q, %q", st, f, tt.wantState, tt.wantFailure)
			}
		})
	}
}

func TestRenderer_JSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	r := turntext.New(turntext.Options{Out: &stdout, Status: &stderr, JSON: true})
	events := []provider.Event{
		{ID: "e1", Type: provider.EventMessagePart, RunID: "run-1", Part: &provider.Part{ID: "t", Type: "text"}, Delta: "hi",
			Raw: json.RawMessage(`{"type":"message.part.updated"}`)},
		{ID: "e2", Type: provider.EventResult, RunID: "run-1", FinalText: "hi", ProviderModels: []string{"m"}},
	}
	for _, ev := range events {
		if err := r.Event(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != len(events) {
		t.Fatalf("JSON printed %d lines for %d events:\n%s", len(lines), len(events), stdout.String())
	}
	tests := []struct {
		line int
		want turntext.Event
	}{
		{0, turntext.Event{ID: "e1", Type: provider.EventMessagePart, RunID: "run-1", Delta: "hi"}},
		{1, turntext.Event{ID: "e2", Type: provider.EventResult, RunID: "run-1", FinalText: "hi", ProviderModels: []string{"m"}}},
	}
	for _, tt := range tests {
		var got turntext.Event
		if err := json.Unmarshal([]byte(lines[tt.line]), &got); err != nil {
			t.Fatal(err)
		}
		if got.ID != tt.want.ID || got.Type != tt.want.Type || got.RunID != tt.want.RunID || got.Delta != tt.want.Delta ||
			got.FinalText != tt.want.FinalText || strings.Join(got.ProviderModels, ",") != strings.Join(tt.want.ProviderModels, ",") {
			t.Errorf("line %d = %+v, want %+v", tt.line, got, tt.want)
		}
	}
	var first turntext.Event
	_ = json.Unmarshal([]byte(lines[0]), &first)
	if string(first.Raw) != `{"type":"message.part.updated"}` || first.Part == nil || first.Part.ID != "t" {
		t.Errorf("first event's raw and part = %s, %+v", first.Raw, first.Part)
	}
	if stderr.Len() != 0 {
		t.Errorf("JSON wrote to Status: %q", stderr.String())
	}
}
