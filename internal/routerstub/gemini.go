package routerstub

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// Google Generative Language API (Gemini) shapes:
// POST /v1beta/models/{model}:generateContent,
// POST /v1beta/models/{model}:streamGenerateContent (?alt=sse streams
// server-sent events, each data a GenerateContentResponse) and
// POST /v1beta/models/{model}:countTokens, keyed by `x-goog-api-key` (or
// the `key` query parameter).

type geminiRequest struct {
	Contents         []geminiContent `json:"contents"`
	GenerationConfig struct {
		ResponseMIMEType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
	Tools []struct {
		FunctionDeclarations []json.RawMessage `json:"functionDeclarations"`
	} `json:"tools"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text             string          `json:"text,omitempty"`
	Thought          bool            `json:"thought,omitempty"`
	FunctionCall     *geminiCall     `json:"functionCall,omitempty"`
	FunctionResponse json.RawMessage `json:"functionResponse,omitempty"`
}

type geminiCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// inspectGemini fills what the model and stream flag of a Gemini request
// (named by its path, not its body) and the request's recorded fields.
func inspectGemini(path string, body []byte, w *wireRequest, r *Request) error {
	rest := strings.TrimPrefix(path, "/v1beta/models/")
	model, verb, _ := strings.Cut(rest, ":")
	if m, err := url.PathUnescape(model); err == nil {
		model = m
	}
	w.Model, w.Stream = model, verb == "streamGenerateContent"
	var g geminiRequest
	if err := json.Unmarshal(body, &g); err != nil {
		return err
	}
	r.Model, r.Stream, r.Tools = w.Model, w.Stream, 0
	if gc := g.GenerationConfig; gc.ResponseMIMEType == "application/json" {
		r.Schema = gc.ResponseJSONSchema
		if len(r.Schema) == 0 {
			r.Schema = gc.ResponseSchema
		}
	}
	for _, t := range g.Tools {
		r.Tools += len(t.FunctionDeclarations)
	}
	if n := len(g.Contents); n > 0 {
		for _, p := range g.Contents[n-1].Parts {
			r.ToolResult = r.ToolResult || len(p.FunctionResponse) > 0
		}
	}
	for i := len(g.Contents) - 1; i >= 0 && r.Prompt == ""; i-- {
		c := g.Contents[i]
		if c.Role != "user" {
			continue
		}
		var texts []string
		for _, p := range c.Parts {
			if p.Text != "" && !p.Thought {
				texts = append(texts, p.Text)
			}
		}
		r.Prompt = strings.Join(texts, "\n")
	}
	return nil
}

type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata *geminiUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

type geminiCandidate struct {
	Content      geminiContent `json:"content"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

type geminiUsage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount"`
	TotalTokenCount      int `json:"totalTokenCount"`
}

// geminiParts renders the reply's parts, one per chunk when streaming.
func geminiParts(t *turn, p part, i int, chunked bool) []geminiPart {
	switch p.kind {
	case partTool:
		return []geminiPart{{FunctionCall: &geminiCall{ID: t.id("call_stub", i), Name: p.name, Args: json.RawMessage(p.full())}}}
	}
	texts := []string{p.full()}
	if chunked {
		texts = p.chunks
	}
	out := make([]geminiPart, 0, len(texts))
	for _, s := range texts {
		out = append(out, geminiPart{Text: s, Thought: p.kind == partThinking})
	}
	return out
}

func geminiAnswer(ctx context.Context, t *turn) {
	usage := &geminiUsage{PromptTokenCount: t.usage.InputTokens, CandidatesTokenCount: t.usage.OutputTokens,
		TotalTokenCount: t.usage.InputTokens + t.usage.OutputTokens}
	resp := func(parts []geminiPart, finish string, u *geminiUsage) geminiResponse {
		return geminiResponse{Candidates: []geminiCandidate{{Content: geminiContent{Role: "model", Parts: parts}, FinishReason: finish}},
			UsageMetadata: u, ModelVersion: t.model, ResponseID: t.id("resp_stub", 0)}
	}
	if !t.stream {
		if t.reply.stall > 0 {
			t.sse.w.WriteHeader(http.StatusOK)
			_ = t.sse.rc.Flush()
			t.hold(ctx)
		}
		var parts []geminiPart
		for i, p := range t.reply.parts {
			parts = append(parts, geminiParts(t, p, i, false)...)
		}
		if parts == nil {
			parts = []geminiPart{{Text: ""}}
		}
		writeJSON(t.sse.w, http.StatusOK, resp(parts, "STOP", usage))
		return
	}
	s := t.sse
	s.start()
	if t.reply.stall > 0 {
		t.hold(ctx)
	}
	// Every chunk carries running usage, as Gemini's do; the last one has
	// the finish reason and the final counts.
	running := &geminiUsage{PromptTokenCount: usage.PromptTokenCount}
	var last []geminiPart
	var pending [][]geminiPart
	for i, p := range t.reply.parts {
		for _, gp := range geminiParts(t, p, i, true) {
			pending = append(pending, []geminiPart{gp})
		}
	}
	if len(pending) == 0 {
		pending = [][]geminiPart{{{Text: ""}}}
	}
	last, pending = pending[len(pending)-1], pending[:len(pending)-1]
	for _, parts := range pending {
		if ctx.Err() != nil {
			return
		}
		s.event("", resp(parts, "", running))
	}
	s.event("", resp(last, "STOP", usage))
}

// writeGeminiError answers an error in Google's shape.
func writeGeminiError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": status, "message": message, "status": googleStatus(status),
	}})
}

func googleStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}
