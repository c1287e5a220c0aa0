package routerstub

import (
	"context"
	"encoding/json"
	"net/http"
)

// Anthropic Messages API shapes (POST /v1/messages).

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// anthropicSignature is the opaque signature the stub puts on thinking.
const anthropicSignature = "cm91dGVyc3R1Yi10aGlua2luZw=="

func ptr[T any](v T) *T { return &v }

// anthropicBlocks renders the reply's content blocks; empty start blocks
// (for content_block_start) when opening is set.
func anthropicBlocks(t *turn, opening bool) []anthropicBlock {
	blocks := make([]anthropicBlock, 0, len(t.reply.parts))
	for i, p := range t.reply.parts {
		text := p.full()
		if opening {
			text = ""
		}
		switch p.kind {
		case partText:
			blocks = append(blocks, anthropicBlock{Type: "text", Text: ptr(text)})
		case partThinking:
			sig := anthropicSignature
			if opening {
				sig = ""
			}
			blocks = append(blocks, anthropicBlock{Type: "thinking", Thinking: ptr(text), Signature: ptr(sig)})
		case partTool:
			input := json.RawMessage(p.full())
			if opening {
				input = json.RawMessage(`{}`)
			}
			blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: t.id("toolu_stub", i), Name: p.name, Input: input})
		}
	}
	return blocks
}

func (t *turn) stopReason(tool, normal string) string {
	for _, p := range t.reply.parts {
		if p.kind == partTool {
			return tool
		}
	}
	return normal
}

func anthropicAnswer(ctx context.Context, t *turn) {
	u := anthropicUsage{InputTokens: t.usage.InputTokens, OutputTokens: t.usage.OutputTokens}
	msg := anthropicMessage{
		ID: t.id("msg_stub", 0), Type: "message", Role: "assistant", Model: t.model,
		Content: anthropicBlocks(t, false), StopReason: ptr(t.stopReason("tool_use", "end_turn")),
		Usage: u,
	}
	t.sse.w.Header().Set("Request-Id", t.id("req_stub", 0))
	if !t.stream {
		if t.reply.stall > 0 {
			t.sse.w.WriteHeader(http.StatusOK)
			_ = t.sse.rc.Flush()
			t.hold(ctx)
		}
		writeJSON(t.sse.w, http.StatusOK, msg)
		return
	}
	s := t.sse
	s.start()
	opening := msg
	opening.Content, opening.StopReason = []anthropicBlock{}, nil
	opening.Usage.OutputTokens = min(1, u.OutputTokens)
	s.event("message_start", map[string]any{"type": "message_start", "message": opening})
	if t.reply.stall > 0 {
		t.hold(ctx)
	}
	s.event("ping", map[string]string{"type": "ping"})
	starts := anthropicBlocks(t, true)
	for i, p := range t.reply.parts {
		if ctx.Err() != nil {
			return
		}
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": starts[i]})
		for _, c := range p.chunks {
			if p.kind == partText && !sleep(ctx, t.reply.gap) {
				return
			}
			var d map[string]string
			switch p.kind {
			case partText:
				d = map[string]string{"type": "text_delta", "text": c}
			case partThinking:
				d = map[string]string{"type": "thinking_delta", "thinking": c}
			case partTool:
				d = map[string]string{"type": "input_json_delta", "partial_json": c}
			}
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		if p.kind == partThinking {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]string{"type": "signature_delta", "signature": anthropicSignature}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": *msg.StopReason, "stop_sequence": nil},
		"usage": u,
	})
	s.event("message_stop", map[string]string{"type": "message_stop"})
}
