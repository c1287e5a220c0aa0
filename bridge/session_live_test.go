package bridge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// sseFrame is one canonical SSE frame.
type sseFrame struct {
	ID    int64
	Event string
	Env   wire.Envelope
	Type  string
	Raw   map[string]any
}

// canonicalReader reads canonical frames from a stream.
type canonicalReader struct {
	t  *testing.T
	br *bufio.Reader
}

func newCanonicalReader(t *testing.T, r io.Reader) *canonicalReader {
	return &canonicalReader{t: t, br: bufio.NewReader(r)}
}

// next returns the next frame, or ok false at the end of the stream.
func (c *canonicalReader) next() (sseFrame, bool) {
	c.t.Helper()
	var f sseFrame
	var data string
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return f, false
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if data == "" {
				continue
			}
			if data == wire.DoneData {
				c.t.Fatalf("canonical stream carried [DONE]")
			}
			if err := json.Unmarshal([]byte(data), &f.Env); err != nil {
				c.t.Fatalf("frame %d data %q: %v", f.ID, data, err)
			}
			json.Unmarshal(f.Env.Event, &f.Raw)
			f.Type, _ = f.Raw["type"].(string)
			if f.Event != f.Type || f.Env.Sequence != f.ID {
				c.t.Fatalf("frame id %d event %q carries sequence %d type %q", f.ID, f.Event, f.Env.Sequence, f.Type)
			}
			return f, true
		case strings.HasPrefix(line, "id: "):
			f.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			f.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		}
	}
}

// until reads frames until one satisfies stop, returning them all.
func (c *canonicalReader) until(stop func(sseFrame) bool) []sseFrame {
	c.t.Helper()
	var out []sseFrame
	for {
		f, ok := c.next()
		if !ok {
			c.t.Fatalf("stream ended after %d frames without the awaited one", len(out))
		}
		out = append(out, f)
		if stop(f) {
			return out
		}
	}
}

func terminalStatus(f sseFrame) bool {
	s, _ := f.Raw["status"].(string)
	return f.Type == "status" && (s == "completed" || s == "failed" || s == "cancelled")
}

func textOf(frames []sseFrame) string {
	var b strings.Builder
	for _, f := range frames {
		part, _ := f.Raw["part"].(map[string]any)
		if d, ok := f.Raw["delta"].(string); ok && f.Type == "message.part.updated" && part["type"] == "text" {
			b.WriteString(d)
		}
	}
	return b.String()
}

