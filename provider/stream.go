package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// errStopped reports that the consumer stopped reading.
var errStopped = errors.New("reader stopped")

// cursor is a parsed `since`: the bridge's frame cursor, and for a
// composite cursor "F:I" the events of frame F up to index I to skip.
type cursor struct {
	server    string // Last-Event-ID to send; "" for none
	set       bool   // a cursor was given at all
	skipFrame string
	skipIndex int
}

var compositeCursor = regexp.MustCompile(`^(0|[1-9][0-9]*):(0|[1-9][0-9]*)$`)
var plainCursor = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

func parseCursor(since string) (cursor, error) {
	if since == "" {
		return cursor{}, nil
	}
	if plainCursor.MatchString(since) {
		if _, err := strconv.ParseInt(since, 10, 64); err != nil {
			return cursor{}, errors.New("cli-bridge replay cursor exceeds the supported range")
		}
		return cursor{server: since, set: true}, nil
	}
	m := compositeCursor.FindStringSubmatch(since)
	if m == nil {
		return cursor{}, errors.New("cli-bridge replay cursor is invalid")
	}
	f, err1 := strconv.ParseInt(m[1], 10, 64)
	i, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return cursor{}, errors.New("cli-bridge replay cursor exceeds the supported range")
	}
	if f == 0 {
		return cursor{}, errors.New("cli-bridge retained event frame must be positive")
	}
	return cursor{server: strconv.FormatInt(f-1, 10), set: true, skipFrame: m[1], skipIndex: i}, nil
}

// streamSpec says which request a stream reads.
type streamSpec struct {
	op     string
	direct bool // POST /v1/chat/completions with the run's body; else GET /v1/runs/:id/events
	since  string
}

// streamResult tells the caller what happened before an error, so it can
// decide on cleanup.
type streamResult struct {
	admitted  bool // the bridge answered 2xx and the identity bound
	rejected  bool // the bridge answered non-2xx: nothing was admitted
	canonical bool // the stream was a retained run's canonical one
}

// openStream sends the stream request and binds the answer's identity.
func (c *client) openStream(ctx context.Context, r *run, spec streamSpec, cur cursor, res *streamResult) (*http.Response, error) {
	ref := r.controlRef()
	h := http.Header{"Accept": {"text/event-stream"}}
	if cur.server != "" {
		h.Set(wire.HeaderLastEventID, cur.server)
	}
	method, path := http.MethodGet, "/v1/runs/"+url.PathEscape(ref.RunID)+"/events"
	var body []byte
	if spec.direct {
		method, path, body = http.MethodPost, "/v1/chat/completions", r.body
		h.Set(wire.HeaderSessionID, ref.SessionID)
	}
	resp, err := c.send(ctx, spec.op, method, path, body, h)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		res.rejected = true
		data, rerr := readBounded(spec.op, resp, maxControlBytes)
		if rerr != nil {
			data = nil
		}
		return nil, errorFor(spec.op, resp.StatusCode, resp.Header, data)
	}
	res.admitted = true
	if err := r.bindHeaders(spec.op, resp.Header, spec.direct); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// streamRun reads one run's events and yields them. It returns errStopped
// when yield returned false.
func (c *client) streamRun(ctx context.Context, r *run, spec streamSpec, res *streamResult, yield func(Event) bool) error {
	cur, err := parseCursor(spec.since)
	if err != nil {
		return fmt.Errorf("%s: %w", spec.op, err)
	}
	resp, err := c.openStream(ctx, r, spec, cur, res)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	d := &decoder{c: c, r: r, spec: spec, cur: cur, ref: r.controlRef(), yield: yield, lastID: -1}
	sse := newSSEReader(resp.Body)
	for {
		f, err := sse.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", spec.op, context.Cause(ctx))
			}
			return &TransportError{Op: spec.op, Err: err}
		}
		if err := d.frame(f); err != nil {
			return err
		}
	}
	res.canonical = d.format == "canonical"
	return d.finish(ctx)
}

// pending is an event held with its frame until the run is confirmed.
type pending struct {
	frameID string
	events  []Event
}

// decoder applies the stream rules to frames, one stream at a time.
type decoder struct {
	c     *client
	r     *run
	spec  streamSpec
	cur   cursor
	ref   ControlRef
	yield func(Event) bool

	format        string // "", "legacy" or "canonical"
	lastID        int64
	sawDone       bool
	text          string
	finishReason  string
	sawUsage      bool
	usage         *Usage // the sum of the usage events yielded
	requests      *int64
	models        []string
	toolCalls     map[string]bool
	completed     bool // a finish frame or a cancellation was seen
	cancelledSeen bool
	held          []pending // from the finish frame on (legacy)
	terminal      *Event    // canonical terminal status
}

