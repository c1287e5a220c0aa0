package routerstub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// turn carries what rendering one answer needs.
type turn struct {
	seq          int
	model        string
	reply        Reply
	stream       bool
	includeUsage bool
	usage        Usage
	sse          *sse
}

// id returns a deterministic identifier: prefix, request number and index.
func (t *turn) id(prefix string, i int) string {
	return fmt.Sprintf("%s%06d%02d", prefix, t.seq, i)
}

// hold implements a Stall after the opening of an answer: it waits for the
// stall to pass or the client to go away, then cuts the connection without
// a terminal event. It does not return.
func (t *turn) hold(ctx context.Context) {
	sleep(ctx, t.reply.stall)
	panic(http.ErrAbortHandler)
}

// sse writes server-sent events, flushing after each.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sse {
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// start writes the 200 header of an event stream.
func (s *sse) start() {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	_ = s.rc.Flush()
}

// event writes one event; name "" writes a data-only event (Chat
// Completions style). Write errors mean the client went away; the caller's
// context reports that.
func (s *sse) event(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("routerstub: marshal %T: %v", v, err))
	}
	s.raw(name, string(data))
}

func (s *sse) raw(name, data string) {
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	_ = s.rc.Flush()
}

// writeJSON writes v as a JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("routerstub: marshal %T: %v", v, err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// anthropicErrorTypes maps HTTP status to the Anthropic error type.
var anthropicErrorTypes = map[int]string{
	400: "invalid_request_error",
	401: "authentication_error",
	402: "billing_error",
	403: "permission_error",
	404: "not_found_error",
	413: "request_too_large",
	429: "rate_limit_error",
	500: "api_error",
	504: "timeout_error",
	529: "overloaded_error",
}

// openAIErrorTypes maps HTTP status to the OpenAI error type and code.
var openAIErrorTypes = map[int][2]string{
	400: {"invalid_request_error", ""},
	401: {"invalid_request_error", "invalid_api_key"},
	403: {"invalid_request_error", "unsupported_country_region_territory"},
	404: {"invalid_request_error", "unknown_url"},
	429: {"requests", "rate_limit_exceeded"},
	500: {"server_error", ""},
	503: {"server_error", ""},
}

// writeError answers an error in family's shape. code overrides the
// OpenAI error code picked from the status ("" keeps it). Unless retry is
// set the answer carries `x-should-retry: false`.
func writeError(w http.ResponseWriter, f Family, status int, code, message string, retry bool) {
	if !retry {
		w.Header().Set("X-Should-Retry", "false")
	}
	if f == FamilyGemini {
		writeGeminiError(w, status, message)
		return
	}
	if f == FamilyAnthropic {
		typ, ok := anthropicErrorTypes[status]
		if !ok {
			typ = "api_error"
			if status < 500 {
				typ = "invalid_request_error"
			}
		}
		writeJSON(w, status, anthropicError{
			Type:  "error",
			Error: anthropicErrorBody{Type: typ, Message: message},
		})
		return
	}
	tc, ok := openAIErrorTypes[status]
	if !ok {
		tc = [2]string{"server_error", ""}
		if status < 500 {
			tc = [2]string{"invalid_request_error", ""}
		}
	}
	if code == "" && status != http.StatusUnauthorized {
		code = tc[1]
	}
	body := openAIErrorBody{Message: message, Type: tc[0]}
	if code != "" {
		body.Code = &code
	}
	writeJSON(w, status, openAIError{Error: body})
}

type anthropicError struct {
	Type  string             `json:"type"`
	Error anthropicErrorBody `json:"error"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func missingKeyMessage(f Family) string {
	if f == FamilyAnthropic {
		return "x-api-key header is required"
	}
	return "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
}

func invalidKeyMessage(f Family) string {
	if f == FamilyAnthropic {
		return "invalid x-api-key"
	}
	return "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
}
