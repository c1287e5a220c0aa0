package harnesstest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Frame is one canonical SSE frame of a retained run's event stream.
type Frame struct {
	ID     int64
	Env    wire.Envelope
	Type   string
	Status string
	Text   string // a text part's delta
}

// ReadFrames reads canonical frames from br until stop accepts one, and
// fails t if the stream ends first or breaks the canonical format.
func ReadFrames(t *testing.T, br *bufio.Reader, stop func(Frame) bool) []Frame {
	t.Helper()
	var out []Frame
	var f Frame
	var event, data string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended after %d frames without the awaited one: %v", len(out), err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			f.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		case line == "" && data != "":
			if data == wire.DoneData {
				t.Fatal("canonical stream carried [DONE]")
			}
			if err := json.Unmarshal([]byte(data), &f.Env); err != nil {
				t.Fatalf("frame %d: %v", f.ID, err)
			}
			var ev struct {
				Type   string `json:"type"`
				Status string `json:"status"`
				Delta  string `json:"delta"`
				Part   struct {
					Type string `json:"type"`
				} `json:"part"`
			}
			json.Unmarshal(f.Env.Event, &ev)
			f.Type, f.Status = ev.Type, ev.Status
			if ev.Type == "message.part.updated" && ev.Part.Type == "text" {
				f.Text = ev.Delta
			}
			if event != f.Type || f.Env.Sequence != f.ID {
				t.Fatalf("frame id %d event %q carries sequence %d type %q", f.ID, event, f.Env.Sequence, f.Type)
			}
			out = append(out, f)
			if stop(f) {
				return out
			}
			f, event, data = Frame{}, "", ""
		}
	}
}

// Terminal reports whether f is a run's terminal status.
func Terminal(f Frame) bool {
	return f.Type == "status" && (f.Status == "completed" || f.Status == "failed" || f.Status == "cancelled")
}

// AskedOrEnded reports whether f is an interaction or a terminal status.
func AskedOrEnded(f Frame) bool { return f.Type == "interaction" || Terminal(f) }

// TextOf joins the text deltas of frames.
func TextOf(frames []Frame) string {
	var b strings.Builder
	for _, f := range frames {
		b.WriteString(f.Text)
	}
	return b.String()
}

// CreateSession creates retained session id of model on l, its turns
// running in cwd, under interaction policy ("" for the default).
func (l *Live) CreateSession(t *testing.T, id, model, cwd, policy string) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"model":%q,"cwd":%q}`, id, model, cwd)
	if policy != "" {
		body = fmt.Sprintf(`{"id":%q,"model":%q,"cwd":%q,"interaction_policy":%q}`, id, model, cwd, policy)
	}
	resp := l.Do(t, "POST", "/v1/sessions", body)
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/sessions = %d %s", resp.StatusCode, b)
	}
}

// PostTurn admits turn n of session with the given run coordinates: turn
// "turn-<n>", execution "exec-<n>", run "<session>-run-<n>".
func (l *Live) PostTurn(t *testing.T, session, n, message, prov, envID string) wire.TurnAdmission {
	t.Helper()
	body, _ := json.Marshal(wire.TurnRequest{Message: message, TurnID: "turn-" + n, ExecutionID: "exec-" + n,
		RunID: session + "-run-" + n, Provider: prov, EnvironmentID: envID})
	resp := l.Do(t, "POST", "/v1/sessions/"+session+"/turns", string(body))
	var adm wire.TurnAdmission
	if err := json.NewDecoder(resp.Body).Decode(&adm); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("turn %s = %d %+v (%v)", n, resp.StatusCode, adm, err)
	}
	return adm
}

// RunFrames opens the canonical event stream of run.
func (l *Live) RunFrames(t *testing.T, run string) *bufio.Reader {
	t.Helper()
	resp := l.Do(t, "GET", "/v1/runs/"+run+"/events", "")
	t.Cleanup(func() { resp.Body.Close() })
	return bufio.NewReader(resp.Body)
}
