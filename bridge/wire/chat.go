package wire

import (
	"encoding/json"
	"math"
)

// Message is one chat message. Content is a string, null, or an array of
// content parts; ContentText flattens it.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
}

// ContentPart is one element of an array message content.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// ChatRequest is the body of POST /v1/chat/completions: the OpenAI fields
// the bridge uses plus the bridge's extras. Unknown fields are accepted
// (OpenAI clients send many) and count toward the request digest.
type ChatRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	Stream   bool      `json:"stream,omitempty"`

	SessionID     string            `json:"session_id,omitempty"`
	RunID         string            `json:"run_id,omitempty"`
	Provider      string            `json:"provider,omitempty"`
	EnvironmentID string            `json:"environment_id,omitempty"`
	ExecutionID   string            `json:"execution_id,omitempty"`
	Cwd           string            `json:"cwd,omitempty"`
	AgentProfile  json.RawMessage   `json:"agent_profile,omitempty"`
	Execution     json.RawMessage   `json:"execution,omitempty"`
	Interactions  json.RawMessage   `json:"interactions,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Metadata      map[string]any    `json:"metadata,omitempty"`
	Effort        string            `json:"effort,omitempty"`
	Mode          string            `json:"mode,omitempty"`
}

// ToolCall is an OpenAI tool call, complete or (in a chunk) a fragment:
// streamed fragments share Index and concatenate Function.Arguments.
type ToolCall struct {
	Index    int              `json:"index"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function ToolCallFunction `json:"function"`
}

// ToolCallFunction is the function part of a tool call.
type ToolCallFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ToolResult is the outcome of a tool the harness ran itself, reported in
// a chunk delta so observers see the agent's work; OpenAI clients ignore it.
type ToolResult struct {
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
	IsError    bool   `json:"is_error,omitempty"`
}

// Delta is the incremental part of a streamed choice.
type Delta struct {
	Role        string       `json:"role,omitempty"`
	Content     string       `json:"content,omitempty"`
	Reasoning   string       `json:"reasoning,omitempty"`
	ToolCalls   []ToolCall   `json:"tool_calls,omitempty"`
	ToolResults []ToolResult `json:"tool_results,omitempty"`
}

// ChunkChoice is one choice of a chunk.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
	FinishError     = "error"
	FinishTimeout   = "timeout"
)

// Usage is token usage. Measured usage has Estimated set to false
// explicitly and real input and output totals; an absent Estimated means
// unknown provenance. PromptTokens counts every input token, cached ones
// included; the cache fields break it down. Cost is a dollar figure only
// when CostKnown, with the receipt it came from (CostProvenance); the
// bridge prices nothing itself, so without a receipt CostKnown is false
// and Cost absent. CostScope "total" says the figures cover the whole turn.
type Usage struct {
	PromptTokens          int64    `json:"prompt_tokens"`
	CompletionTokens      int64    `json:"completion_tokens"`
	TotalTokens           int64    `json:"total_tokens"`
	ModelRequests         *int64   `json:"model_requests,omitempty"`
	CacheReadInputTokens  *int64   `json:"cache_read_input_tokens,omitempty"`
	CacheWriteInputTokens *int64   `json:"cache_write_input_tokens,omitempty"`
	Cost                  *float64 `json:"cost,omitempty"`
	CostKnown             bool     `json:"cost_known"`
	CostProvenance        string   `json:"cost_provenance,omitempty"`
	CostScope             string   `json:"cost_scope,omitempty"`
	Estimated             *bool    `json:"estimated,omitempty"`
}

// Cost provenances of a known cost, and the scope of a turn's usage.
const (
	CostProviderReceipt = "provider-receipt"
	CostBillingReceipt  = "billing-receipt"
	CostScopeTotal      = "total"
)

// TurnTotal returns a copy of a turn's whole usage with its cost stated
// as the wire states it: known only with a finite, non-negative figure
// from a receipt; otherwise unknown, with no figure. Its scope is total.
func (u *Usage) TurnTotal() *Usage {
	if u == nil {
		return nil
	}
	out := *u
	receipt := u.CostProvenance == CostProviderReceipt || u.CostProvenance == CostBillingReceipt
	if !u.CostKnown || !receipt || u.Cost == nil || !(*u.Cost >= 0) || math.IsInf(*u.Cost, 0) {
		out.Cost, out.CostKnown, out.CostProvenance = nil, false, ""
	}
	out.CostScope = CostScopeTotal
	return &out
}

// Chunk is one chat.completion.chunk data frame. A usage-only chunk has
// an empty (not null) Choices. ProviderModels lists the models the model
// API itself said served the turn; it appears on the terminal chunk.
type Chunk struct {
	ID             string        `json:"id"`
	Object         string        `json:"object"`
	Created        int64         `json:"created"`
	Model          string        `json:"model"`
	Choices        []ChunkChoice `json:"choices"`
	Usage          *Usage        `json:"usage,omitempty"`
	ProviderModels []string      `json:"provider_models,omitempty"`
}

// ChunkObject is the `object` of a chunk.
const ChunkObject = "chat.completion.chunk"

// CompletionObject is the `object` of a non-streamed completion.
const CompletionObject = "chat.completion"

// Completion is the answer of a non-streamed chat completion.
type Completion struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"`
	Created        int64              `json:"created"`
	Model          string             `json:"model"`
	Choices        []CompletionChoice `json:"choices"`
	Usage          *Usage             `json:"usage,omitempty"`
	ProviderModels []string           `json:"provider_models,omitempty"`
	Error          *ErrorBody         `json:"error,omitempty"`
}

// CompletionChoice is one choice of a Completion.
type CompletionChoice struct {
	Index        int               `json:"index"`
	Message      CompletionMessage `json:"message"`
	FinishReason string            `json:"finish_reason"`
}

// CompletionMessage is the assistant message of a Completion.
type CompletionMessage struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// DoneData is the data of the frame that ends a legacy stream.
const DoneData = "[DONE]"

// ContentText flattens a message content to text: a JSON string, or the
// text parts of an array joined by newlines; null and other parts give "".
func ContentText(content []byte) string {
	if len(content) == 0 {
		return ""
	}
	var s string
	if err := json.Unmarshal(content, &s); err == nil {
		return s
	}
	var parts []ContentPart
	if err := json.Unmarshal(content, &parts); err != nil {
		return ""
	}
	var b []byte
	for _, p := range parts {
		if p.Type != "text" {
			continue
		}
		if len(b) > 0 {
			b = append(b, '\n')
		}
		b = append(b, p.Text...)
	}
	return string(b)
}

// MergeToolCalls folds streamed tool call fragments (frags, in stream
// order) into the whole calls so far, by index.
func MergeToolCalls(calls, frags []ToolCall) []ToolCall {
	for _, f := range frags {
		i := -1
		for j := range calls {
			if calls[j].Index == f.Index {
				i = j
			}
		}
		if i < 0 {
			calls = append(calls, ToolCall{Index: f.Index, Type: "function"})
			i = len(calls) - 1
		}
		if f.ID != "" {
			calls[i].ID = f.ID
		}
		if f.Function.Name != "" {
			calls[i].Function.Name = f.Function.Name
		}
		calls[i].Function.Arguments += f.Function.Arguments
	}
	return calls
}