func (b *liveBridge) createSession(t *testing.T, id, policy, cwd string) {
	t.Helper()
	resp := b.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"id":%q,"model":"claude-code/claude-sonnet-4-5","interaction_policy":%q,"cwd":%q}`, id, policy, cwd))
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/sessions = %d %s", resp.StatusCode, body)
	}
}

func (b *liveBridge) turn(t *testing.T, session, n, message string) (int, wire.TurnAdmission) {
	t.Helper()
	body := fmt.Sprintf(`{"message":%q,"turn_id":"turn-%s","execution_id":"exec-%s","run_id":"%s-run-%s","provider":"box","environment_id":"env-1"}`,
		message, n, n, session, n)
	resp := b.do(t, "POST", "/v1/sessions/"+session+"/turns", body)
	var adm wire.TurnAdmission
	json.NewDecoder(resp.Body).Decode(&adm)
	return resp.StatusCode, adm
}

// TestLive_ClaudeRetainedSession runs three retained turns of one Claude
// Code session; a session reader drops after turn two and resumes from
// its cursor without a gap or a duplicate.
func TestLive_ClaudeRetainedSession(t *testing.T) {
	b, stub, _ := startLive(t, routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Deltas("answer one", 3), routerstub.Deltas("answer two", 3), routerstub.Deltas("answer three", 3)))
	b.createSession(t, "s1", wire.PolicyInteractive, t.TempDir())
	if resp := b.do(t, "POST", "/v1/sessions", `{"id":"s2","model":"claude-code/x","bogus":1}`); resp.StatusCode != 400 {
		t.Errorf("create with an unknown field = %d, want 400", resp.StatusCode)
	}

	resp := b.do(t, "GET", "/v1/sessions/s1/events", "")
	rd := newCanonicalReader(t, resp.Body)
	var seen []sseFrame
	for i, msg := range []string{"first", "second"} {
		code, adm := b.turn(t, "s1", strconv.Itoa(i+1), msg)
		if code != http.StatusAccepted || adm.Run.ID != "s1-run-"+strconv.Itoa(i+1) || adm.Session.ContextBoundary == nil {
			t.Fatalf("turn %d = %d %+v", i+1, code, adm)
		}
		if i == 0 {
			again, adm2 := b.turn(t, "s1", "1", msg)
			if again != http.StatusAccepted || adm2.Run != adm.Run {
				t.Errorf("repeated turn = %d %+v, want the same run %+v", again, adm2.Run, adm.Run)
			}
			if code, _ := b.turn(t, "s1", "1", "something else"); code != http.StatusConflict {
				t.Errorf("different turn under the same turn_id = %d, want 409", code)
			}
		}
		frames := rd.until(terminalStatus)
		if got := textOf(frames); !strings.Contains(got, "answer "+[]string{"one", "two"}[i]) {
			t.Errorf("turn %d text = %q", i+1, got)
		}
		seen = append(seen, frames...)
	}
	resp.Body.Close() // the reader drops
	cursor := seen[len(seen)-1].ID

	if code, _ := b.turn(t, "s1", "3", "third"); code != http.StatusAccepted {
		t.Fatalf("turn 3 = %d", code)
	}
	resp = b.do(t, "GET", "/v1/sessions/s1/events", "", "Last-Event-ID", strconv.FormatInt(cursor, 10))
	rest := newCanonicalReader(t, resp.Body).until(terminalStatus)
	if got := textOf(rest); !strings.Contains(got, "answer three") {
		t.Errorf("turn 3 text = %q", got)
	}
	all := append(seen, rest...)
	ids := map[string]bool{}
	for i, f := range all {
		if f.ID != int64(i+1) {
			t.Fatalf("session frame %d has id %d: a gap or a duplicate", i+1, f.ID)
		}
		if ids[f.Env.EventID] {
			t.Fatalf("event %s seen twice", f.Env.EventID)
		}
		ids[f.Env.EventID] = true
	}
	if n := len(harnesstest.MainRequests(stub, 0)); n != 3 {
		t.Errorf("model requests = %d, want 3", n)
	}
	// The run's own stream is canonical, numbered from 1, and ends at its status.
	run := b.do(t, "GET", "/v1/runs/s1-run-3/events", "")
	frames := newCanonicalReader(t, run.Body).until(terminalStatus)
	if frames[0].ID != 1 || frames[0].Type != "status" || len(frames) != len(rest) {
		t.Errorf("run stream = %d frames from %d (%s), want %d from 1", len(frames), frames[0].ID, frames[0].Type, len(rest))
	}
}

// interactionCommand answers the interaction of frame f with outcome
// under operation id op, after checking its request's shape.
func interactionCommand(t *testing.T, f sseFrame, op, outcome string) string {
	t.Helper()
	_, cmd := harnesstest.AnswerInteraction(t, f.Env.Event, op, outcome)
	return cmd
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *liveBridge) respond(t *testing.T, run, iid, cmd string) (int, wire.InteractionAck) {
	t.Helper()
	resp := b.do(t, "POST", "/v1/runs/"+run+"/interactions/"+iid+"/respond", cmd)
	var ack wire.InteractionAck
	json.NewDecoder(resp.Body).Decode(&ack)
	return resp.StatusCode, ack
}

// TestLive_ClaudePermissionInteraction runs Claude Code turns whose model
// reply asks to run a shell command: the permission prompt becomes an
// interaction event, answered accepted (the command runs) or declined (it
// does not), and cancelled with its run.
func TestLive_ClaudePermissionInteraction(t *testing.T) {
	for _, outcome := range []string{wire.OutcomeAccepted, wire.OutcomeDeclined} {
		t.Run(outcome, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "marker.txt")
			q := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
				routerstub.ToolCall("Bash", fmt.Sprintf(`{"command":"echo ran > %s","description":"write a marker"}`, marker))).
				AfterTool(routerstub.Text("tool step over"))
			b, _, _ := startLive(t, q)
			b.createSession(t, "p1", wire.PolicyInteractive, dir)
			if code, _ := b.turn(t, "p1", "1", "write the marker"); code != http.StatusAccepted {
				t.Fatalf("turn = %d", code)
			}
			run := "p1-run-1"
			rd := newCanonicalReader(t, b.do(t, "GET", "/v1/runs/"+run+"/events", "").Body)
			asked := rd.until(func(f sseFrame) bool { return f.Type == "interaction" || terminalStatus(f) })
			f := asked[len(asked)-1]
			if f.Type != "interaction" {
				t.Fatalf("run ended without an interaction: %s", textOf(asked))
			}
			harnesstest.ResolveInteraction(t, f.Env.Event, outcome, func(iid, body string) (int, wire.InteractionAck) {
				return b.respond(t, run, iid, body)
			})
			end := rd.until(terminalStatus)
			if s := end[len(end)-1].Raw["status"]; s != "completed" {
				t.Fatalf("run ended %v: %s", s, textOf(end))
			}
			data, err := os.ReadFile(marker)
			switch {
			case outcome == wire.OutcomeAccepted && (err != nil || strings.TrimSpace(string(data)) != "ran"):
				t.Errorf("accepted command did not run: %q, %v", data, err)
			case outcome == wire.OutcomeDeclined && err == nil:
				t.Errorf("declined command ran")
			}
			if outcome != wire.OutcomeDeclined {
				return
			}
			// A second turn asks again and is cancelled while asking.
			q.Push(routerstub.ToolCall("Bash", fmt.Sprintf(`{"command":"echo ran > %s","description":"write a marker"}`, marker)))
			if code, _ := b.turn(t, "p1", "2", "try again"); code != http.StatusAccepted {
				t.Fatalf("turn 2 = %d", code)
			}
			run = "p1-run-2"
			rd = newCanonicalReader(t, b.do(t, "GET", "/v1/runs/"+run+"/events", "").Body)
			asked = rd.until(func(f sseFrame) bool { return f.Type == "interaction" || terminalStatus(f) })
			f = asked[len(asked)-1]
			if f.Type != "interaction" {
				t.Fatalf("turn 2 ended without an interaction")
			}
			var snap wire.RunSnapshot
			if err := json.NewDecoder(b.do(t, "GET", "/v1/runs/"+run, "").Body).Decode(&snap); err != nil {
				t.Fatal(err)
			}
			if resp := b.do(t, "POST", "/v1/sessions/p1/cancel?wait_ms=20000", harnesstest.CancelBody(t, "cancel-"+run, snap)); resp.StatusCode != 200 {
				t.Fatalf("cancel session = %d", resp.StatusCode)
			}
			// The interrupted turn may first report the refused tool call.
			end = rd.until(terminalStatus)
			if i := slices.IndexFunc(end, func(f sseFrame) bool { return f.Type == "interaction.cancel" }); i < 0 ||
				end[i].Raw["id"] != "perm-1" || end[len(end)-1].Raw["status"] != "cancelled" {
				t.Errorf("after cancel: %+v, want interaction.cancel of perm-1 then status cancelled", end)
			}
			if code, ack := b.respond(t, run, "perm-1", interactionCommand(t, f, "op-4", wire.OutcomeAccepted)); code != 409 || ack.Status != wire.InteractionCancelled {
				t.Errorf("answer after cancel = %d %+v, want 409 cancelled", code, ack)
			}
			if code, ack := b.respond(t, "no-such-run", "perm-1", interactionCommand(t, f, "op-5", wire.OutcomeAccepted)); code != 404 || ack.Status != wire.InteractionUnknownRun {
				t.Errorf("unknown run = %d %+v", code, ack)
			}
		})
	}
}
