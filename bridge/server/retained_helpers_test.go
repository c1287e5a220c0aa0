package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// cframe is one canonical SSE frame.
type cframe struct {
	id    int64
	event string
	env   wire.Envelope
	typ   string          // env.Event's type
	body  map[string]any  // env.Event decoded
	raw   json.RawMessage // the data line
}

// canonStream reads a canonical event stream frame by frame and checks
// its framing: every frame has an id, an event: line equal to the
// envelope's event.type, ids strictly increase, and no [DONE] appears.
type canonStream struct {
	t      *testing.T
	sc     *bufio.Scanner
	cancel context.CancelFunc
	last   int64
}

// openEvents opens GET path (a session's or a run's events) with the
// Last-Event-ID cursor (none when "").
func openEvents(t *testing.T, v *env, path, cursor string) *canonStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", v.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	if cursor != "" {
		req.Header.Set(wire.HeaderLastEventID, cursor)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	c, _ := strconv.ParseInt(cursor, 10, 64)
	return &canonStream{t: t, sc: sc, cancel: cancel, last: c}
}

// next returns the next frame, or false at the end of the stream.
func (s *canonStream) next() (cframe, bool) {
	t := s.t
	t.Helper()
	var f cframe
	var hasID bool
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if f.raw == nil {
				continue
			}
			if !hasID || f.event == "" {
				t.Errorf("frame %s has no id or no event: line", f.raw)
			}
			if f.id <= s.last {
				t.Errorf("frame id %d after %d: ids must strictly increase", f.id, s.last)
			}
			s.last = f.id
			if err := json.Unmarshal(f.raw, &f.env); err != nil {
				t.Fatalf("frame data %s: %v", f.raw, err)
			}
			if err := json.Unmarshal(f.env.Event, &f.body); err != nil {
				t.Fatalf("frame event %s: %v", f.env.Event, err)
			}
			f.typ, _ = f.body["type"].(string)
			if f.typ != f.event {
				t.Errorf("frame event: %q but event.type %q", f.event, f.typ)
			}
			if f.env.Sequence != f.id || f.env.Cursor != strconv.FormatInt(f.id, 10) {
				t.Errorf("frame id %d has sequence %d cursor %q", f.id, f.env.Sequence, f.env.Cursor)
			}
			return f, true
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseInt(line[4:], 10, 64)
			if err != nil || id <= 0 {
				t.Errorf("frame id %q is not a positive integer", line[4:])
			}
			f.id, hasID = id, true
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if line[6:] == wire.DoneData {
				t.Error("a canonical stream carries [DONE]")
				continue
			}
			f.raw = json.RawMessage(line[6:])
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
	return f, false
}

// until reads frames up to and including the first for which stop is
// true, and fails if the stream ends before.
func (s *canonStream) until(stop func(cframe) bool) []cframe {
	s.t.Helper()
	var out []cframe
	for {
		f, ok := s.next()
		if !ok {
			s.t.Fatalf("the stream ended after %d frames without the awaited frame", len(out))
		}
		out = append(out, f)
		if stop(f) {
			return out
		}
	}
}

// all reads the stream to its end.
func (s *canonStream) all() []cframe {
	var out []cframe
	for {
		f, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, f)
	}
}

func isTerminal(f cframe) bool {
	if f.typ != "status" {
		return false
	}
	switch f.body["status"] {
	case "completed", "failed", "cancelled":
		return true
	}
	return false
}

func frameText(frames []cframe) string {
	var b strings.Builder
	for _, f := range frames {
		if d, ok := f.body["delta"].(string); ok && f.typ == "message.part.updated" {
			b.WriteString(d)
		}
	}
	return b.String()
}

// admission is the answer to an admitted turn.
type admission struct {
	Session wire.SessionView `json:"session"`
	Run     wire.AdmittedRun `json:"run"`
}

