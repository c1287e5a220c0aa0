// Package turntext renders a turn's provider events as they come, for a
// person reading a terminal or a program reading JSON lines: in text, the
// agent's text on one writer and a line per tool call, per question from
// the harness and a closing line (the run's status, served model and token
// usage) on another, so that the first holds the agent's answer alone; in
// JSON, one object per event.
package turntext

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
)

// Options configure a Renderer.
type Options struct {
	// Out receives the agent's text, or with JSON every event.
	Out io.Writer
	// Status receives the tool, question and closing lines.
	Status io.Writer
	// JSON prints every event as one JSON object per line on Out instead
	// of text.
	JSON bool
}

// Renderer shows a turn's events. Call Event for each event in order, then
// End once; a Renderer is not safe for concurrent use.
type Renderer struct {
	o        Options
	json     *json.Encoder
	midLine  bool            // Out's last text did not end a line
	texted   bool            // some text was printed
	toolSeen map[string]bool // tool calls whose line was printed
	tools    map[string]*provider.Part
	order    []string
	usage    *provider.Usage
	models   []string
	status   string
	failure  string
}

// New returns a Renderer that writes as o says.
func New(o Options) *Renderer {
	r := &Renderer{o: o, toolSeen: map[string]bool{}, tools: map[string]*provider.Part{}}
	if o.JSON {
		r.json = json.NewEncoder(o.Out)
	}
	return r
}

// Event is the JSON form of a provider.Event, one per line with
// Options.JSON.
type Event struct {
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

// Status is the run's terminal status (provider.StatusCompleted,
// StatusFailed or StatusCancelled) from the events seen so far, "" before
// one; failure is the reason when it did not complete.
func (r *Renderer) Status() (status, failure string) { return r.status, r.failure }

// Event renders one event.
func (r *Renderer) Event(ev provider.Event) error {
	r.track(ev)
	if r.json != nil {
		return r.json.Encode(Event{ID: ev.ID, Type: ev.Type, RunID: ev.RunID, SessionID: ev.SessionID,
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
			return r.text(ev.Delta)
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
			return r.text(ev.FinalText)
		}
	}
	return nil
}

// text writes the agent's text to Out.
func (r *Renderer) text(s string) error {
	r.texted = true
	r.midLine = !strings.HasSuffix(s, "\n")
	_, err := io.WriteString(r.o.Out, s)
	return err
}

// track keeps what the closing line says.
func (r *Renderer) track(ev provider.Event) {
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
		r.status, r.failure = provider.StatusCompleted, ""
	case ev.Type == provider.EventStatus && (ev.Status == provider.StatusFailed || ev.Status == provider.StatusCancelled):
		r.status, r.failure = ev.Status, ev.Detail
		if r.failure == "" {
			r.failure = "the run " + ev.Status
		}
	}
}

// line writes a status line, after ending Out's text line.
func (r *Renderer) line(s string) error {
	if err := r.endText(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(r.o.Status, s)
	return err
}

// endText ends Out's last text line.
func (r *Renderer) endText() error {
	if !r.midLine {
		return nil
	}
	r.midLine = false
	_, err := io.WriteString(r.o.Out, "\n")
	return err
}

// End finishes the rendering: the lines of tool calls that never ended,
// then, once the run has a terminal status, the closing line. With JSON
// it writes nothing.
func (r *Renderer) End() error {
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

// toolLine is a tool call's line: its name, status and a short input, or
// its error.
func toolLine(p *provider.Part) string {
	status := "requested"
	in := ""
	if p.State != nil {
		status = p.State.Status
		in = render.OneLine(string(p.State.Input), 80)
		if p.State.Status == provider.ToolError && p.State.Error != "" {
			in = render.OneLine(p.State.Error, 80)
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
