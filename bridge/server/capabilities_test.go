package server

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// TestCapabilities_ClaudeCode checks every claim of the claude-code
// document against what the bridge does (with the scripted CLI), and that
// what the bridge does not implement is not claimed.
func TestCapabilities_ClaudeCode(t *testing.T) {
	v := newEnv(t, config{})
	resp := v.do(t, "GET", "/v1/capabilities?model=claude-code/sonnet", "")
	raw, _ := io.ReadAll(resp.Body)
	var c wire.Capabilities
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET /v1/capabilities = %d %s: %v", resp.StatusCode, raw, err)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("the document breaks a rule: %v", err)
	}
	want := wire.Capabilities{
		Streaming:       wire.StreamingCaps{Live: true, Replay: true, Detach: true, TurnIdempotency: true},
		Sessions:        wire.SessionCaps{Continue: true, List: true, Messages: true},
		RetainedControl: &wire.RetainedControlCaps{ExactRunIdentity: true, ResultIdentity: true, EventIdentity: true, CancellationIdempotency: true},
		Interactions: &wire.InteractionCaps{Kinds: []string{"permission"}, AnswerFieldTypes: []string{wire.FieldSelect, wire.FieldText},
			ResponseScopes: []string{wire.ScopeInteraction}, ConcurrentRequests: true, Replay: true, ResponseIdempotency: true},
		Usage:       true,
		Placement:   true,
		Branching:   wire.BranchingCaps{Checkpoint: true, Fork: true, RetrySafe: true, Lookup: true, Cleanup: true},
		Observation: &wire.ObservationCaps{Identity: true, Lifecycle: true, Endpoint: true, Placement: true, ModelUsage: true},
		// bubblewrap runs here (the test bed installs it).
		ExactProcess: &wire.ExactProcessCaps{Egress: []string{wire.EgressBlocked}},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("claude-code capabilities (-want +got):\n%s", diff)
	}

	t.Run("exactProcess.egress", func(t *testing.T) {
		// The claimed egress is served; the one not claimed is refused
		// (TestExact_* hold the rest of the contract).
		blocked := exactEnvRequest("caps-blocked", 60_000)
		if code, res := postJSON[wire.ExactEnvironmentResult](t, v, "/v1/exact/environments", blocked); code != 201 {
			t.Errorf("create with egress blocked = %d %+v, want 201", code, res)
		}
		strict := exactEnvRequest("caps-strict", 60_000)
		strict.Egress = wire.ExactEgress{Mode: wire.EgressStrict, AllowDomains: []string{"example.com"}}
		if code, res := postJSON[wire.ErrorResponse](t, v, "/v1/exact/environments", strict); code != 400 {
			t.Errorf("create with egress strict = %d %+v, want 400", code, res)
		}
	})
	t.Run("streaming.live", func(t *testing.T) {
		resp, _ := openStream(t, v, chatBody("live-1", "slow:3:300", true))
		f := firstDataLine(t, resp.Body)
		snap := decode[wire.RunSnapshot](t, v.do(t, "GET", "/v1/runs/live-1", ""))
		if f == "" || snap.Terminal {
			t.Errorf("first frame %q arrived with the run %s, want it while the run is live", f, snap.Status)
		}
	})
	t.Run("streaming.detach", func(t *testing.T) {
		_, detach := openStream(t, v, chatBody("detach-1", "slow:3:100", true))
		detach()
		if s := waitRun(t, v, "detach-1"); s.Status != wire.StatusDone {
			t.Errorf("run after its only reader left = %+v, want done", s)
		}
	})
	done := v.do(t, "POST", "/v1/chat/completions", chatBody("id-1", "many:5", true,
		`"session_id":"cs-1","provider":"p","environment_id":"env-1","execution_id":"x-1"`))
	body := readSSE(t, done.Body)
	digest := done.Header.Get(wire.HeaderRunRequestDigest)
	t.Run("streaming.replay and retainedControl.eventIdentity", func(t *testing.T) {
		for _, cursor := range []int{0, 2} {
			r := v.do(t, "GET", "/v1/runs/id-1/events", "", wire.HeaderLastEventID, fmt.Sprint(cursor))
			if got := readSSE(t, r.Body); !cmp.Equal(got.frames, body.frames[cursor:], cmp.AllowUnexported(frame{})) {
				t.Errorf("replay after %d = %+v, want %+v", cursor, got.frames, body.frames[cursor:])
			}
		}
	})
	t.Run("streaming.turnIdempotency and retainedControl.exactRunIdentity", func(t *testing.T) {
		again := v.do(t, "POST", "/v1/chat/completions", chatBody("id-1", "many:5", true,
			`"session_id":"cs-1","provider":"p","environment_id":"env-1","execution_id":"x-1"`))
		if got := readSSE(t, again.Body); again.Header.Get(wire.HeaderRunRequestDigest) != digest ||
			!cmp.Equal(got.frames, body.frames, cmp.AllowUnexported(frame{})) {
			t.Errorf("repeated run = %s, want the same run's frames", again.Header.Get(wire.HeaderRunRequestDigest))
		}
		for h, want := range map[string]string{wire.HeaderRunID: "id-1", wire.HeaderRunSessionID: "cs-1", wire.HeaderRunProvider: "p",
			wire.HeaderRunEnvironmentID: "env-1", wire.HeaderRunExecutionID: "x-1"} {
			if got := done.Header.Get(h); got != want {
				t.Errorf("%s = %q, want %q", h, got, want)
			}
		}
		other := v.do(t, "POST", "/v1/chat/completions", chatBody("id-1", "many:6", true))
		if e := decode[wire.ErrorResponse](t, other); other.StatusCode != 409 || e.Error.Type != wire.TypeRunIdentityConflict {
			t.Errorf("other request under the same run id = %d %+v", other.StatusCode, e.Error)
		}
	})
	t.Run("retainedControl.resultIdentity", func(t *testing.T) {
		s := waitRun(t, v, "id-1")
		if s.ID != "id-1" || s.RequestDigest != digest || s.Status != wire.StatusDone || s.SessionID != "cs-1" || s.ExecutionID != "x-1" ||
			s.Provider != "p" || s.EnvironmentID != "env-1" {
			t.Errorf("run snapshot = %+v, want the admitted coordinates", s)
		}
	})
	t.Run("retainedControl.cancellationIdempotency", func(t *testing.T) {
		resp, _ := openStream(t, v, chatBody("cancel-1", "stall", true, `"session_id":"cs-2"`))
		body := exactCancelBody(t, "op-1", headerRef(resp.Header), "")
		a1 := decode[wire.CancellationAck](t, v.do(t, "POST", "/v1/runs/cancel-1/cancel", body))
		a2 := decode[wire.CancellationAck](t, v.do(t, "POST", "/v1/runs/cancel-1/cancel", body))
		if a1.Status != wire.CancelAccepted || a2.Status != wire.CancelReplayed || a2.Effect != a1.Effect {
			t.Errorf("cancel twice = %+v then %+v, want accepted then replayed", a1, a2)
		}
	})
	t.Run("sessions.continue", func(t *testing.T) {
		var ids []string
		for i := range 2 {
			r := v.do(t, "POST", "/v1/chat/completions", chatBody(fmt.Sprintf("who-%d", i), "whoami", true, `"session_id":"cs-who"`))
			ids = append(ids, text(t, readSSE(t, r.Body).frames))
		}
		if ids[0] == "" || ids[0] != ids[1] {
			t.Errorf("the CLI's sessions of two turns of one session = %q, want the same (resumed)", ids)
		}
	})
	t.Run("sessions.list", func(t *testing.T) {
		createSession(t, v, "listed", "")
		list := decode[struct{ Data []wire.SessionView }](t, v.do(t, "GET", "/v1/sessions", ""))
		if !slices.ContainsFunc(list.Data, func(s wire.SessionView) bool { return s.ID == "listed" }) {
			t.Errorf("GET /v1/sessions = %+v, want session listed", list)
		}
	})
	t.Run("sessions.messages", func(t *testing.T) {
		createSession(t, v, "told", "")
		waitRun(t, v, postTurn(t, v, "told", turnBody("t1", "told-1", "hello")).Run.ID)
		tr := decode[wire.Transcript](t, v.do(t, "GET", "/v1/sessions/told/transcript", ""))
		var text strings.Builder
		for _, m := range tr.Messages {
			for _, p := range m.Parts {
				var part struct{ Type, Text string }
				if json.Unmarshal(p, &part) == nil && part.Type == "text" {
					text.WriteString(part.Text)
				}
			}
		}
		if len(tr.Messages) != 1 || text.String() != "Hello, world" || tr.EventCount == 0 || tr.LastEventID == nil || len(tr.Usage) != 1 {
			t.Errorf("transcript = %+v, want one message saying Hello, world, its usage and its last event", tr)
		}
	})
	t.Run("interactions", func(t *testing.T) {
		createSession(t, v, "asks", "")
		postTurn(t, v, "asks", turnBody("t1", "ask-1", "bash:true"))
		events := openEvents(t, v, "/v1/runs/ask-1/events", "")
		asked := events.until(func(f cframe) bool { return f.typ == "interaction" })
		var ev struct {
			Request wire.InteractionRequest
		}
		json.Unmarshal(asked[len(asked)-1].env.Event, &ev)
		if !slices.Contains(c.Interactions.Kinds, ev.Request.Kind) || len(ev.Request.AnswerSpec.Fields) == 0 {
			t.Errorf("interaction %s: kind or fields not claimed", asked[len(asked)-1].env.Event)
		}
		for _, f := range ev.Request.AnswerSpec.Fields {
			if !slices.Contains(c.Interactions.AnswerFieldTypes, f.Type) {
				t.Errorf("interaction field type %q is not claimed", f.Type)
			}
		}
		cmd := command(t, "op-ask", bindingOf(t, asked[len(asked)-1]), wire.OutcomeAccepted)
		_, a1, raw1 := respond(t, v, cmd)
		_, _, raw2 := respond(t, v, cmd)
		if a1.Status != wire.InteractionAccepted || raw1 != raw2 {
			t.Errorf("respond twice = %s then %s, want accepted and the same acknowledgement", raw1, raw2)
		}
		events.all()
		replay := openEvents(t, v, "/v1/runs/ask-1/events", "").all()
		if !slices.ContainsFunc(replay, func(f cframe) bool { return f.typ == "interaction" }) {
			t.Error("the interaction does not replay")
		}
	})
	t.Run("usage", func(t *testing.T) {
		r := v.do(t, "POST", "/v1/chat/completions", chatBody("usage-1", "hello", false))
		var out wire.Completion
		if err := json.NewDecoder(r.Body).Decode(&out); err != nil || out.Usage == nil || out.Usage.PromptTokens == 0 {
			t.Errorf("completion usage = %+v (%v), want measured usage", out.Usage, err)
		}
	})
	t.Run("nativeContinuation is not claimed and not served", func(t *testing.T) {
		r := v.do(t, "POST", "/v1/sessions/asks/continue", `{"request":{"operationId":"cont-1"},"turn":{"prompt":"go on"}}`)
		if o := decode[wire.ContinuationOutcome](t, r); r.StatusCode != 422 || o.Acknowledgement.Status != wire.ContinuationUnverified {
			t.Errorf("POST continue = %d %+v, want 422 %s", r.StatusCode, o.Acknowledgement, wire.ContinuationUnverified)
		}
	})
}

// firstDataLine returns the first `data:` line of an SSE body, waiting at
// most 5 s.
func firstDataLine(t *testing.T, r io.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 1)
		var line []byte
		for {
			if _, err := r.Read(buf); err != nil {
				got <- ""
				return
			}
			if buf[0] != '\n' {
				line = append(line, buf[0])
				continue
			}
			if s := string(line); strings.HasPrefix(s, "data: ") {
				got <- s
				return
			}
			line = line[:0]
		}
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(5 * time.Second):
		return ""
	}
}
