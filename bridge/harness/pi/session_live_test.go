package pi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/pi"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// piReleases are the Pi packages the retained session tests drive.
var piReleases = []struct{ spec, version string }{
	{"@earendil-works/pi-coding-agent@1.6.0", "1.6.0"},
	{"@mariozechner/pi-coding-agent@0.73.1", "0.73.1"},
}

// piModel is the model id of every retained Pi session here.
const piModel = "pi/router/router-chat"

// frame is one canonical SSE frame.
type frame struct {
	ID     int64
	Env    wire.Envelope
	Type   string
	Status string
	Text   string // a text part's delta
}

// readFrames reads canonical frames from r until stop accepts one, and
// fails t if the stream ends first or breaks the canonical format.
func readFrames(t *testing.T, br *bufio.Reader, stop func(frame) bool) []frame {
	t.Helper()
	var out []frame
	var f frame
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
			f, event, data = frame{}, "", ""
		}
	}
}

func terminal(f frame) bool {
	return f.Type == "status" && (f.Status == "completed" || f.Status == "failed" || f.Status == "cancelled")
}

func textOf(frames []frame) string {
	var b strings.Builder
	for _, f := range frames {
		b.WriteString(f.Text)
	}
	return b.String()
}

// createSession creates retained session id on l.
func createSession(t *testing.T, l *harnesstest.Live, id string) {
	t.Helper()
	resp := l.Do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"id":%q,"model":%q,"cwd":%q}`, id, piModel, l.Work))
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/sessions = %d %s", resp.StatusCode, body)
	}
}

// postTurn admits turn n of session with the given run coordinates.
func postTurn(t *testing.T, l *harnesstest.Live, session, n, message, prov, envID string) wire.TurnAdmission {
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

// TestLive_PiRetainedSession runs three retained turns of one Pi session
// with the real CLI of each release line: a session reader drops after
// turn two and resumes from its cursor without a gap or a duplicate, and
// the third model request carries the earlier turns.
func TestLive_PiRetainedSession(t *testing.T) {
	for _, rel := range piReleases {
		t.Run(rel.version, func(t *testing.T) {
			answers := []string{"pi one " + harnesstest.RandomHex(4), "pi two " + harnesstest.RandomHex(4), "pi three " + harnesstest.RandomHex(4)}
			script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
				routerstub.Deltas(answers[0], 3), routerstub.Deltas(answers[1], 3), routerstub.Deltas(answers[2], 3))
			l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Spec: rel.spec, Bin: "pi", Script: script,
				ServedModel: "router-served-model"})
			createSession(t, l, "ps1")

			resp := l.Do(t, "GET", "/v1/sessions/ps1/events", "")
			br := bufio.NewReader(resp.Body)
			var seen []frame
			for i, msg := range []string{"first question", "second question"} {
				start := time.Now()
				adm := postTurn(t, l, "ps1", strconv.Itoa(i+1), msg, "box", "env-1")
				if adm.Session.ContextBoundary == nil || adm.Session.ContextBoundary.Boundary.Revision != strconv.Itoa(i+1) {
					t.Errorf("turn %d boundary = %+v, want revision %d", i+1, adm.Session.ContextBoundary, i+1)
				}
				frames := readFrames(t, br, terminal)
				t.Logf("turn %d took %s over %d frames", i+1, time.Since(start).Round(time.Millisecond), len(frames))
				if last := frames[len(frames)-1]; last.Status != "completed" || !strings.Contains(textOf(frames), answers[i]) {
					t.Fatalf("turn %d ended %q with text %q, want completed with %q", i+1, last.Status, textOf(frames), answers[i])
				}
				seen = append(seen, frames...)
			}
			resp.Body.Close() // the reader drops
			cursor := seen[len(seen)-1].ID

			start := time.Now()
			postTurn(t, l, "ps1", "3", "third question", "box", "env-1")
			req, _ := http.NewRequestWithContext(t.Context(), "GET", l.URL+"/v1/sessions/ps1/events", nil)
			req.Header.Set("Authorization", "Bearer "+harnesstest.Bearer)
			req.Header.Set(wire.HeaderLastEventID, strconv.FormatInt(cursor, 10))
			resumed, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resumed.Body.Close()
			rest := readFrames(t, bufio.NewReader(resumed.Body), terminal)
			t.Logf("turn 3 took %s; resumed reader got %d frames after cursor %d", time.Since(start).Round(time.Millisecond), len(rest), cursor)
			if got := textOf(rest); !strings.Contains(got, answers[2]) || strings.Contains(got, answers[1]) {
				t.Errorf("turn 3 text after the cursor = %q, want %q alone", got, answers[2])
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
			reqs := l.ModelRequests()
			if len(reqs) != 3 {
				t.Fatalf("model requests = %d, want 3", len(reqs))
			}
			if body := string(reqs[2].Body); !strings.Contains(body, answers[0]) || !strings.Contains(body, answers[1]) ||
				!strings.Contains(body, "first question") {
				t.Errorf("the third model request lacks the earlier turns: the session was not resumed")
			}
			l.CheckKeyed(t, routerstub.AuthBearer)
		})
	}
}
