package server

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestCreateSession(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s-dup", "")
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantType   string
	}{
		{"unknown field", `{"id":"s1","model":"claude-code/sonnet","colour":"red"}`, 400, wire.TypeInvalidRequest},
		{"not an object", `["s1"]`, 400, wire.TypeInvalidRequest},
		{"trailing data", `{"id":"s1","model":"claude-code/sonnet"} {}`, 400, wire.TypeInvalidRequest},
		{"no model", `{"id":"s1"}`, 400, wire.TypeInvalidRequest},
		{"bad id", `{"id":" a","model":"claude-code/sonnet"}`, 400, wire.TypeInvalidRequest},
		{"bad policy", `{"id":"s1","model":"claude-code/sonnet","interaction_policy":"yolo"}`, 400, wire.TypeInvalidRequest},
		{"relative cwd", `{"id":"s1","model":"claude-code/sonnet","cwd":"work"}`, 400, wire.TypeInvalidRequest},
		{"unknown harness", `{"id":"s1","model":"nope/x"}`, 404, wire.TypeNotFound},
		{"same id, other request", `{"id":"s-dup","model":"claude-code/opus"}`, 409, wire.TypeSessionConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := v.do(t, "POST", "/v1/sessions", tt.body)
			e := decode[wire.ErrorResponse](t, resp)
			if resp.StatusCode != tt.wantStatus || e.Error.Type != tt.wantType || e.Error.Message == "" {
				t.Errorf("POST /v1/sessions %s = %d %+v, want %d %s", tt.body, resp.StatusCode, e.Error, tt.wantStatus, tt.wantType)
			}
		})
	}
	t.Run("identical repeat", func(t *testing.T) {
		first := decode[wire.SessionView](t, v.do(t, "GET", "/v1/sessions/s-dup", ""))
		resp := v.do(t, "POST", "/v1/sessions", `{"id":"s-dup","model":"claude-code/sonnet"}`)
		again := decode[wire.SessionView](t, resp)
		if resp.StatusCode != http.StatusOK || again.CreateRequestDigest != first.CreateRequestDigest || again.ID != "s-dup" {
			t.Errorf("repeated create = %d %+v, want 200 %+v", resp.StatusCode, again, first)
		}
		if first.InteractionPolicy != wire.PolicyInteractive || first.ContextBoundary != nil || first.Closed {
			t.Errorf("new session = %+v, want interactive, no boundary, open", first)
		}
	})
}

func TestUnknownSession(t *testing.T) {
	v := newEnv(t, config{})
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/sessions/nope", ""},
		{"GET", "/v1/sessions/nope/events", ""},
		{"POST", "/v1/sessions/nope/turns", turnBody("t1", "r1", "hello")},
		{"POST", "/v1/sessions/nope/cancel", ""},
		{"POST", "/v1/sessions/nope/close", ""},
	} {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			resp := v.do(t, r.method, r.path, r.body)
			if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 404 || e.Error.Type != wire.TypeNotFound {
				t.Errorf("%s %s = %d %+v, want 404 %s", r.method, r.path, resp.StatusCode, e.Error, wire.TypeNotFound)
			}
		})
	}
	// Native continuation answers typed outcomes: an unknown session, and
	// a harness that does not offer it (TestContinue covers the rest).
	createSession(t, v, "s1", "")
	for _, tt := range []struct{ id, status string }{{"nope", wire.ContinuationUnknownSession}, {"s1", wire.ContinuationUnverified}} {
		resp := v.do(t, "POST", "/v1/sessions/"+tt.id+"/continue", `{"request":{"operationId":"op-1"},"turn":{"prompt":"x"}}`)
		if o := decode[wire.ContinuationOutcome](t, resp); o.Acknowledgement.Status != tt.status {
			t.Errorf("POST /v1/sessions/%s/continue = %d %+v, want %s", tt.id, resp.StatusCode, o.Acknowledgement, tt.status)
		}
	}
}

