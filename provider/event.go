package provider

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Event types. Canonical streams carry the bridge's own types; legacy
// streams are mapped onto message.part.updated, usage, status and result.
const (
	EventMessagePart = wire.EventMessagePartUpdated
	EventUsage       = wire.UsagePayloadType
	EventStatus      = wire.EventStatus
	EventResult      = "result"
	EventInteraction = wire.EventInteraction
	// EventExecutionStarted opens a turn of the sandbox provider: the run
	// was admitted, and Model names the model the environment declared.
	EventExecutionStarted = "execution.started"
)

// Run statuses carried by status events.
const (
	StatusStarted    = wire.CanonicalStarted
	StatusProcessing = wire.CanonicalProcessing
	StatusCompleted  = wire.CanonicalCompleted
	StatusFailed     = wire.CanonicalFailed
	StatusCancelled  = wire.CanonicalCancelled
)

// Event is one event of a run. ID is its replay cursor: pass it as `since`
// to Session.Events to resume after it. Fields other than ID, Type and the
// run coordinates are set per type.
type Event struct {
	ID          string
	Type        string
	RunID       string
	SessionID   string
	ExecutionID string

	// Part is the updated message part of a message.part.updated event.
	Part *Part
	// Delta is the text a text part gained; only text parts (not reasoning,
	// not tools) count toward a turn's visible text.
	Delta string

	// Status and Detail are set on status events.
	Status string
	Detail string

	// Usage and ModelRequests are set where the bridge reported them (see
	// Usage for what is measured). ModelRequests is nil unless the bridge
	// counted an exact non-negative integer.
	Usage         *Usage
	ModelRequests *int64
	// ProviderModels are the models the model API itself said served the
	// turn; a requested model name never appears here.
	ProviderModels []string

	// Interaction is the request of an interaction event, its digest and
	// binding checked; answer it with NewInteractionCommand.
	Interaction *wire.InteractionRequest

	// Model is the declared model route of an execution.started event.
	Model string

	// FinalText and FinishReason are set on the result event.
	FinalText    string
	FinishReason string

	// EventID and Sequence are the canonical envelope's identity; empty
	// for legacy frames.
	EventID  string
	Sequence int64
	// Raw is the canonical event object or the legacy chunk.
	Raw json.RawMessage
}

// Frame is the bridge's stored sequence number of the frame ev came in:
// its canonical Sequence, or the frame part of its ID ("7" of "7:1"); 0
// for an event the client made (a stream's opening, its result).
func (ev Event) Frame() int64 {
	if ev.Sequence > 0 {
		return ev.Sequence
	}
	id, _, _ := strings.Cut(ev.ID, ":")
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Part is a message part: text, reasoning or a tool call (wire.Part). In a
// canonical stream it names its session and message; a text or reasoning
// part's Text is its whole text so far (the event's Delta is what it
// adds); a tool part's State follows its call from pending to running to
// completed or error.
type Part = wire.Part

// Tool states of a ToolState.
const (
	ToolPending   = wire.ToolPending
	ToolRunning   = wire.ToolRunning
	ToolCompleted = wire.ToolCompleted
	ToolError     = wire.ToolError
)

// ToolState is the state of a tool part (wire.ToolState): its input, then
// its output once completed or its error once failed.
type ToolState = wire.ToolState

// Usage provenances.
const (
	// UsageMeasured is usage the bridge measured: it said estimated:false
	// and gave real input and output totals.
	UsageMeasured = "measured"
	// UsageEstimated is usage the bridge said it estimated.
	UsageEstimated = "estimated"
	// UsageUnknown is usage whose provenance the bridge did not state.
	UsageUnknown = "unknown"
)

// Usage is token usage. Totals the bridge did not report are nil, never a
// made-up zero; a reported zero is kept.
type Usage struct {
	InputTokens           int64    `json:"inputTokens"`
	OutputTokens          int64    `json:"outputTokens"`
	TotalTokens           *int64   `json:"totalTokens,omitempty"`
	CacheReadInputTokens  *int64   `json:"cacheReadInputTokens,omitempty"`
	CacheWriteInputTokens *int64   `json:"cacheWriteInputTokens,omitempty"`
	Cost                  *float64 `json:"cost,omitempty"`
	// Provenance is UsageMeasured, UsageEstimated or UsageUnknown.
	Provenance string `json:"provenance"`
}

// usageFromChunk reads an OpenAI usage object. It returns nil unless both
// input and output totals are non-negative integers.
func usageFromChunk(raw json.RawMessage) (*Usage, *int64) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, nil
	}
	requests := count(m["model_requests"])
	in := first(count(m["prompt_tokens"]), count(m["input_tokens"]))
	out := first(count(m["completion_tokens"]), count(m["output_tokens"]))
	if in == nil || out == nil {
		return nil, requests
	}
	u := &Usage{
		InputTokens:           *in,
		OutputTokens:          *out,
		TotalTokens:           count(m["total_tokens"]),
		CacheReadInputTokens:  count(m["cache_read_input_tokens"]),
		CacheWriteInputTokens: first(count(m["cache_write_input_tokens"]), count(m["cache_creation_input_tokens"])),
		Cost:                  cost(m["cost"]),
		Provenance:            UsageUnknown,
	}
	var est bool
	if v, ok := m["estimated"]; ok && json.Unmarshal(v, &est) == nil {
		if est {
			u.Provenance = UsageEstimated
		} else {
			u.Provenance = UsageMeasured
		}
	}
	return u, requests
}

// count reads a non-negative integer that fits a float64 exactly.
func count(raw json.RawMessage) *int64 {
	if len(raw) == 0 {
		return nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f < 0 || f != math.Trunc(f) || f > 1<<53-1 {
		return nil
	}
	n := int64(f)
	return &n
}

func cost(raw json.RawMessage) *float64 {
	var f float64
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil
	}
	return &f
}

func first[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// AddUsage sums two usages (next may be nil). Optional totals stay nil only when both are
// nil; the provenance is the weakest of the two.
func AddUsage(cur, next *Usage) *Usage {
	if next == nil {
		return cur
	}
	if cur == nil {
		c := *next
		return &c
	}
	sum := &Usage{
		InputTokens:           cur.InputTokens + next.InputTokens,
		OutputTokens:          cur.OutputTokens + next.OutputTokens,
		TotalTokens:           addOpt(cur.TotalTokens, next.TotalTokens),
		CacheReadInputTokens:  addOpt(cur.CacheReadInputTokens, next.CacheReadInputTokens),
		CacheWriteInputTokens: addOpt(cur.CacheWriteInputTokens, next.CacheWriteInputTokens),
		Provenance:            cur.Provenance,
	}
	if cur.Cost != nil || next.Cost != nil {
		c := deref64(cur.Cost) + deref64(next.Cost)
		sum.Cost = &c
	}
	rank := map[string]int{UsageMeasured: 0, UsageEstimated: 1, UsageUnknown: 2}
	if rank[next.Provenance] > rank[sum.Provenance] {
		sum.Provenance = next.Provenance
	}
	return sum
}

func addOpt(a, b *int64) *int64 {
	if a == nil && b == nil {
		return nil
	}
	n := deref(a) + deref(b)
	return &n
}

func deref64(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