func (d *decoder) protocolErr(reason string) error {
	return &ProtocolError{Op: d.spec.op, Reason: reason}
}

func (d *decoder) frame(f frame) error {
	if f.HasID {
		if !plainCursor.MatchString(f.ID) {
			return d.protocolErr(fmt.Sprintf("cli-bridge event id %q is not a positive base-10 integer", f.ID))
		}
		n, err := strconv.ParseInt(f.ID, 10, 64)
		if err != nil || n <= 0 {
			return d.protocolErr(fmt.Sprintf("cli-bridge event id %q is not a positive base-10 integer", f.ID))
		}
		if n <= d.lastID {
			return d.protocolErr(fmt.Sprintf("cli-bridge event id %d does not increase after %d", n, d.lastID))
		}
		d.lastID = n
	}
	if f.Data == wire.DoneData {
		if d.format == "canonical" {
			return d.protocolErr("cli-bridge mixed canonical and OpenAI stream formats")
		}
		d.format, d.sawDone = "legacy", true
		return nil
	}
	if f.HasEvent {
		if d.format == "legacy" {
			return d.protocolErr("cli-bridge mixed canonical and OpenAI stream formats")
		}
		d.format = "canonical"
		return d.canonical(f)
	}
	if d.format == "canonical" {
		return d.protocolErr("cli-bridge mixed canonical and OpenAI stream formats")
	}
	d.format = "legacy"
	if d.sawDone {
		return d.protocolErr("cli-bridge emitted an event after [DONE]")
	}
	return d.legacy(f)
}

// covered reports whether a composite cursor already covered the event
// at index idx of frame frameID.
func (d *decoder) covered(frameID string, idx int) bool {
	return frameID != "" && d.cur.skipFrame == frameID && idx <= d.cur.skipIndex
}

// resumed reports whether the stream started after the run's first event.
func (d *decoder) resumed() bool {
	return d.cur.skipFrame != "" || d.cur.server != "" && d.cur.server != "0"
}

// emit gives events their cursor ids and run coordinates, skips the ones a
// composite cursor already covered, and yields them.
func (d *decoder) emit(frameID string, events []Event) error {
	for i, ev := range events {
		if frameID != "" && ev.ID == "" {
			ev.ID = frameID + ":" + strconv.Itoa(i)
		}
		// An event's index in its frame is the one its id names: the
		// closing result of a replay is emitted alone but carries the
		// index after the frame's own events.
		idx := i
		if rest, ok := strings.CutPrefix(ev.ID, frameID+":"); ok && frameID != "" {
			if n, err := strconv.Atoi(rest); err == nil {
				idx = n
			}
		}
		if d.covered(frameID, idx) {
			continue
		}
		ev.RunID, ev.SessionID, ev.ExecutionID = d.ref.RunID, d.ref.SessionID, d.ref.ExecutionID
		if ev.Type != EventResult {
			d.usage = AddUsage(d.usage, ev.Usage)
		}
		if !d.yield(ev) {
			return errStopped
		}
	}
	return nil
}

