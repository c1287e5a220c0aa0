package routerstub

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// A Reply is one scripted model answer. Build it from the constructors
// (Text, Deltas, Thinking, ToolCall, Join, Error, Stall) and adjust it with
// After; the zero Reply is an empty assistant message.
//
// The same Reply is rendered in the wire shape of whichever API family the
// request came in on, streaming or not.
type Reply struct {
	parts []part
	err   *replyError
	// stall, when set, sends the start of the answer and then holds the
	// connection without further output.
	stall time.Duration
	// delay holds the whole answer back before anything is written.
	delay time.Duration
	// gap is the pause before each streamed text delta (Paced).
	gap time.Duration
}

type partKind int

const (
	partText partKind = iota + 1
	partThinking
	partTool
)

// part is one content block of a reply: text, thinking, or a tool call.
type part struct {
	kind   partKind
	chunks []string // text or thinking in deltas; tool arguments in deltas
	name   string   // tool name
}

func (p part) full() string { return strings.Join(p.chunks, "") }

type replyError struct {
	status  int
	message string
	retry   bool
}

// Text answers s as one text delta.
func Text(s string) Reply { return Deltas(s, 1) }

// Deltas answers s split into n deltas of about equal length (never
// splitting a UTF-8 sequence). n < 1 means 1; n larger than the number of
// runes gives one rune per delta. Non-streaming requests get s whole.
func Deltas(s string, n int) Reply {
	return Reply{parts: []part{{kind: partText, chunks: split(s, n)}}}
}

// Thinking answers s as a reasoning block (Anthropic thinking, Responses
// reasoning summary) in one delta. Chat Completions has no reasoning field
// and leaves it out. Join it before Text or ToolCall.
func Thinking(s string) Reply {
	return Reply{parts: []part{{kind: partThinking, chunks: split(s, 1)}}}
}

// ToolCall answers a call of the tool name with the JSON object args, for
// example ToolCall("Bash", `{"command":"ls"}`) for Claude Code or
// ToolCall("shell", `{"command":["bash","-lc","ls"]}`) for Codex. Streaming
// requests get the arguments in two deltas. args must be a JSON object:
// ToolCall panics otherwise, as regexp.MustCompile does on a bad pattern.
func ToolCall(name, args string) Reply {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		panic(fmt.Sprintf("routerstub.ToolCall(%q): args %q is not a JSON object", name, args))
	}
	return Reply{parts: []part{{kind: partTool, name: name, chunks: split(args, 2)}}}
}

// Join concatenates the content of replies into one answer, in order, for
// example Join(Thinking("plan"), Text("Running ls."), ToolCall(...)). The
// error, stall and delay of the first reply that has one are kept.
func Join(replies ...Reply) Reply {
	var out Reply
	for _, r := range replies {
		out.parts = append(out.parts, r.parts...)
		if out.err == nil {
			out.err = r.err
		}
		if out.stall == 0 {
			out.stall = r.stall
		}
		if out.delay == 0 {
			out.delay = r.delay
		}
		if out.gap == 0 {
			out.gap = r.gap
		}
	}
	return out
}

// Error answers with HTTP status and message in the error shape of the
// request's API family (Anthropic `{"type":"error","error":{...}}`, OpenAI
// `{"error":{...}}`). The answer carries `x-should-retry: false`, which the
// Anthropic and OpenAI SDKs honour, so clients fail at once instead of
// retrying; see Retryable.
func Error(status int, message string) Reply {
	return Reply{err: &replyError{status: status, message: message}}
}

// Retryable drops the `x-should-retry: false` header from an Error reply,
// leaving retries to the client's own policy. Other replies are unchanged.
func (r Reply) Retryable() Reply {
	if r.err != nil {
		e := *r.err
		e.retry = true
		r.err = &e
	}
	return r
}

// Stall starts the answer (status 200 and, for streams, the opening event),
// then writes nothing more until d has passed or the client goes away, and
// then cuts the connection without a terminal event: a model that hung
// mid-answer. d <= 0 holds until the client goes away.
func Stall(d time.Duration) Reply {
	if d <= 0 {
		d = forever
	}
	return Reply{stall: d}
}

// forever is how long a Stall(0) holds: until the request context ends.
const forever = time.Duration(1<<63 - 1)

// After holds the reply back for d before anything is written, as a slow
// model would; the wait ends early if the client goes away.
func (r Reply) After(d time.Duration) Reply {
	r.delay = d
	return r
}

// Paced pauses d before each text delta of a streamed answer
// (Anthropic Messages, Chat Completions and Responses), as a model that
// writes slowly; the answer ends early if the client goes away.
func (r Reply) Paced(d time.Duration) Reply {
	r.gap = d
	return r
}

// Text returns the reply's text content, without thinking or tool calls.
func (r Reply) Text() string {
	var b strings.Builder
	for _, p := range r.parts {
		if p.kind == partText {
			b.WriteString(p.full())
		}
	}
	return b.String()
}

// String describes the reply for logs and test messages.
func (r Reply) String() string {
	var b strings.Builder
	switch {
	case r.err != nil:
		fmt.Fprintf(&b, "error %d %q", r.err.status, r.err.message)
	case r.stall > 0:
		b.WriteString("stall")
	}
	for _, p := range r.parts {
		if b.Len() > 0 {
			b.WriteString(" + ")
		}
		switch p.kind {
		case partText:
			fmt.Fprintf(&b, "text %q in %d deltas", p.full(), len(p.chunks))
		case partThinking:
			fmt.Fprintf(&b, "thinking %q", p.full())
		case partTool:
			fmt.Fprintf(&b, "tool %s %s", p.name, p.full())
		}
	}
	if b.Len() == 0 {
		b.WriteString("empty")
	}
	if r.delay > 0 {
		fmt.Fprintf(&b, " after %s", r.delay)
	}
	if r.gap > 0 {
		fmt.Fprintf(&b, " paced %s", r.gap)
	}
	return b.String()
}

// split cuts s into n pieces of about equal rune count.
func split(s string, n int) []string {
	runes := utf8.RuneCountInString(s)
	if n < 1 {
		n = 1
	}
	if n > runes {
		n = max(runes, 1)
	}
	out := make([]string, 0, n)
	rest := s
	for i := range n {
		want := (runes*(i+1))/n - (runes*i)/n
		cut := 0
		for range want {
			_, size := utf8.DecodeRuneInString(rest[cut:])
			cut += size
		}
		if i == n-1 {
			cut = len(rest)
		}
		out = append(out, rest[:cut])
		rest = rest[cut:]
	}
	return out
}

// tokens is the deterministic token count the stub reports for s: one
// token per started group of four bytes.
func tokens(s string) int { return (len(s) + 3) / 4 }

// outputTokens is the reply's deterministic output token count.
func (r Reply) outputTokens() int {
	n := 0
	for _, p := range r.parts {
		n += tokens(p.full())
		if p.kind == partTool {
			n += tokens(p.name)
		}
	}
	return n
}