func createSession(t *testing.T, v *env, id, extra string) {
	t.Helper()
	resp := v.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"id":%q,"model":"claude-code/sonnet"%s}`, id, extra))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create session %s = %d %+v", id, resp.StatusCode, decode[wire.ErrorResponse](t, resp).Error)
	}
}

func turnBody(turnID, runID, message string) string {
	return fmt.Sprintf(`{"message":%q,"turn_id":%q,"execution_id":"exec-%s","run_id":%q,"provider":"test","environment_id":"env-1"}`,
		message, turnID, turnID, runID)
}

func postTurn(t *testing.T, v *env, session, body string) admission {
	t.Helper()
	resp := v.do(t, "POST", "/v1/sessions/"+session+"/turns", body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("turn %s = %d %+v", body, resp.StatusCode, decode[wire.ErrorResponse](t, resp).Error)
	}
	return decode[admission](t, resp)
}

// waitRun long-polls run id until it is terminal.
func waitRun(t *testing.T, v *env, id string) wire.RunSnapshot {
	t.Helper()
	for range 10 {
		s := decode[wire.RunSnapshot](t, v.do(t, "GET", "/v1/runs/"+id+"?wait_ms=3000", ""))
		if s.Terminal {
			return s
		}
	}
	t.Fatalf("run %s did not end", id)
	return wire.RunSnapshot{}
}

// command builds a digest-bound interaction command.
func command(t *testing.T, op string, b wire.InteractionBinding, outcome string) wire.InteractionCommand {
	t.Helper()
	resp := wire.InteractionResponse{ID: b.InteractionID, Outcome: outcome}
	d, err := wire.InteractionCommandDigest(b, resp)
	if err != nil {
		t.Fatal(err)
	}
	return wire.InteractionCommand{OperationID: op, Binding: b, CommandDigest: d, Response: resp}
}

// respond posts cmd to the respond route of its binding's run and
// interaction, and returns the HTTP status and acknowledgement.
func respond(t *testing.T, v *env, cmd wire.InteractionCommand) (int, wire.InteractionAck, string) {
	t.Helper()
	b, _ := json.Marshal(cmd)
	resp := v.do(t, "POST", "/v1/runs/"+cmd.Binding.RunID+"/interactions/"+cmd.Binding.InteractionID+"/respond", string(b))
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	var ack wire.InteractionAck
	json.Unmarshal(raw, &ack)
	return resp.StatusCode, ack, string(raw)
}

// bindingOf reads the response binding of an `interaction` frame, after
// checking its request digest.
func bindingOf(t *testing.T, f cframe) wire.InteractionBinding {
	t.Helper()
	var ev struct {
		Request wire.InteractionRequest `json:"request"`
	}
	if err := json.Unmarshal(f.env.Event, &ev); err != nil || ev.Request.Binding.InteractionID != ev.Request.ID {
		t.Fatalf("interaction event %s: %v", f.env.Event, err)
	}
	if d, err := wire.InteractionRequestDigest(ev.Request); err != nil || d != ev.Request.RequestDigest {
		t.Fatalf("interaction request digest = %s, want %s (%v)", ev.Request.RequestDigest, d, err)
	}
	return ev.Request.ResponseBinding()
}

func strconvItoa(n int) string { return strconv.Itoa(n) }

// runRef is the exact reference of run id, from its snapshot.
func runRef(t *testing.T, v *env, id string) wire.RunRef {
	t.Helper()
	resp := v.do(t, "GET", "/v1/runs/"+id, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/runs/%s = %d", id, resp.StatusCode)
	}
	s := decode[wire.RunSnapshot](t, resp)
	return wire.RunRef{RunID: s.ID, Provider: s.Provider, EnvironmentID: s.EnvironmentID, SessionID: s.SessionID,
		ExecutionID: s.ExecutionID, RequestDigest: s.RequestDigest}
}

// cancelRun cancels run of session exactly (POST /v1/sessions/:id/cancel
// with wait_ms), as operation "cancel-"+run, and returns the answer.
func cancelRun(t *testing.T, v *env, session, run string) (*http.Response, wire.CancellationAck) {
	t.Helper()
	resp := v.do(t, "POST", "/v1/sessions/"+session+"/cancel?wait_ms=10000", exactCancelBody(t, "cancel-"+run, runRef(t, v, run), ""))
	return resp, decode[wire.CancellationAck](t, resp)
}