func (d *decoder) legacy(f frame) error {
	var chunk struct {
		Error          *wire.ErrorBody `json:"error"`
		Choices        []json.RawMessage
		Usage          json.RawMessage `json:"usage"`
		ProviderModels []string        `json:"provider_models"`
	}
	if err := json.Unmarshal([]byte(f.Data), &chunk); err != nil {
		return d.protocolErr("cli-bridge emitted a chunk that is not valid JSON")
	}
	if d.cancelledSeen {
		return nil
	}
	if chunk.Error != nil {
		cancelled := chunk.Error.Type == wire.TypeRunCancelled
		status := StatusFailed
		if cancelled {
			status = StatusCancelled
		}
		ev := Event{Type: EventStatus, Status: status, Detail: chunk.Error.Message, Raw: json.RawMessage(f.Data)}
		if err := d.emit(f.ID, []Event{ev}); err != nil {
			return err
		}
		d.completed, d.cancelledSeen = true, cancelled
		d.held = nil
		if !cancelled {
			return &BridgeError{Op: d.spec.op, Type: chunk.Error.Type, Message: chunk.Error.Message}
		}
		return nil
	}
	var events []Event
	if len(chunk.ProviderModels) > 0 {
		d.models = chunk.ProviderModels
	}
	usage, requests := usageFromChunk(chunk.Usage)
	if usage != nil || requests != nil {
		d.sawUsage = d.sawUsage || usage != nil
		if requests != nil {
			d.requests = addOpt(d.requests, requests)
		}
		events = append(events, Event{Type: EventUsage, Usage: usage, ModelRequests: requests, ProviderModels: chunk.ProviderModels, Raw: json.RawMessage(f.Data)})
	}
	var finish string
	if len(chunk.Choices) > 0 {
		var choice struct {
			Delta        wire.Delta `json:"delta"`
			FinishReason *string    `json:"finish_reason"`
		}
		if err := json.Unmarshal(chunk.Choices[0], &choice); err != nil {
			return d.protocolErr("cli-bridge emitted an invalid chunk choice")
		}
		events = append(events, d.deltaEvents(choice.Delta, f.Data)...)
		if choice.FinishReason != nil {
			finish = *choice.FinishReason
		}
	}
	if finish == wire.FinishError || finish == wire.FinishTimeout {
		events = append(events, Event{Type: EventStatus, Status: StatusFailed, Detail: "cli-bridge returned finish_reason=" + finish})
		if err := d.emit(f.ID, events); err != nil {
			return err
		}
		typ := wire.TypeHarnessError
		if finish == wire.FinishTimeout {
			typ = wire.TypeHarnessTimeout
		}
		return &BridgeError{Op: d.spec.op, Type: typ, Message: "cli-bridge returned finish_reason=" + finish}
	}
	if finish != "" && !d.completed {
		d.completed, d.finishReason = true, finish
	}
	if d.completed {
		// From the finish frame on everything is provisional until the
		// bridge confirms the run's outcome.
		d.held = append(d.held, pending{frameID: f.ID, events: events})
		return nil
	}
	return d.emit(f.ID, events)
}

func (d *decoder) deltaEvents(delta wire.Delta, raw string) []Event {
	var events []Event
	msgID := d.r.turnID
	if msgID == "" {
		msgID = d.ref.SessionID + ":assistant"
	}
	if delta.Content != "" {
		d.text += delta.Content
		events = append(events, Event{Type: EventMessagePart, Delta: delta.Content,
			Part: &Part{ID: msgID + ":text", Type: "text", Text: d.text}, Raw: json.RawMessage(raw)})
	}
	if delta.Reasoning != "" {
		events = append(events, Event{Type: EventMessagePart,
			Part: &Part{ID: msgID + ":reasoning", Type: "reasoning", Text: delta.Reasoning}, Raw: json.RawMessage(raw)})
	}
	for i, tc := range delta.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("%s:tool:%d", msgID, max(tc.Index, i))
		}
		if tc.Function.Name == "" || d.toolCalls[id] {
			continue
		}
		if d.toolCalls == nil {
			d.toolCalls = map[string]bool{}
		}
		d.toolCalls[id] = true
		events = append(events, Event{Type: EventMessagePart,
			Part: &Part{ID: id, Type: "tool", Tool: tc.Function.Name, CallID: id}, Raw: json.RawMessage(raw)})
	}
	return events
}

