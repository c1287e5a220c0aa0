package routerstub

import (
	"context"
	"net/http"
	"time"
)

// OpenAI Responses API shapes (POST /v1/responses and /responses).

type responsesResponse struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              any               `json:"error"`
	IncompleteDetails  any               `json:"incomplete_details"`
	Instructions       any               `json:"instructions"`
	MaxOutputTokens    any               `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []responsesItem   `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID any               `json:"previous_response_id"`
	Reasoning          map[string]any    `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        float64           `json:"temperature"`
	Text               map[string]any    `json:"text"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []any             `json:"tools"`
	TopP               float64           `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *responsesUsage   `json:"usage"`
	User               any               `json:"user"`
	Metadata           map[string]string `json:"metadata"`
}

type responsesUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// responsesItem is an output item: a message, a function call or
// reasoning. Fields not of the item's type stay empty and are omitted.
type responsesItem struct {
	ID        string               `json:"id"`
	Type      string               `json:"type"`
	Status    string               `json:"status,omitempty"`
	Role      string               `json:"role,omitempty"`
	Content   *[]responsesTextPart `json:"content,omitempty"`
	Summary   *[]responsesTextPart `json:"summary,omitempty"`
	Arguments *string              `json:"arguments,omitempty"`
	CallID    string               `json:"call_id,omitempty"`
	Name      string               `json:"name,omitempty"`
}

type responsesTextPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations *[]any `json:"annotations,omitempty"`
	Logprobs    *[]any `json:"logprobs,omitempty"`
}

// responsesItems renders the reply as output items, complete or (opening)
// as announced by response.output_item.added.
func responsesItems(t *turn, opening bool) []responsesItem {
	items := make([]responsesItem, 0, len(t.reply.parts))
	status := "completed"
	if opening {
		status = "in_progress"
	}
	for i, p := range t.reply.parts {
		text := p.full()
		switch p.kind {
		case partText:
			content := []responsesTextPart{}
			if !opening {
				content = append(content, outputText(text))
			}
			it := responsesItem{ID: t.id("msg_stub", i), Type: "message", Status: status, Role: "assistant", Content: &content}
			items = append(items, it)
		case partThinking:
			summary := []responsesTextPart{}
			if !opening {
				summary = append(summary, responsesTextPart{Type: "summary_text", Text: text})
			}
			it := responsesItem{ID: t.id("rs_stub", i), Type: "reasoning", Summary: &summary}
			items = append(items, it)
		case partTool:
			args := text
			if opening {
				args = ""
			}
			items = append(items, responsesItem{ID: t.id("fc_stub", i), Type: "function_call", Status: status,
				Arguments: &args, CallID: t.id("call_stub", i), Name: p.name})
		}
	}
	return items
}

func outputText(s string) responsesTextPart {
	return responsesTextPart{Type: "output_text", Text: s, Annotations: &[]any{}, Logprobs: &[]any{}}
}

func responsesObject(t *turn, status string, output []responsesItem, usage *responsesUsage) responsesResponse {
	return responsesResponse{
		ID: t.id("resp_stub", 0), Object: "response", CreatedAt: time.Now().Unix(), Status: status,
		Model: t.model, Output: output, ParallelToolCalls: true,
		Reasoning:   map[string]any{"effort": nil, "summary": nil},
		Temperature: 1, Text: map[string]any{"format": map[string]string{"type": "text"}},
		ToolChoice: "auto", Tools: []any{}, TopP: 1, Truncation: "disabled",
		Usage: usage, Metadata: map[string]string{},
	}
}

// responsesStream numbers the events of one streamed response.
type responsesStream struct {
	s   *sse
	seq int
}

func (rs *responsesStream) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = rs.seq
	rs.seq++
	rs.s.event(typ, fields)
}

func responsesAnswer(ctx context.Context, t *turn) {
	usage := &responsesUsage{
		InputTokens: t.usage.InputTokens, InputTokensDetails: map[string]int{"cached_tokens": 0},
		OutputTokens: t.usage.OutputTokens, OutputTokensDetails: map[string]int{"reasoning_tokens": 0},
		TotalTokens: t.usage.InputTokens + t.usage.OutputTokens,
	}
	done := responsesItems(t, false)
	final := responsesObject(t, "completed", done, usage)
	if !t.stream {
		if t.reply.stall > 0 {
			t.sse.w.WriteHeader(http.StatusOK)
			_ = t.sse.rc.Flush()
			t.hold(ctx)
		}
		writeJSON(t.sse.w, http.StatusOK, final)
		return
	}
	t.sse.start()
	rs := &responsesStream{s: t.sse}
	rs.emit("response.created", map[string]any{"response": responsesObject(t, "in_progress", []responsesItem{}, nil)})
	if t.reply.stall > 0 {
		t.hold(ctx)
	}
	rs.emit("response.in_progress", map[string]any{"response": responsesObject(t, "in_progress", []responsesItem{}, nil)})
	opening := responsesItems(t, true)
	for i, p := range t.reply.parts {
		if ctx.Err() != nil {
			return
		}
		item := done[i]
		rs.emit("response.output_item.added", map[string]any{"output_index": i, "item": opening[i]})
		at := map[string]any{"item_id": item.ID, "output_index": i}
		with := func(kv ...any) map[string]any {
			m := make(map[string]any, len(at)+len(kv)/2)
			for k, v := range at {
				m[k] = v
			}
			for j := 0; j+1 < len(kv); j += 2 {
				m[kv[j].(string)] = kv[j+1]
			}
			return m
		}
		switch p.kind {
		case partText:
			rs.emit("response.content_part.added", with("content_index", 0, "part", outputText("")))
			for _, c := range p.chunks {
				if !sleep(ctx, t.reply.gap) {
					return
				}
				rs.emit("response.output_text.delta", with("content_index", 0, "delta", c, "logprobs", []any{}))
			}
			rs.emit("response.output_text.done", with("content_index", 0, "text", p.full(), "logprobs", []any{}))
			rs.emit("response.content_part.done", with("content_index", 0, "part", outputText(p.full())))
		case partThinking:
			empty := responsesTextPart{Type: "summary_text", Text: ""}
			rs.emit("response.reasoning_summary_part.added", with("summary_index", 0, "part", empty))
			for _, c := range p.chunks {
				rs.emit("response.reasoning_summary_text.delta", with("summary_index", 0, "delta", c))
			}
			rs.emit("response.reasoning_summary_text.done", with("summary_index", 0, "text", p.full()))
			rs.emit("response.reasoning_summary_part.done", with("summary_index", 0,
				"part", responsesTextPart{Type: "summary_text", Text: p.full()}))
		case partTool:
			for _, c := range p.chunks {
				rs.emit("response.function_call_arguments.delta", with("delta", c))
			}
			rs.emit("response.function_call_arguments.done", with("arguments", p.full()))
		}
		rs.emit("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	rs.emit("response.completed", map[string]any{"response": final})
}
