package pi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/pi"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/provider"
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
			reqs := modelRequests(l)
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

// modelRequests are the stub's model requests.
func modelRequests(l *harnesstest.Live) []routerstub.Request {
	var out []routerstub.Request
	for _, r := range l.Stub.Requests() {
		if r.Family != routerstub.FamilyNone {
			out = append(out, r)
		}
	}
	return out
}

// TestLive_PiNativeContinuation adds a turn to a retained Pi session from
// a reconstructed environment of the Go client (provider.Get) with
// Session.ContinueNative: the turn runs on the session's native
// conversation; a stale boundary gets boundary_mismatch and starts
// nothing; the same request id repeated gets the same outcome and starts
// nothing; the same id for another request is a conflict.
func TestLive_PiNativeContinuation(t *testing.T) {
	rel := piReleases[0]
	answers := []string{"pi first " + harnesstest.RandomHex(4), "pi continued " + harnesstest.RandomHex(4)}
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"), routerstub.Deltas(answers[0], 3), routerstub.Deltas(answers[1], 3))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Spec: rel.spec, Bin: "pi", Script: script,
		ServedModel: "router-served-model"})
	newProvider := func() *provider.Provider {
		p, err := provider.New(provider.Options{BaseURL: l.URL, BearerToken: harnesstest.Bearer})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := newProvider()
	env, err := p.Create(t.Context(), provider.CreateRequest{Profile: provider.Profile{Name: "pi", Harness: "pi",
		Model: provider.ProfileModel{Default: "router-chat", Provider: "router"}}})
	if err != nil {
		t.Fatal(err)
	}
	if c := env.Capabilities(); !c.NativeContinuationProven() {
		t.Fatalf("capabilities = %+v, want native continuation", c)
	}

	// The session's first turn, as the process that created it ran it.
	createSession(t, l, "pc1")
	adm := postTurn(t, l, "pc1", "1", "first question", p.Name(), env.ID())
	if resp := l.Do(t, "GET", "/v1/runs/pc1-run-1?wait_ms=30000", ""); resp.StatusCode != 200 {
		t.Fatalf("GET run = %d", resp.StatusCode)
	}
	ref := provider.ControlRef{RunID: adm.Run.ID, Provider: adm.Run.Provider, EnvironmentID: adm.Run.EnvironmentID,
		SessionID: adm.Run.SessionID, ExecutionID: adm.Run.ExecutionID, RequestDigest: adm.Run.RequestDigest}

	// reconstructed is a session of a new process's environment, at ref.
	reconstructed := func() *provider.Session {
		env, err := newProvider().Get(t.Context(), env.ID(), provider.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := env.Session("pc1", provider.SessionOptions{ControlRef: &ref})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := reconstructed()
	boundary, err := s.ContextBoundary(t.Context())
	if err != nil || boundary == nil || boundary.RunID != ref.RunID {
		t.Fatalf("ContextBoundary = %+v, %v", boundary, err)
	}
	turn := wire.ContinuationTurn{Prompt: "second question"}
	req, err := provider.NewContinuationRequest("cont-1", ref, *boundary, turn)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := s.ContinueNative(t.Context(), req, turn)
	if err != nil || out.Acknowledgement.Status != wire.ContinuationAccepted || out.Result == nil || out.ControlRef == nil {
		t.Fatalf("ContinueNative = %+v, %v, want accepted with a result", out, err)
	}
	t.Logf("continued turn took %s", time.Since(start).Round(time.Millisecond))
	if !out.Result.Success || !strings.Contains(out.Result.Text, answers[1]) || strings.Contains(out.Result.Text, answers[0]) || out.Result.Usage == nil || out.Acknowledgement.ActualBoundary == nil {
		t.Errorf("continued result = %+v, want success with %q, usage and the observed boundary", out.Result, answers[1])
	}
	if got, _ := s.ControlRef(); got.RunID != "cont-1" || got.SessionID != "pc1" {
		t.Errorf("session's run after the continuation = %+v, want cont-1", got)
	}
	reqs := modelRequests(l)
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), answers[0]) {
		t.Fatalf("model requests = %d; the continued one must carry turn one's answer", len(reqs))
	}

	// A process that still holds the first run's boundary is refused: the
	// session moved on to another run, a conflict (as the TypeScript
	// bridge answers it).
	stale := reconstructed()
	req2, err := provider.NewContinuationRequest("cont-2", ref, *boundary, wire.ContinuationTurn{Prompt: "stale question"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		out, err := stale.ContinueNative(t.Context(), req2, wire.ContinuationTurn{Prompt: "stale question"})
		if err != nil || out.Acknowledgement.Status != wire.ContinuationConflict || out.Acknowledgement.ExistingRequestDigest == "" ||
			out.ControlRef != nil {
			t.Fatalf("stale continuation (try %d) = %+v, %v, want conflict", i+1, out, err)
		}
	}
	// The first request repeated is replayed: the same outcome, and
	// nothing runs.
	again, err := stale.ContinueNative(t.Context(), req, turn)
	want := out.Acknowledgement
	want.Status = wire.ContinuationReplayed
	if err != nil || !reflect.DeepEqual(again.Acknowledgement, want) || *again.ControlRef != *out.ControlRef ||
		!reflect.DeepEqual(again.Result, out.Result) {
		t.Errorf("repeated continuation = %+v, %v, want the stored %+v replayed", again, err, out)
	}
	// The same id for another request is a conflict.
	other := wire.ContinuationTurn{Prompt: "another question"}
	req3, err := provider.NewContinuationRequest("cont-1", ref, *boundary, other)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := reconstructed().ContinueNative(t.Context(), req3, other); err != nil || out.Acknowledgement.Status != wire.ContinuationConflict ||
		out.Acknowledgement.ExistingRequestDigest != req.RequestDigest {
		t.Errorf("another request under cont-1 = %+v, %v, want conflict naming the recorded digest", out, err)
	}
	if n := len(modelRequests(l)); n != 2 {
		t.Errorf("model requests = %d after the refused and repeated continuations, want still 2", n)
	}
	turns, err := l.Store.Turns(t.Context(), "pc1", 0)
	if err != nil || len(turns) != 2 {
		t.Errorf("session turns = %d (%v), want 2", len(turns), err)
	}
}
