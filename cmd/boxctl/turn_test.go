package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/provider"
)

func TestTurnCmd_Flags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    turnOptions
		wantErr string
	}{
		{name: "box and prompt", args: []string{"last", "hello there"}, want: turnOptions{box: "last", prompt: "hello there"}},
		{name: "timeout and model", args: []string{"3f2a", "p", "--timeout", "90s", "--model", "haiku"},
			want: turnOptions{box: "3f2a", prompt: "p", timeout: 90 * time.Second, model: "haiku"}},
		{name: "no prompt", args: []string{"last"}, wantErr: "accepts 2 arg(s)"},
		{name: "empty prompt", args: []string{"last", ""}, wantErr: "the prompt is empty"},
		{name: "negative timeout", args: []string{"last", "p", "--timeout", "-1s"}, wantErr: "want a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, called, err := parseCmd(t, newTurnCmd, append([]string{"turn"}, tt.args...)...)
			if tt.wantErr != "" {
				if exitCode(err) != 2 || !strings.Contains(err.Error(), tt.wantErr) || called {
					t.Fatalf("turn %v: error %v (exit %d), want exit 2 containing %q", tt.args, err, exitCode(err), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *o, cmp.AllowUnexported(turnOptions{})); diff != "" {
				t.Errorf("turn %v options (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func i64(n int64) *int64 { return &n }

func TestTurnRenderer(t *testing.T) {
	input := json.RawMessage(`{"command":"ls -la"}`)
	out := "file list"
	events := []provider.Event{
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
	}
	var stdout, stderr bytes.Buffer
	r := newTurnRenderer(newApp(&stdout, &stderr))
	for _, ev := range events {
		if err := r.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.end(); err != nil {
		t.Fatal(err)
	}
	if want := "Hello\n done.\n"; stdout.String() != want {
		t.Errorf("stdout = %q, want the text deltas, broken for the tool line: %q", stdout.String(), want)
	}
	wantErr := `⏺ Bash [completed] {"command":"ls -la"}` + "\n" +
		`⏺ Read [running] {"path":"a"}` + "\n" +
		"── completed · served by claude-sonnet-x · 15 input + 5 output tokens (4 cached)\n"
	if stderr.String() != wantErr {
		t.Errorf("stderr =\n%s\nwant\n%s", stderr.String(), wantErr)
	}
	if r.failure != "" {
		t.Errorf("failure = %q after a completed result", r.failure)
	}
}

func TestTurnRenderer_Failed(t *testing.T) {
	var stdout, stderr bytes.Buffer
	r := newTurnRenderer(newApp(&stdout, &stderr))
	for _, ev := range []provider.Event{
		{Type: provider.EventMessagePart, Part: &provider.Part{ID: "t", Type: "text"}, Delta: "partial"},
		{Type: provider.EventStatus, Status: provider.StatusFailed, Detail: "turn timeout 1s exceeded"},
	} {
		if err := r.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.end(); err != nil {
		t.Fatal(err)
	}
	if r.status != provider.StatusFailed || r.failure != "turn timeout 1s exceeded" {
		t.Errorf("status, failure = %q, %q; want failed with the detail", r.status, r.failure)
	}
	if !strings.Contains(stderr.String(), "── failed · served model not reported · usage not reported") {
		t.Errorf("stderr = %q, want a failed closing line", stderr.String())
	}
	if stdout.String() != "partial\n" {
		t.Errorf("stdout = %q, want the partial text ended by a newline", stdout.String())
	}
}

func TestTurnRenderer_JSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := newApp(&stdout, &stderr)
	a.output = "json"
	r := newTurnRenderer(a)
	events := []provider.Event{
		{ID: "e1", Type: provider.EventMessagePart, RunID: "run-1", Part: &provider.Part{ID: "t", Type: "text"}, Delta: "hi",
			Raw: json.RawMessage(`{"type":"message.part.updated"}`)},
		{ID: "e2", Type: provider.EventResult, RunID: "run-1", FinalText: "hi", ProviderModels: []string{"m"}},
	}
	for _, ev := range events {
		if err := r.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.end(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != len(events) {
		t.Fatalf("-o json printed %d lines for %d events:\n%s", len(lines), len(events), stdout.String())
	}
	var first turnEvent
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.ID != "e1" || first.Delta != "hi" || first.RunID != "run-1" || string(first.Raw) != `{"type":"message.part.updated"}` {
		t.Errorf("first event = %+v", first)
	}
	if stderr.Len() != 0 {
		t.Errorf("-o json wrote to stderr: %q", stderr.String())
	}
}
