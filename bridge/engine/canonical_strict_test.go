package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// This file mirrors the agent interface's RuntimeEventEnvelopeSchema for
// the members of its CanonicalStreamEventSchema union the bridge emits:
// strict objects (no key but those named, spelled exactly), required and
// optional fields, and the contract's bounds. checkEnvelope is what the
// canonical tests run every frame through, so that a renamed or added
// field, or a value out of bounds, fails in go test.

// Contract bounds, restated here rather than taken from the code under
// test. Lengths are UTF-16 code units, as the interface's bounded JSON
// counts them; zod's string schemas count code points, which is never
// more, so a string within these bounds passes both.
const (
	zMaxString     = 16_384
	zMaxIdentifier = 512
	zMaxArray      = 1_024
	zMaxMap        = 256
	zMaxDepth      = 16
	zMaxNodes      = 8_192
	zMaxSafeInt    = 1<<53 - 1
	zMaxTimestamp  = 64
)

// zEnvelope is RuntimeEventEnvelopeSchema. A field without omitempty is
// required; json.RawMessage fields are checked by hand.
type zEnvelope struct {
	RunID      string          `json:"runId"`
	EventID    string          `json:"eventId"`
	Sequence   json.Number     `json:"sequence"`
	Cursor     *string         `json:"cursor,omitempty"`
	OccurredAt *string         `json:"occurredAt,omitempty"`
	ReceivedAt string          `json:"receivedAt"`
	Event      json.RawMessage `json:"event"`
}

type zType struct {
	Type string `json:"type"`
}

type zPartEvent struct {
	Type  string          `json:"type"`
	Part  json.RawMessage `json:"part"`
	Delta *string         `json:"delta,omitempty"`
}

type zStatusEvent struct {
	Type   string  `json:"type"`
	Status string  `json:"status"`
	Detail *string `json:"detail,omitempty"`
}

type zWarningEvent struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

type zRawEvent struct {
	Type    string          `json:"type"`
	Backend string          `json:"backend"`
	Event   json.RawMessage `json:"event"`
}

type zSessionUpdatedEvent struct {
	Type      string          `json:"type"`
	SessionID string          `json:"sessionId"`
	Title     *string         `json:"title,omitempty"`
	Time      json.RawMessage `json:"time,omitempty"`
}

type zSessionTime struct {
	Created *float64 `json:"created,omitempty"`
	Updated *float64 `json:"updated,omitempty"`
}

type zInteractionEvent struct {
	Type    string          `json:"type"`
	Request json.RawMessage `json:"request"`
}

type zInteractionCancelEvent struct {
	Type   string  `json:"type"`
	ID     string  `json:"id"`
	Reason *string `json:"reason,omitempty"`
}

// zTextPart is a text or reasoning part.
type zTextPart struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	Type      string `json:"type"`
	Text      string `json:"text"`
}

type zToolPart struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionID"`
	MessageID string          `json:"messageID"`
	Type      string          `json:"type"`
	CallID    *string         `json:"callID,omitempty"`
	Tool      string          `json:"tool"`
	State     json.RawMessage `json:"state"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

type zPending struct {
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input"`
	Raw    *string         `json:"raw,omitempty"`
}

type zRunning struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Title    *string         `json:"title,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Time     *struct {
		Start float64 `json:"start"`
	} `json:"time,omitempty"`
}

type zCompleted struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Output   json.RawMessage `json:"output"`
	Title    *string         `json:"title,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Time     json.RawMessage `json:"time,omitempty"`
}

type zToolError struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Error    *string         `json:"error,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Time     json.RawMessage `json:"time,omitempty"`
}

// zInteractionRequest is InteractionRequestSchema; its answer spec and
// default are checked as bounded JSON, their shape being pinned by
// bridge/wire's tests.
type zInteractionRequest struct {
	ID              string          `json:"id"`
	Kind            string          `json:"kind"`
	Title           string          `json:"title"`
	Body            *string         `json:"body,omitempty"`
	Subject         json.RawMessage `json:"subject,omitempty"`
	AnswerSpec      json.RawMessage `json:"answerSpec"`
	ResponseScopes  []string        `json:"responseScopes,omitempty"`
	AllowedOutcomes []string        `json:"allowedOutcomes,omitempty"`
	Default         json.RawMessage `json:"default,omitempty"`
	TimeoutMs       *json.Number    `json:"timeoutMs,omitempty"`
	OnTimeout       *string         `json:"onTimeout,omitempty"`
	Binding         json.RawMessage `json:"binding"`
	RequestDigest   string          `json:"requestDigest"`
}

type zBinding struct {
	RunID         string `json:"runId"`
	Provider      string `json:"provider"`
	EnvironmentID string `json:"environmentId"`
	SessionID     string `json:"sessionId"`
	ExecutionID   string `json:"executionId"`
	InteractionID string `json:"interactionId"`
}

type zSubject struct {
	Type     string          `json:"type"`
	ToolName *string         `json:"toolName,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Command  *string         `json:"command,omitempty"`
	Path     *string         `json:"path,omitempty"`
	Preview  *string         `json:"preview,omitempty"`
	URI      *string         `json:"uri,omitempty"`
}

