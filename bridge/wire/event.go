package wire

import "encoding/json"

// Canonical event types: the `type` of the event in a canonical SSE frame
// (wire.Envelope.Event), which equals the frame's `event:` field. They are
// members of the agent interface's CanonicalStreamEvent union.
const (
	EventMessagePartUpdated = "message.part.updated"
	EventStatus             = "status"
	EventInteraction        = "interaction"
	EventInteractionCancel  = "interaction.cancel"
	EventWarning            = "warning"
	EventRaw                = "raw"
	EventSessionUpdated     = "session.updated"
)

// Statuses of a canonical `status` event. Completed, failed and cancelled
// are terminal: a canonical stream ends with one of them.
const (
	CanonicalStarted    = "started"
	CanonicalProcessing = "processing"
	CanonicalCompleted  = "completed"
	CanonicalFailed     = "failed"
	CanonicalCancelled  = "cancelled"
)

// Tool states of a tool part: pending while its call's arguments are still
// streaming, running with its input, then completed with its output or
// error with its error.
const (
	ToolPending   = "pending"
	ToolRunning   = "running"
	ToolCompleted = "completed"
	ToolError     = "error"
)

// Part is the message part of a message.part.updated event: text,
// reasoning or a tool call of one message of one session. A text or
// reasoning part's Text is its whole text so far (the event's Delta is
// what it adds); a tool part's State follows its call.
type Part struct {
	ID        string     `json:"id"`
	SessionID string     `json:"sessionID,omitempty"`
	MessageID string     `json:"messageID,omitempty"`
	Type      string     `json:"type"`
	Text      string     `json:"text,omitempty"`
	Tool      string     `json:"tool,omitempty"`
	CallID    string     `json:"callID,omitempty"`
	State     *ToolState `json:"state,omitempty"`
}

