package routerstub

import (
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/internal/modelapi"
)

// Family names the model API a request was addressed to (package
// modelapi's).
type Family = modelapi.Family

// The API families the stub speaks. FamilyNone marks a request on a path
// the stub does not serve (answered 404).
const (
	FamilyAnthropic = modelapi.FamilyAnthropic
	FamilyResponses = modelapi.FamilyResponses
	FamilyChat      = modelapi.FamilyChat
	FamilyGemini    = modelapi.FamilyGemini
	FamilyNone      = modelapi.FamilyNone
)

// AuthKind names where a request presented its key (package modelapi's;
// a key in Gemini's ?key= is recorded as AuthGoogAPIKey).
type AuthKind = modelapi.AuthKind

// The ways a request can present a key.
const (
	AuthNone       = modelapi.AuthNone
	AuthAPIKey     = modelapi.AuthAPIKey
	AuthBearer     = modelapi.AuthBearer
	AuthGoogAPIKey = modelapi.AuthGoogAPIKey
)

// Usage is the token usage the stub reported for a request. The numbers
// are deterministic: input is one token per started four bytes of the
// request body, output one per started four bytes of each reply part.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Request is one recorded request. Key holds the presented key so tests can
// assert it; LogValue leaves it out, and nothing in this package logs it.
type Request struct {
	// Seq numbers requests from 1 in arrival order.
	Seq    int
	Time   time.Time
	Method string
	Path   string
	// Query is the raw query string, e.g. "beta=true".
	Query     string
	UserAgent string
	Family    Family
	// Model is the model the request named; ServedModel the one the answer
	// named (see Options.ServedModel).
	Model       string
	ServedModel string
	Stream      bool
	AuthKind    AuthKind
	Key         string
	// Authorized reports whether Key was accepted.
	Authorized bool
	// Tools is the number of tools the request offered the model.
	Tools int
	// ToolResult reports whether the last message carries a tool result.
	ToolResult bool
	// Prompt is the text of the last user message.
	Prompt string
	// Schema is the JSON schema a structured-output request asked its
	// answer to follow (Gemini's responseJsonSchema or responseSchema);
	// the answer is an instance of it in place of the script's text.
	Schema json.RawMessage
	// Side reports whether the request was classified as a side call (see
	// IsSideCall) rather than a step of the main conversation.
	Side bool
	// Reply describes what the script answered (Reply.String).
	Reply string
	// Status is the HTTP status answered; 0 while the answer is in flight.
	Status int
	Usage  Usage
	Body   []byte
}

// LogValue renders the request for slog without the key or body.
func (r Request) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("seq", r.Seq),
		slog.String("method", r.Method),
		slog.String("path", r.Path),
		slog.String("query", r.Query),
		slog.String("family", string(r.Family)),
		slog.String("model", r.Model),
		slog.String("served_model", r.ServedModel),
		slog.Bool("stream", r.Stream),
		slog.String("auth", string(r.AuthKind)),
		slog.Bool("authorized", r.Authorized),
		slog.Int("tools", r.Tools),
		slog.Bool("tool_result", r.ToolResult),
		slog.Bool("side", r.Side),
		slog.String("reply", r.Reply),
		slog.Int("status", r.Status),
		slog.String("user_agent", r.UserAgent),
	)
}

// requestLog is the concurrency-safe record of requests.
type requestLog struct {
	mu   sync.Mutex
	reqs []*Request
}

func (l *requestLog) add(r *Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Seq = len(l.reqs) + 1
	l.reqs = append(l.reqs, r)
}

// update changes a recorded request under the log's lock.
func (l *requestLog) update(r *Request, f func(*Request)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(r)
}

func (l *requestLog) snapshot() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Request, len(l.reqs))
	for i, r := range l.reqs {
		out[i] = *r
	}
	return out
}

// wireRequest is the union of the request fields the stub reads from the
// three API families.
type wireRequest struct {
	Model         string            `json:"model"`
	Stream        bool              `json:"stream"`
	Tools         []json.RawMessage `json:"tools"`
	Messages      []wireMessage     `json:"messages"` // anthropic, chat
	Input         json.RawMessage   `json:"input"`    // responses
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"` // chat
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type wireItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Text    string          `json:"text"`
}

// inspect fills the request fields read from the body: the last message's
// tool-result flag and the last user prompt.
func inspect(f Family, w *wireRequest, r *Request) {
	r.Model, r.Stream, r.Tools = w.Model, w.Stream, len(w.Tools)
	switch f {
	case FamilyAnthropic, FamilyChat:
		if n := len(w.Messages); n > 0 {
			last := w.Messages[n-1]
			r.ToolResult = last.Role == "tool" || hasItem(last.Content, "tool_result")
		}
		for i := len(w.Messages) - 1; i >= 0; i-- {
			if m := w.Messages[i]; m.Role == "user" && !hasItem(m.Content, "tool_result") {
				r.Prompt = contentText(m.Content)
				break
			}
		}
	case FamilyResponses:
		var s string
		if json.Unmarshal(w.Input, &s) == nil {
			r.Prompt = s
			return
		}
		var items []wireItem
		_ = json.Unmarshal(w.Input, &items)
		if n := len(items); n > 0 {
			r.ToolResult = strings.HasSuffix(items[n-1].Type, "_call_output")
		}
		for i := len(items) - 1; i >= 0; i-- {
			if it := items[i]; it.Role == "user" && (it.Type == "" || it.Type == "message") {
				r.Prompt = contentText(it.Content)
				break
			}
		}
	}
}

// hasItem reports whether a content array holds a block of type typ.
func hasItem(content json.RawMessage, typ string) bool {
	var items []wireItem
	if json.Unmarshal(content, &items) != nil {
		return false
	}
	for _, it := range items {
		if it.Type == typ {
			return true
		}
	}
	return false
}

// contentText flattens message content (a string or an array of blocks
// with text) to text.
func contentText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var items []wireItem
	_ = json.Unmarshal(content, &items)
	var texts []string
	for _, it := range items {
		if it.Text != "" {
			texts = append(texts, it.Text)
		}
	}
	return strings.Join(texts, "\n")
}