// finish applies the end-of-stream rules and yields what was held.
func (d *decoder) finish(ctx context.Context) error {
	op := d.spec.op
	if d.format == "canonical" {
		return d.finishCanonical(ctx)
	}
	if !d.sawDone {
		if !d.spec.direct && d.cur.set && d.format == "" {
			if _, err := d.c.terminalSnapshot(ctx, op, d.r); err != nil {
				return err
			}
			return d.resumedAtEnd(ctx)
		}
		return &TransportError{Op: op, Err: errors.New("cli-bridge stream ended without the [DONE] protocol marker")}
	}
	if d.cancelledSeen {
		return nil
	}
	if !d.completed {
		if d.cur.set {
			if d.spec.direct {
				_, err := d.aggregate(ctx)
				return err
			}
			_, err := d.c.terminalSnapshot(ctx, op, d.r)
			return err
		}
		s, err := d.c.terminalSnapshot(ctx, op, d.r)
		if err != nil {
			return fmt.Errorf("%s: cli-bridge stream ended without a terminal result: %w", op, err)
		}
		if s.Status == wire.StatusCancelled {
			return d.emit("", []Event{{Type: EventStatus, Status: StatusCancelled, Detail: fmt.Sprintf("cli-bridge run %q was cancelled", s.ID)}})
		}
		return d.protocolErr("cli-bridge stream ended without a terminal result")
	}
	result := Event{Type: EventResult, FinalText: d.text, FinishReason: d.finishReason, ModelRequests: d.requests,
		ProviderModels: d.models, Status: StatusCompleted}
	var failure error
	if d.spec.direct {
		agg, err := d.aggregate(ctx)
		var cancelled *runCancelled
		switch {
		case errors.As(err, &cancelled):
			result = Event{Type: EventStatus, Status: StatusCancelled, Detail: cancelled.message}
		case err != nil:
			return err
		default:
			if d.cur.set {
				result.FinalText, result.FinishReason = agg.text, agg.finish
			}
			if agg.requests != nil {
				result.ModelRequests = agg.requests
			}
			if len(agg.models) > 0 {
				result.ProviderModels = agg.models
			}
			if d.cur.set || !d.sawUsage {
				result.Usage = agg.usage
			}
		}
	} else {
		s, err := d.c.terminalSnapshot(ctx, op, d.r)
		if err != nil {
			return err
		}
		switch s.Status {
		case wire.StatusCancelled:
			result = Event{Type: EventStatus, Status: StatusCancelled, Detail: fmt.Sprintf("cli-bridge run %q was cancelled", s.ID)}
		case wire.StatusError, wire.StatusUnknown:
			detail := fmt.Sprintf("cli-bridge run %q ended with an error", s.ID)
			if s.Error != nil && s.Error.Message != "" {
				detail += ": " + s.Error.Message
			}
			result = Event{Type: EventStatus, Status: StatusFailed, Detail: detail}
			failure = &BridgeError{Op: op, Type: wire.TypeHarnessError, Message: detail}
		}
	}
	last := ""
	for _, p := range d.held {
		if err := d.emit(p.frameID, p.events); err != nil {
			return err
		}
		if p.frameID != "" {
			last, result.ID = p.frameID, p.frameID+":"+strconv.Itoa(len(p.events))
		}
	}
	if result.Type == EventResult && result.Usage == nil {
		result.Usage = d.usage
	}
	if err := d.emit(last, []Event{result}); err != nil {
		return err
	}
	return failure
}

// runCancelled is an aggregate answer that says the run was cancelled.
type runCancelled struct{ message string }

func (e *runCancelled) Error() string { return "cli-bridge run cancelled: " + e.message }

type aggregateResult struct {
	text, finish string
	usage        *Usage
	requests     *int64
	models       []string
}

// aggregate confirms a direct stream's finish: the same request again,
// non-streamed, attaches to the same run and answers its aggregate result,
// whose run id and digest must be the accepted stream's.
func (d *decoder) aggregate(ctx context.Context) (*aggregateResult, error) {
	op := d.spec.op + ": confirm result"
	var body map[string]any
	if err := json.Unmarshal(d.r.body, &body); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	body["stream"] = false
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	resp, err := d.c.send(ctx, op, http.MethodPost, "/v1/chat/completions", data, http.Header{wire.HeaderSessionID: {d.ref.SessionID}})
	if err != nil {
		return nil, err
	}
	raw, err := readBounded(op, resp, maxResultBytes)
	if err != nil {
		return nil, err
	}
	if err := d.r.bindHeaders(op, resp.Header, true); err != nil {
		return nil, err
	}
	var c struct {
		wire.Completion
		Usage json.RawMessage `json:"usage"`
	}
	jerr := json.Unmarshal(raw, &c)
	if c.Error != nil && c.Error.Type == wire.TypeRunCancelled {
		return nil, &runCancelled{message: c.Error.Message}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, errorFor(op, resp.StatusCode, resp.Header, raw)
	}
	if jerr != nil || c.Error != nil || len(c.Choices) == 0 {
		if c.Error != nil {
			return nil, &BridgeError{Op: op, Type: c.Error.Type, Message: c.Error.Message}
		}
		return nil, &ProtocolError{Op: op, Reason: "cli-bridge replay result returned an invalid completion"}
	}
	ch := c.Choices[0]
	if ch.FinishReason == wire.FinishError || ch.FinishReason == wire.FinishTimeout {
		return nil, &BridgeError{Op: op, Type: wire.TypeHarnessError, Message: "cli-bridge replay result ended " + ch.FinishReason}
	}
	usage, requests := usageFromChunk(c.Usage)
	return &aggregateResult{text: ch.Message.Content, finish: ch.FinishReason, usage: usage, requests: requests, models: c.ProviderModels}, nil
}