// ToolState is the state of a tool part: its input (a JSON object, empty
// while pending), then its output once completed or its error once failed.
type ToolState struct {
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input"`
	Output *string         `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// PartEvent is a message.part.updated event. Delta is the text a text or
// reasoning part gained.
type PartEvent struct {
	Type  string  `json:"type"`
	Part  Part    `json:"part"`
	Delta *string `json:"delta,omitempty"`
}

// StatusEvent is a `status` event.
type StatusEvent struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// WarningEvent is a `warning` event.
type WarningEvent struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WarnTruncated is the code of a warning that a value was cut to the
// contract's bounds.
const WarnTruncated = "truncated"

// UsageEvent is the `raw` event that carries a turn's token usage and the
// models the model API said served it (the interface has no member of
// its own for them). Backend names the harness.
type UsageEvent struct {
	Type    string       `json:"type"`
	Backend string       `json:"backend"`
	Event   UsagePayload `json:"event"`
}

// UsagePayload is the provider event of a UsageEvent: {"type": "usage"}.
// FinishReason is how a completed turn ended (a Finish* value), the one
// a chat stream's finish_reason carries.
type UsagePayload struct {
	Type           string         `json:"type"`
	Usage          *ReportedUsage `json:"usage,omitempty"`
	ProviderModels []string       `json:"providerModels,omitempty"`
	FinishReason   string         `json:"finishReason,omitempty"`
}

// UsagePayloadType is the type of a UsagePayload.
const UsagePayloadType = "usage"

// ReportedUsage is the usage of a UsageEvent: TokenUsage and whether it
// was estimated (absent: provenance unknown).
type ReportedUsage struct {
	TokenUsage
	Estimated *bool `json:"estimated,omitempty"`
}

// TokenUsage is the agent interface's TokenUsage (a strict object): the
// usage of a turn result and of an environment event.
type TokenUsage struct {
	InputTokens              int64    `json:"inputTokens"`
	OutputTokens             int64    `json:"outputTokens"`
	TotalTokens              *int64   `json:"totalTokens,omitempty"`
	CacheReadInputTokens     *int64   `json:"cacheReadInputTokens,omitempty"`
	CacheCreationInputTokens *int64   `json:"cacheCreationInputTokens,omitempty"`
	ReasoningTokens          *int64   `json:"reasoningTokens,omitempty"`
	Cost                     *float64 `json:"cost,omitempty"`
}

// Add returns the sum of u and next, as the agent interface sums usage: an
// optional total is set when either side has it. A nil side is nothing.
func (u *TokenUsage) Add(next *TokenUsage) *TokenUsage {
	if next == nil {
		return u
	}
	if u == nil {
		c := *next
		return &c
	}
	sum := func(a, b *int64) *int64 {
		if a == nil && b == nil {
			return nil
		}
		var n int64
		for _, p := range []*int64{a, b} {
			if p != nil {
				n += *p
			}
		}
		return &n
	}
	out := &TokenUsage{InputTokens: u.InputTokens + next.InputTokens, OutputTokens: u.OutputTokens + next.OutputTokens,
		TotalTokens: sum(u.TotalTokens, next.TotalTokens), CacheReadInputTokens: sum(u.CacheReadInputTokens, next.CacheReadInputTokens),
		CacheCreationInputTokens: sum(u.CacheCreationInputTokens, next.CacheCreationInputTokens),
		ReasoningTokens:          sum(u.ReasoningTokens, next.ReasoningTokens)}
	if u.Cost != nil || next.Cost != nil {
		var c float64
		for _, p := range []*float64{u.Cost, next.Cost} {
			if p != nil {
				c += *p
			}
		}
		out.Cost = &c
	}
	return out
}

// EnvironmentEvent is the agent interface's AgentEnvironmentEvent (a
// strict object), the form of the events of a turn result.
type EnvironmentEvent struct {
	Type          string          `json:"type"`
	Data          json.RawMessage `json:"data"`
	ID            string          `json:"id,omitempty"`
	Normalized    json.RawMessage `json:"normalized,omitempty"`
	Usage         *TokenUsage     `json:"usage,omitempty"`
	ProviderEvent json.RawMessage `json:"providerEvent,omitempty"`
}

// ResultEvent is one canonical event read for a turn result: the event
// as an EnvironmentEvent, the visible text it adds (a text part's delta)
// and the usage it reports.
type ResultEvent struct {
	EnvironmentEvent
	Delta string
	Usage *TokenUsage
}

// EnvironmentEventOf reads a canonical event object (wire.Envelope.Event)
// as the TypeScript bridge turns it into a result event: a usage event
// becomes {"type": "usage", "data", "usage"}; any other is {type, data:
// the event, normalized: the event}, with a raw event's provider event.
func EnvironmentEventOf(event json.RawMessage) (ResultEvent, bool) {
	var ev struct {
		Type  string          `json:"type"`
		Part  *Part           `json:"part"`
		Delta *string         `json:"delta"`
		Event json.RawMessage `json:"event"`
	}
	if json.Unmarshal(event, &ev) != nil || ev.Type == "" {
		return ResultEvent{}, false
	}
	if ev.Type == EventRaw {
		var p UsagePayload
		if json.Unmarshal(ev.Event, &p) == nil && p.Type == UsagePayloadType && p.Usage != nil {
			t := p.Usage.TokenUsage
			data := map[string]any{}
			if len(p.ProviderModels) > 0 {
				data["providerModels"] = p.ProviderModels
			}
			if p.Usage.Estimated != nil {
				data["estimated"] = *p.Usage.Estimated
			}
			d, _ := json.Marshal(data)
			return ResultEvent{EnvironmentEvent: EnvironmentEvent{Type: UsagePayloadType, Data: d, Usage: &t}, Usage: &t}, true
		}
	}
	out := ResultEvent{EnvironmentEvent: EnvironmentEvent{Type: ev.Type, Data: event, Normalized: event}}
	if ev.Type == EventRaw {
		out.ProviderEvent = ev.Event
	}
	if ev.Type == EventMessagePartUpdated && ev.Part != nil && ev.Part.Type == "text" && ev.Delta != nil {
		out.Delta = *ev.Delta
	}
	return out, true
}
