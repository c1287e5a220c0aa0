package routerstub

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// OpenAI Chat Completions shapes (POST /v1/chat/completions and
// /chat/completions).

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             *chatUsage   `json:"usage,omitempty"`
	SystemFingerprint any          `json:"system_fingerprint"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatDelta   `json:"delta,omitempty"`
	Logprobs     any          `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

// chatMessage is the message of a non-streamed completion.
type chatMessage struct {
	Role        string         `json:"role"`
	Content     *string        `json:"content"`
	Refusal     *string        `json:"refusal"`
	Annotations []any          `json:"annotations"`
	ToolCalls   []chatToolCall `json:"tool_calls,omitempty"`
}

// chatDelta is the delta of a streamed chunk.
type chatDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatUsage struct {
	PromptTokens            int            `json:"prompt_tokens"`
	CompletionTokens        int            `json:"completion_tokens"`
	TotalTokens             int            `json:"total_tokens"`
	PromptTokensDetails     map[string]int `json:"prompt_tokens_details"`
	CompletionTokensDetails map[string]int `json:"completion_tokens_details"`
}

// chatAnswer renders the reply. Chat Completions has no reasoning field,
// so thinking parts are left out.
func chatAnswer(ctx context.Context, t *turn) {
	usage := &chatUsage{
		PromptTokens: t.usage.InputTokens, CompletionTokens: t.usage.OutputTokens,
		TotalTokens:             t.usage.InputTokens + t.usage.OutputTokens,
		PromptTokensDetails:     map[string]int{"cached_tokens": 0},
		CompletionTokensDetails: map[string]int{"reasoning_tokens": 0},
	}
	finish := t.stopReason("tool_calls", "stop")
	base := chatCompletion{ID: t.id("chatcmpl-stub", 0), Created: time.Now().Unix(), Model: t.model}
	if !t.stream {
		if t.reply.stall > 0 {
			t.sse.w.WriteHeader(http.StatusOK)
			_ = t.sse.rc.Flush()
			t.hold(ctx)
		}
		msg := &chatMessage{Role: "assistant", Annotations: []any{}}
		var text strings.Builder
		for i, p := range t.reply.parts {
			switch p.kind {
			case partText:
				text.WriteString(p.full())
			case partTool:
				msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: t.id("call_stub", i), Type: "function",
					Function: chatFunction{Name: p.name, Arguments: p.full()}})
			}
		}
		if text.Len() > 0 || len(msg.ToolCalls) == 0 {
			msg.Content = ptr(text.String())
		}
		c := base
		c.Object, c.Usage = "chat.completion", usage
		c.Choices = []chatChoice{{Message: msg, FinishReason: &finish}}
		writeJSON(t.sse.w, http.StatusOK, c)
		return
	}
	s := t.sse
	s.start()
	chunk := func(delta *chatDelta, finish *string) chatCompletion {
		c := base
		c.Object = "chat.completion.chunk"
		c.Choices = []chatChoice{{Delta: delta, FinishReason: finish}}
		return c
	}
	s.event("", chunk(&chatDelta{Role: "assistant", Content: ptr("")}, nil))
	if t.reply.stall > 0 {
		t.hold(ctx)
	}
	tools := 0
	for i, p := range t.reply.parts {
		if ctx.Err() != nil {
			return
		}
		switch p.kind {
		case partText:
			for _, c := range p.chunks {
				if !sleep(ctx, t.reply.gap) {
					return
				}
				s.event("", chunk(&chatDelta{Content: ptr(c)}, nil))
			}
		case partTool:
			idx := tools
			tools++
			s.event("", chunk(&chatDelta{ToolCalls: []chatToolCall{{Index: &idx, ID: t.id("call_stub", i),
				Type: "function", Function: chatFunction{Name: p.name}}}}, nil))
			for _, c := range p.chunks {
				s.event("", chunk(&chatDelta{ToolCalls: []chatToolCall{{Index: &idx,
					Function: chatFunction{Arguments: c}}}}, nil))
			}
		}
	}
	s.event("", chunk(&chatDelta{}, &finish))
	if t.includeUsage {
		c := base
		c.Object, c.Usage, c.Choices = "chat.completion.chunk", usage, []chatChoice{}
		s.event("", c)
	}
	s.raw("", "[DONE]")
}
