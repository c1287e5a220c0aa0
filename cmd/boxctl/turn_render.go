package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
)

// turnRenderer shows a turn's events as they come: with -o json, one JSON
// object per event on stdout; otherwise the agent's text on stdout and a
// line per tool call and a closing line (served model, usage) on stderr,
// so that stdout is the agent's answer alone.
type turnRenderer struct {
	a        *app
	json     *json.Encoder
	midLine  bool            // stdout's last text did not end a line
	texted   bool            // some text delta was printed
	toolSeen map[string]bool // tool calls whose line was printed
	tools    map[string]*provider.Part
	order    []string
	usage    *provider.Usage
	models   []string
	final    string
	// status is the run's terminal status and failure its reason when it
	// did not complete.
	status, failure string
}

func newTurnRenderer(a *app) *turnRenderer {
	r := &turnRenderer{a: a, toolSeen: map[string]bool{}, tools: map[string]*provider.Part{}}
	if a.jsonOutput() {
		r.json = json.NewEncoder(a.out)
	}
	return r
}

// turnEvent is the JSON form of a provider.Event.
type turnEvent struct {
	ID             string                   `json:"id,omitempty"`
	Type           string                   `json:"type"`
	RunID          string                   `json:"runId,omitempty"`
	SessionID      string                   `json:"sessionId,omitempty"`
	ExecutionID    string                   `json:"executionId,omitempty"`
	EventID        string                   `json:"eventId,omitempty"`
	Sequence       int64                    `json:"sequence,omitempty"`
	Part           *provider.Part           `json:"part,omitempty"`
	Delta          string                   `json:"delta,omitempty"`
	Status         string                   `json:"status,omitempty"`
	Detail         string                   `json:"detail,omitempty"`
	Usage          *provider.Usage          `json:"usage,omitempty"`
	ModelRequests  *int64                   `json:"modelRequests,omitempty"`
	ProviderModels []string                 `json:"providerModels,omitempty"`
	Interaction    *wire.InteractionRequest `json:"interaction,omitempty"`
	FinalText      string                   `json:"finalText,omitempty"`
	FinishReason   string                   `json:"finishReason,omitempty"`
	Raw            json.RawMessage          `json:"raw,omitempty"`
}

func (r *turnRenderer) event(ev provider.Event) error {
	r.track(ev)
	if r.json != nil {
		return r.json.Encode(turnEvent{ID: ev.ID, Type: ev.Type, RunID: ev.RunID, SessionID: ev.SessionID,
			ExecutionID: ev.ExecutionID, EventID: ev.EventID, Sequence: ev.Sequence, Part: ev.Part, Delta: ev.Delta,
			Status: ev.Status, Detail: ev.Detail, Usage: ev.Usage, ModelRequests: ev.ModelRequests,
			ProviderModels: ev.ProviderModels, Interaction: ev.Interaction, FinalText: ev.FinalText,
			FinishReason: ev.FinishReason, Raw: ev.Raw})
	}
	switch ev.Type {
	case provider.EventMessagePart:
		if ev.Part == nil {
			return nil
		}
		if ev.Part.Type == "text" && ev.Delta != "" {
			r.texted = true
			r.midLine = !strings.HasSuffix(ev.Delta, "\n")
			_, err := io.WriteString(r.a.out, ev.Delta)
			return err
		}
		if ev.Part.Type == "tool" && ev.Part.State != nil && isToolEnd(ev.Part.State.Status) && !r.toolSeen[ev.Part.ID] {
			r.toolSeen[ev.Part.ID] = true
			return r.line(toolLine(ev.Part))
		}
	case provider.EventInteraction:
		if ev.Interaction != nil {
			return r.line(fmt.Sprintf("? the harness asks (%s): %s; answer it through the provider API", ev.Interaction.Kind, ev.Interaction.Title))
		}
	case provider.EventResult:
		if !r.texted && ev.FinalText != "" {
			r.texted = true
			r.midLine = !strings.HasSuffix(ev.FinalText, "\n")
			_, err := io.WriteString(r.a.out, ev.FinalText)
			return err
		}
	}
	return nil
}

// track keeps what the closing line says.
func (r *turnRenderer) track(ev provider.Event) {
	if ev.Usage != nil {
		r.usage = provider.AddUsage(r.usage, ev.Usage)
	}
	if len(ev.ProviderModels) > 0 {
		r.models = ev.ProviderModels
	}
	if p := ev.Part; p != nil && p.Type == "tool" {
		if _, ok := r.tools[p.ID]; !ok {
			r.order = append(r.order, p.ID)
		}
		r.tools[p.ID] = p
	}
	switch {
	case ev.Type == provider.EventResult:
		r.status, r.failure, r.final = provider.StatusCompleted, "", ev.FinalText
	case ev.Type == provider.EventStatus && (ev.Status == provider.StatusFailed || ev.Status == provider.StatusCancelled):
		r.status, r.failure = ev.Status, ev.Detail
		if r.failure == "" {
			r.failure = "the run " + ev.Status
		}
	}
}

// line writes a status line to stderr, after ending stdout's text line.
func (r *turnRenderer) line(s string) error {
	if err := r.endText(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(r.a.errOut, s)
	return err
}

// endText ends stdout's last text line.
func (r *turnRenderer) endText() error {
	if !r.midLine {
		return nil
	}
	r.midLine = false
	_, err := io.WriteString(r.a.out, "\n")
	return err
}

// end finishes the rendering: tool calls that never ended, then the
// closing line.
func (r *turnRenderer) end() error {
	if r.json != nil {
		return nil
	}
	for _, id := range r.order {
		if !r.toolSeen[id] {
			r.toolSeen[id] = true
			if err := r.line(toolLine(r.tools[id])); err != nil {
				return err
			}
		}
	}
	if r.status == "" {
		return r.endText()
	}
	parts := []string{r.status}
	if len(r.models) > 0 {
		parts = append(parts, "served by "+strings.Join(r.models, ", "))
	} else {
		parts = append(parts, "served model not reported")
	}
	if u := r.usage; u != nil {
		s := fmt.Sprintf("%d input + %d output tokens", u.InputTokens, u.OutputTokens)
		if u.CacheReadInputTokens != nil && *u.CacheReadInputTokens > 0 {
			s += fmt.Sprintf(" (%d cached)", *u.CacheReadInputTokens)
		}
		if u.Provenance != "" && u.Provenance != provider.UsageMeasured {
			s += ", " + u.Provenance
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "usage not reported")
	}
	return r.line("── " + strings.Join(parts, " · "))
}

func isToolEnd(status string) bool {
	return status == provider.ToolCompleted || status == provider.ToolError
}

// toolLine is a tool call's line: its name, status and a short input.
func toolLine(p *provider.Part) string {
	status := "requested"
	in := ""
	if p.State != nil {
		status = p.State.Status
		in = oneLine(string(p.State.Input), 80)
		if p.State.Status == provider.ToolError && p.State.Error != "" {
			in = oneLine(p.State.Error, 80)
		}
	}
	name := p.Tool
	if name == "" {
		name = "tool"
	}
	s := fmt.Sprintf("⏺ %s [%s]", name, status)
	if in != "" && in != "null" && in != "{}" {
		s += " " + in
	}
	return s
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