func TestPostTurn_Invalid(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	ok := `"turn_id":"t1","execution_id":"e1","run_id":"r1"`
	tests := []struct{ name, body string }{
		{"unknown field", `{"message":"hi",` + ok + `,"colour":"red"}`},
		{"no turn_id", `{"message":"hi","execution_id":"e1","run_id":"r1"}`},
		{"no run_id", `{"message":"hi","turn_id":"t1","execution_id":"e1"}`},
		{"bad run_id", `{"message":"hi","turn_id":"t1","execution_id":"e1","run_id":"-r"}`},
		{"no message", `{` + ok + `}`},
		{"blank message", `{"message":"  ",` + ok + `}`},
		{"message and parts", `{"message":"hi","parts":[{"type":"text","text":"x"}],` + ok + `}`},
		{"image part", `{"parts":[{"type":"image","text":"x"}],` + ok + `}`},
		{"unknown interaction kind", `{"message":"hi",` + ok + `,"interactions":{"question":true}}`},
		{"interactions not an object", `{"message":"hi",` + ok + `,"interactions":[1]}`},
		{"not an object", `"hi"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := v.do(t, "POST", "/v1/sessions/s1/turns", tt.body)
			if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 400 || e.Error.Type != wire.TypeInvalidRequest {
				t.Errorf("turn %s = %d %+v, want 400 %s", tt.body, resp.StatusCode, e.Error, wire.TypeInvalidRequest)
			}
		})
	}
	// None of them admitted a turn.
	if resp := v.do(t, "GET", "/v1/runs/r1", ""); resp.StatusCode != 404 {
		t.Errorf("GET /v1/runs/r1 after rejected turns = %d, want 404", resp.StatusCode)
	}
}

func TestPostTurn_Identity(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	body := turnBody("t1", "r1", "hello")
	first := postTurn(t, v, "s1", body)
	want := wire.AdmittedRun{ID: "r1", Provider: "test", EnvironmentID: "env-1", SessionID: "s1", ExecutionID: "exec-t1",
		RequestDigest: first.Run.RequestDigest}
	if diff := cmp.Diff(want, first.Run); diff != "" || !strings.HasPrefix(first.Run.RequestDigest, "sha256:") {
		t.Errorf("admitted run (-want +got):\n%s", diff)
	}
	if first.Session.ContextBoundary == nil || first.Session.ContextBoundary.RunID != "r1" {
		t.Errorf("session after the turn = %+v, want a context boundary of run r1", first.Session)
	}
	snap := waitRun(t, v, "r1")
	if snap.Status != wire.StatusDone || snap.SessionID != "s1" || snap.ExecutionID != "exec-t1" || snap.RequestDigest != first.Run.RequestDigest {
		t.Errorf("run r1 = %+v", snap)
	}

	t.Run("identical repeat returns the same run", func(t *testing.T) {
		again := postTurn(t, v, "s1", body)
		if diff := cmp.Diff(first.Run, again.Run); diff != "" {
			t.Errorf("repeated turn run (-first +again):\n%s", diff)
		}
		if s := decode[wire.RunSnapshot](t, v.do(t, "GET", "/v1/runs/r1", "")); s.StartedAt != snap.StartedAt || s.LastSeq != snap.LastSeq {
			t.Errorf("run r1 after the repeat = %+v, want it untouched (%+v)", s, snap)
		}
	})
	conflicts := []struct{ name, body string }{
		{"same turn id, other message", turnBody("t1", "r1", "hello again")},
		{"same turn id, other run id", turnBody("t1", "r9", "hello")},
		{"other turn id, taken run id", turnBody("t2", "r1", "hello")},
	}
	for _, tt := range conflicts {
		t.Run(tt.name, func(t *testing.T) {
			resp := v.do(t, "POST", "/v1/sessions/s1/turns", tt.body)
			if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 409 || e.Error.Type != wire.TypeTurnConflict {
				t.Errorf("turn %s = %d %+v, want 409 %s", tt.body, resp.StatusCode, e.Error, wire.TypeTurnConflict)
			}
		})
	}
}

// TestPostTurn_ExecutionIDDefault admits a turn without an execution id
// as the TypeScript bridge does: under its turn id, with the digest of the
// turn as if it had named that id itself.
func TestPostTurn_ExecutionIDDefault(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	var digest string
	for _, tc := range []struct {
		name, body string
		status     int
		execution  string // the admitted run's execution id
	}{
		{"no execution id", `{"message":"hi","turn_id":"t1","run_id":"r1"}`, 202, "t1"},
		{"the same turn naming that id", `{"message":"hi","turn_id":"t1","execution_id":"t1","run_id":"r1"}`, 202, "t1"},
		{"the same turn under another execution id", `{"message":"hi","turn_id":"t1","execution_id":"x9","run_id":"r1"}`, 409, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := v.do(t, "POST", "/v1/sessions/s1/turns", tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("turn %s = %d %+v, want %d", tc.body, resp.StatusCode, decode[wire.ErrorResponse](t, resp).Error, tc.status)
			}
			if tc.status != 202 {
				return
			}
			a := decode[admission](t, resp)
			if digest == "" {
				digest = a.Run.RequestDigest
			}
			if a.Run.ID != "r1" || a.Run.ExecutionID != tc.execution || a.Run.RequestDigest != digest {
				t.Errorf("turn %s admitted %+v, want run r1 under execution id %s with digest %s", tc.body, a.Run, tc.execution, digest)
			}
		})
	}
	if s := waitRun(t, v, "r1"); s.ExecutionID != "t1" || s.Status != wire.StatusDone {
		t.Errorf("run r1 = %+v, want done under execution id t1", s)
	}
}

func TestPostTurn_BusyCancelClose(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	postTurn(t, v, "s1", turnBody("t1", "r1", "slow:100:100"))

	resp := v.do(t, "POST", "/v1/sessions/s1/turns", turnBody("t2", "r2", "hello"))
	if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 409 || e.Error.Type != wire.TypeSessionBusy {
		t.Errorf("turn on a busy session = %d %+v, want 409 %s", resp.StatusCode, e.Error, wire.TypeSessionBusy)
	}
	resp, out := cancelRun(t, v, "s1", "r1")
	if resp.StatusCode != 200 || out.Status != wire.CancelAccepted || out.Effect != wire.EffectCancelled || out.Run.RunID != "r1" {
		t.Errorf("cancel session = %d %+v", resp.StatusCode, out)
	}
	if s := decode[wire.SessionView](t, v.do(t, "GET", "/v1/sessions/s1", "")); s.Closed {
		t.Errorf("session after its run was cancelled = %+v, want open", s)
	}
	// The session outlives its cancelled run.
	postTurn(t, v, "s1", turnBody("t2", "r2", "hello"))
	if s := waitRun(t, v, "r2"); s.Status != wire.StatusDone {
		t.Errorf("turn after cancel = %+v, want done", s)
	}

	resp = v.do(t, "POST", "/v1/sessions/s1/close", "")
	if c := decode[wire.SessionView](t, v.do(t, "GET", "/v1/sessions/s1", "")); resp.StatusCode != 200 || !c.Closed {
		t.Errorf("close = %d, session %+v, want closed", resp.StatusCode, c)
	}
	resp = v.do(t, "POST", "/v1/sessions/s1/turns", turnBody("t3", "r3", "hello"))
	if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 409 || e.Error.Type != wire.TypeSessionClosed {
		t.Errorf("turn on a closed session = %d %+v, want 409 %s", resp.StatusCode, e.Error, wire.TypeSessionClosed)
	}
	// An admitted turn repeated after close still names its run.
	resp = v.do(t, "POST", "/v1/sessions/s1/turns", turnBody("t2", "r2", "hello"))
	if resp.StatusCode == http.StatusAccepted {
		if a := decode[admission](t, resp); a.Run.ID != "r2" {
			t.Errorf("repeat after close = %+v, want run r2", a.Run)
		}
	} else if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 409 || e.Error.Type != wire.TypeSessionClosed {
		t.Errorf("repeat after close = %d %+v, want 202 r2 or 409 %s", resp.StatusCode, e.Error, wire.TypeSessionClosed)
	}
}

func TestSessionEvents_Canonical(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	live := openEvents(t, v, "/v1/sessions/s1/events", "")
	postTurn(t, v, "s1", turnBody("t1", "r1", "hello"))
	first := live.until(isTerminal)
	postTurn(t, v, "s1", turnBody("t2", "r2", "many:20"))
	second := live.until(isTerminal)
	if resp := v.do(t, "POST", "/v1/sessions/s1/close", ""); resp.StatusCode != 200 {
		t.Fatalf("close = %d", resp.StatusCode)
	}
	if rest := live.all(); len(rest) != 0 {
		t.Errorf("after close the stream carried %d more frames", len(rest))
	}
	all := append(append([]cframe{}, first...), second...)
	for i, f := range all {
		if f.id != int64(i+1) {
			t.Errorf("session frame %d has id %d, want %d (no gap)", i, f.id, i+1)
		}
	}
	for _, turn := range []struct {
		run    string
		frames []cframe
	}{{"r1", first}, {"r2", second}} {
		if turn.frames[0].typ != "status" || turn.frames[0].body["status"] != "started" {
			t.Errorf("run %s starts with %s %v, want status started", turn.run, turn.frames[0].typ, turn.frames[0].body)
		}
		if last := turn.frames[len(turn.frames)-1]; last.body["status"] != "completed" {
			t.Errorf("run %s ends with %v, want status completed", turn.run, last.body)
		}
		// The last event before the terminal status says how the turn
		// finished, as a chat stream's finish_reason does.
		if u := turn.frames[len(turn.frames)-2]; u.typ != wire.EventRaw || !strings.Contains(string(u.raw), `"finishReason":"stop"`) {
			t.Errorf("run %s ends its events with %s %s, want the usage event with finishReason stop", turn.run, u.typ, u.raw)
		}
		for _, f := range turn.frames {
			if f.env.RunID != turn.run {
				t.Errorf("frame %d of run %s names run %s", f.id, turn.run, f.env.RunID)
			}
		}
	}
	if got := frameText(first); got != "Hello, world" {
		t.Errorf("turn 1 text = %q", got)
	}
	if got := frameText(second); !strings.HasPrefix(got, "d0 d1 ") || !strings.HasSuffix(got, "d19 ") {
		t.Errorf("turn 2 text = %q", got)
	}

	t.Run("replay from a cursor", func(t *testing.T) {
		for _, cursor := range []int{0, 1, len(first), len(first) + 3, len(all)} {
			got := openEvents(t, v, "/v1/sessions/s1/events", strconvItoa(cursor)).all()
			want := all[cursor:]
			if len(got) != len(want) {
				t.Fatalf("replay after %d = %d frames, want %d", cursor, len(got), len(want))
			}
			for i := range got {
				if got[i].id != want[i].id || string(got[i].raw) != string(want[i].raw) {
					t.Errorf("replay after %d frame %d = %s, want %s", cursor, i, got[i].raw, want[i].raw)
				}
			}
		}
	})
	t.Run("cursor ahead", func(t *testing.T) {
		resp := v.do(t, "GET", "/v1/sessions/s1/events", "", wire.HeaderLastEventID, strconvItoa(len(all)+1))
		if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 409 || e.Error.Type != wire.TypeInvalidReplayCursor {
			t.Errorf("cursor ahead = %d %+v", resp.StatusCode, e.Error)
		}
	})
	t.Run("run events", func(t *testing.T) {
		got := openEvents(t, v, "/v1/runs/r2/events", "").all()
		if len(got) != len(second) || !isTerminal(got[len(got)-1]) {
			t.Fatalf("run r2 events = %d frames, want %d ending in a terminal status", len(got), len(second))
		}
		for i := range got {
			if got[i].id != int64(i+1) || got[i].env.RunID != "r2" {
				t.Errorf("run r2 frame %d = id %d run %s", i, got[i].id, got[i].env.RunID)
			}
		}
	})
}

// TestSessionView follows a session's view through its life: the fields
// the TypeScript bridge gives (status, run_id, turns, backend, times).
func TestSessionView(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	view := func() wire.SessionView { return decode[wire.SessionView](t, v.do(t, "GET", "/v1/sessions/s1", "")) }
	steps := []struct {
		name      string
		do        func()
		status    string
		turns     int64
		run       string
		runStatus string
	}{
		{"created", func() {}, wire.SessionCreated, 0, "", ""},
		{"a completed turn", func() {
			postTurn(t, v, "s1", turnBody("t1", "r1", "hello"))
			waitRun(t, v, "r1")
		}, wire.SessionIdle, 1, "r1", wire.StatusDone},
		{"a cancelled turn", func() {
			postTurn(t, v, "s1", turnBody("t2", "r2", "slow:100:100"))
			if resp, ack := cancelRun(t, v, "s1", "r2"); resp.StatusCode != 200 {
				t.Fatalf("cancel = %d %+v", resp.StatusCode, ack)
			}
		}, wire.SessionCancelled, 1, "r2", wire.StatusCancelled},
		{"another completed turn", func() {
			postTurn(t, v, "s1", turnBody("t3", "r3", "hello"))
			waitRun(t, v, "r3")
		}, wire.SessionIdle, 2, "r3", wire.StatusDone},
		{"closed", func() {
			if resp := v.do(t, "POST", "/v1/sessions/s1/close", ""); resp.StatusCode != 200 {
				t.Fatalf("close = %d", resp.StatusCode)
			}
		}, wire.SessionClosed, 2, "r3", wire.StatusDone},
	}
	for _, st := range steps {
		st.do()
		got := view()
		runID := ""
		if got.RunID != nil {
			runID = *got.RunID
		}
		if got.Status != st.status || got.Turns != st.turns || runID != st.run || got.Object != wire.SessionObject ||
			got.Backend != "claude-code" || got.CreatedAt == "" || !notBefore(got.UpdatedAt, got.CreatedAt) {
			t.Errorf("%s: view = status %q turns %d run_id %q object %q backend %q times %s..%s, want %q %d %q", st.name,
				got.Status, got.Turns, runID, got.Object, got.Backend, got.CreatedAt, got.UpdatedAt, st.status, st.turns, st.run)
		}
		if st.run == "" && got.Run != nil || st.run != "" && (got.Run == nil || got.Run.ID != st.run || got.Run.Status != st.runStatus) {
			t.Errorf("%s: run = %+v, want run %q %s", st.name, got.Run, st.run, st.runStatus)
		}
	}
}

// TestPostTurn_History: a turn's history reaches a session's harness as a
// transcript before the message while the harness holds no conversation
// of the session, and is ignored once it does; a history that is not
// user and assistant text is refused.
func TestPostTurn_History(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	history := `"history":[{"role":"user","content":"what is two and two"},{"role":"assistant","content":"four"}]`
	withHistory := func(turnID, runID string) string {
		b := turnBody(turnID, runID, "history")
		return b[:len(b)-1] + "," + history + "}"
	}
	for _, c := range []struct {
		turn, run, want string
	}{
		{"t1", "r1", "user: what is two and two\nassistant: four\n"},
		{"t2", "r2", "none"}, // the harness holds the session now
	} {
		postTurn(t, v, "s1", withHistory(c.turn, c.run))
		if s := waitRun(t, v, c.run); s.Status != wire.StatusDone {
			t.Fatalf("run %s: %+v", c.run, s)
		}
		if got := frameText(openEvents(t, v, "/v1/runs/"+c.run+"/events", "").all()); got != c.want {
			t.Errorf("turn %s: the harness got %q, want %q", c.turn, got, c.want)
		}
	}
	for _, bad := range []string{
		`"history":[{"role":"system","content":"x"}]`,
		`"history":[{"role":"tool","content":"x","tool_call_id":"c1"}]`,
		`"history":{"role":"user"}`,
	} {
		b := turnBody("t9", "r9", "hi")
		resp := v.do(t, "POST", "/v1/sessions/s1/turns", b[:len(b)-1]+","+bad+"}")
		if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 400 || e.Error.Type != wire.TypeInvalidRequest {
			t.Errorf("history %s = %d %+v, want 400", bad, resp.StatusCode, e.Error)
		}
	}
}

// notBefore reports whether RFC 3339 time a is not before b (as times:
// RFC3339Nano drops trailing zeros, so the strings do not sort).
func notBefore(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	return errA == nil && errB == nil && !ta.Before(tb)
}

// TestPostTurn_HarnessStart: a retained session's run says how its
// harness process came to serve it: started for the session's first
// turn (none was ready), kept from it for the next.
func TestPostTurn_HarnessStart(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	for _, c := range []struct {
		turn, run string
		want      wire.HarnessStart
	}{
		{"t1", "r1", wire.HarnessStart{Process: wire.HarnessStarted, Reason: wire.StartNoneReady}},
		{"t2", "r2", wire.HarnessStart{Process: wire.HarnessKept}},
	} {
		postTurn(t, v, "s1", turnBody(c.turn, c.run, "hello"))
		s := waitRun(t, v, c.run)
		if s.Status != wire.StatusDone || s.Harness == nil || !reflect.DeepEqual(*s.Harness, c.want) {
			t.Errorf("run %s: %s, harness %+v; want done, %+v", c.run, s.Status, s.Harness, c.want)
		}
	}
}