// zStrict decodes raw into dst (a pointer to a struct) as z.strictObject
// reads it: raw is an object, each key is the exact json name of one of
// dst's fields, and each field without omitempty is present. (encoding/json
// alone matches names case-insensitively, which would let a rename pass.)
func zStrict(raw json.RawMessage, dst any) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return fmt.Errorf("not an object: %s", abbreviate(raw))
	}
	rt := reflect.TypeOf(dst).Elem()
	known := map[string]bool{}
	for i := range rt.NumField() {
		name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		known[name] = true
		if _, ok := keys[name]; !ok && !strings.Contains(opts, "omitempty") {
			return fmt.Errorf("required key %q missing", name)
		}
	}
	for k := range keys {
		if !known[k] {
			return fmt.Errorf("unknown key %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	return nil
}

func abbreviate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// zLen is a string's length as JavaScript counts it.
func zLen(s string) int { return len(utf16.Encode([]rune(s))) }

// zSpace is JavaScript's String.prototype.trim set: WhiteSpace and
// LineTerminator.
func zSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

func zString(what, s string) error {
	if n := zLen(s); n > zMaxString {
		return fmt.Errorf("%s: %d characters, more than %d", what, n, zMaxString)
	}
	return nil
}

func zIdentifier(what, s string) error {
	switch n := zLen(s); {
	case n == 0:
		return fmt.Errorf("%s: empty identifier", what)
	case n > zMaxIdentifier:
		return fmt.Errorf("%s: identifier of %d characters, more than %d", what, n, zMaxIdentifier)
	case strings.TrimFunc(s, zSpace) != s:
		return fmt.Errorf("%s: identifier %q has outer whitespace", what, s)
	}
	return nil
}

var zTimestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?Z$`)

func zDatetime(what, s string) error {
	if len(s) > zMaxTimestamp || !zTimestamp.MatchString(s) {
		return fmt.Errorf("%s: %q is not an ISO datetime in UTC", what, s)
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// zJSON is isBoundedJsonValue: depth, node count (an object or array
// counts twice: entered and left), array and map sizes, key and string
// lengths. A record must be an object.
func zJSON(what string, raw json.RawMessage, record bool) error {
	if len(raw) == 0 {
		return fmt.Errorf("%s: missing", what)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, ok := v.(map[string]any); record && !ok {
		return fmt.Errorf("%s: not an object", what)
	}
	nodes := 0
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		nodes++
		switch x := v.(type) {
		case string:
			return zString(what, x)
		case json.Number:
			if f, err := x.Float64(); err != nil || math.IsInf(f, 0) {
				return fmt.Errorf("%s: number %s is not finite", what, x)
			}
		case []any, map[string]any:
			nodes++
			if depth >= zMaxDepth {
				return fmt.Errorf("%s: deeper than %d", what, zMaxDepth)
			}
		}
		switch x := v.(type) {
		case []any:
			if len(x) > zMaxArray {
				return fmt.Errorf("%s: array of %d entries, more than %d", what, len(x), zMaxArray)
			}
			for _, e := range x {
				if err := walk(e, depth+1); err != nil {
					return err
				}
			}
		case map[string]any:
			if len(x) > zMaxMap {
				return fmt.Errorf("%s: object of %d keys, more than %d", what, len(x), zMaxMap)
			}
			for k, e := range x {
				if zLen(k) > zMaxIdentifier {
					return fmt.Errorf("%s: key of %d characters, more than %d", what, zLen(k), zMaxIdentifier)
				}
				if err := walk(e, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(v, 0); err != nil {
		return err
	}
	if nodes > zMaxNodes {
		return fmt.Errorf("%s: %d nodes, more than %d", what, nodes, zMaxNodes)
	}
	return nil
}

// checkEnvelope reports why RuntimeEventEnvelopeSchema would reject
// frame, nil if it would accept it.
func checkEnvelope(frame []byte) error {
	var env zEnvelope
	if err := zStrict(frame, &env); err != nil {
		return fmt.Errorf("envelope: %w", err)
	}
	seq, err := env.Sequence.Int64()
	if err != nil || seq < 0 || seq > zMaxSafeInt {
		return fmt.Errorf("envelope: sequence %s is not a non-negative safe integer", env.Sequence)
	}
	errs := []error{zIdentifier("runId", env.RunID), zIdentifier("eventId", env.EventID), zDatetime("receivedAt", env.ReceivedAt)}
	if env.Cursor != nil {
		errs = append(errs, zIdentifier("cursor", *env.Cursor))
	}
	if env.OccurredAt != nil {
		errs = append(errs, zDatetime("occurredAt", *env.OccurredAt))
	}
	errs = append(errs, checkEvent(env.Event))
	return errors.Join(errs...)
}

// checkEvent checks a member of CanonicalStreamEventSchema.
func checkEvent(raw json.RawMessage) error {
	var t zType
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	switch t.Type {
	case "message.part.updated":
		var ev zPartEvent
		if err := zStrict(raw, &ev); err != nil {
			return fmt.Errorf("%s: %w", t.Type, err)
		}
		var errs []error
		if ev.Delta != nil {
			errs = append(errs, zString("delta", *ev.Delta))
		}
		return errors.Join(append(errs, checkPart(ev.Part))...)
	case "status":
		var ev zStatusEvent
		if err := zStrict(raw, &ev); err != nil {
			return fmt.Errorf("%s: %w", t.Type, err)
		}
		if !slices.Contains([]string{"started", "processing", "completed", "failed", "cancelled"}, ev.Status) {
			return fmt.Errorf("status: %q is not a status", ev.Status)
		}
		if ev.Detail != nil {
			return zString("status detail", *ev.Detail)
		}
	case "warning":
		var ev zWarningEvent
		if err := zStrict(raw, &ev); err != nil {
			return fmt.Errorf("%s: %w", t.Type, err)
		}
		return errors.Join(zIdentifier("warning code", ev.Code), zString("warning message", ev.Message))
	case "raw":
		var ev zRawEvent
		if err := zStrict(raw, &ev); err != nil {
			return fmt.Errorf("%s: %w", t.Type, err)
		}
		return errors.Join(zIdentifier("raw backend", ev.Backend), zJSON("raw event", ev.Event, false))
	case "session.updated":
		var ev zSessionUpdatedEvent
		if err := zStrict(raw, &ev); err != nil {
			return fmt.Errorf("%s: %w", t.Type, err)
		}
		errs := []error{zIdentifier("sessionId", ev.SessionID)}
		if ev.Title != nil {
			errs = append(errs, zString("session title", *ev.Title))
		}
		if ev.Time != nil {
			errs = append(errs, zStrict(ev.Time, &zSessionTime{}))
		}
		return errors.Join(errs...)
	case "interaction":
		var ev zInteractionEvent
		if err := zStrict(raw, &ev); err != nil {
			return fmt.Errorf("%s: %w", t.Type, err)
		}
		return checkInteractionRequest(ev.Request)
	case "interaction.cancel":
		var ev zInteractionCancelEvent
		if err := zStrict(raw, &ev); err != nil {
			return fmt.Errorf("%s: %w", t.Type, err)
		}
		errs := []error{zIdentifier("interaction.cancel id", ev.ID)}
		if ev.Reason != nil {
			errs = append(errs, zString("interaction.cancel reason", *ev.Reason))
		}
		return errors.Join(errs...)
	default:
		return fmt.Errorf("event type %q is not a member the bridge emits", t.Type)
	}
	return nil
}

// checkPart checks a message part and, for a tool part, its state.
func checkPart(raw json.RawMessage) error {
	var t zType
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("part: %w", err)
	}
	switch t.Type {
	case "text", "reasoning":
		var p zTextPart
		if err := zStrict(raw, &p); err != nil {
			return fmt.Errorf("%s part: %w", t.Type, err)
		}
		return errors.Join(zIdentifier("part id", p.ID), zIdentifier("part sessionID", p.SessionID),
			zIdentifier("part messageID", p.MessageID), zString("part text", p.Text))
	case "tool":
		var p zToolPart
		if err := zStrict(raw, &p); err != nil {
			return fmt.Errorf("tool part: %w", err)
		}
		errs := []error{zIdentifier("part id", p.ID), zIdentifier("part sessionID", p.SessionID),
			zIdentifier("part messageID", p.MessageID), zIdentifier("part tool", p.Tool), checkToolState(p.State)}
		if p.CallID != nil {
			errs = append(errs, zIdentifier("part callID", *p.CallID))
		}
		if p.Metadata != nil {
			errs = append(errs, zJSON("part metadata", p.Metadata, true))
		}
		return errors.Join(errs...)
	default:
		return fmt.Errorf("part type %q is not one the bridge emits", t.Type)
	}
}

func checkToolState(raw json.RawMessage) error {
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("tool state: %w", err)
	}
	var errs []error
	optional := func(what string, s *string) {
		if s != nil {
			errs = append(errs, zString(what, *s))
		}
	}
	optionalJSON := func(what string, raw json.RawMessage, record bool) {
		if raw != nil {
			errs = append(errs, zJSON(what, raw, record))
		}
	}
	switch st.Status {
	case "pending":
		var s zPending
		if err := zStrict(raw, &s); err != nil {
			return fmt.Errorf("pending state: %w", err)
		}
		errs = append(errs, zJSON("tool input", s.Input, true))
		optional("tool raw", s.Raw)
	case "running":
		var s zRunning
		if err := zStrict(raw, &s); err != nil {
			return fmt.Errorf("running state: %w", err)
		}
		errs = append(errs, zJSON("tool input", s.Input, true))
		optional("tool title", s.Title)
		optionalJSON("tool metadata", s.Metadata, true)
	case "completed":
		var s zCompleted
		if err := zStrict(raw, &s); err != nil {
			return fmt.Errorf("completed state: %w", err)
		}
		errs = append(errs, zJSON("tool input", s.Input, true), zJSON("tool output", s.Output, false))
		optional("tool title", s.Title)
		optionalJSON("tool metadata", s.Metadata, true)
	case "error", "failed":
		var s zToolError
		if err := zStrict(raw, &s); err != nil {
			return fmt.Errorf("error state: %w", err)
		}
		errs = append(errs, zJSON("tool input", s.Input, true))
		optional("tool error", s.Error)
		optionalJSON("tool output", s.Output, false)
		optionalJSON("tool metadata", s.Metadata, true)
	default:
		return fmt.Errorf("tool state status %q is not a status", st.Status)
	}
	return errors.Join(errs...)
}

var zDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// checkInteractionRequest checks InteractionRequestSchema's fields, its
// binding to its own id, and its digest.
func checkInteractionRequest(raw json.RawMessage) error {
	var r zInteractionRequest
	if err := zStrict(raw, &r); err != nil {
		return fmt.Errorf("interaction request: %w", err)
	}
	var b zBinding
	if err := zStrict(r.Binding, &b); err != nil {
		return fmt.Errorf("interaction binding: %w", err)
	}
	errs := []error{zIdentifier("request id", r.ID), zIdentifier("request kind", r.Kind), zString("request title", r.Title),
		zJSON("answerSpec", r.AnswerSpec, true),
		zIdentifier("binding runId", b.RunID), zIdentifier("binding provider", b.Provider),
		zIdentifier("binding environmentId", b.EnvironmentID), zIdentifier("binding sessionId", b.SessionID),
		zIdentifier("binding executionId", b.ExecutionID), zIdentifier("binding interactionId", b.InteractionID)}
	if r.Title == "" {
		errs = append(errs, errors.New("request title: empty"))
	}
	if b.InteractionID != r.ID {
		errs = append(errs, fmt.Errorf("binding interactionId %q is not the request id %q", b.InteractionID, r.ID))
	}
	if r.Body != nil {
		errs = append(errs, zString("request body", *r.Body))
	}
	if r.ResponseScopes != nil {
		if len(r.ResponseScopes) == 0 || len(r.ResponseScopes) > zMaxArray {
			errs = append(errs, fmt.Errorf("responseScopes: %d entries", len(r.ResponseScopes)))
		}
		for i, s := range r.ResponseScopes {
			if !slices.Contains([]string{"interaction", "session", "persistent"}, s) || slices.Index(r.ResponseScopes, s) != i {
				errs = append(errs, fmt.Errorf("responseScopes: %q is unknown or repeated", s))
			}
		}
	}
	if r.Subject != nil {
		var s zSubject
		if err := zStrict(r.Subject, &s); err != nil {
			return fmt.Errorf("interaction subject: %w", err)
		}
		switch {
		case s.Type == "tool" && s.ToolName != nil && s.Command == nil && s.Path == nil && s.Preview == nil && s.URI == nil:
			errs = append(errs, zIdentifier("subject toolName", *s.ToolName))
			if s.Input != nil {
				errs = append(errs, zJSON("subject input", s.Input, false))
			}
		default:
			errs = append(errs, fmt.Errorf("subject of type %q is not one the bridge emits", s.Type))
		}
	}
	if !zDigest.MatchString(r.RequestDigest) {
		errs = append(errs, fmt.Errorf("requestDigest %q is not a sha256 digest", r.RequestDigest))
	}
	var ir wire.InteractionRequest
	if err := json.Unmarshal(raw, &ir); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if d, err := wire.InteractionRequestDigest(ir); err != nil || d != r.RequestDigest {
		errs = append(errs, fmt.Errorf("requestDigest %s does not match the request (%s, %v)", r.RequestDigest, d, err))
	}
	return errors.Join(errs...)
}
