package provider

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// piCaps proves retained control, interactions and native continuation.
const piCaps = `{` + capsProfile + `,"streaming":{"live":true,"replay":true,"detach":true,"turnIdempotency":true},"sessions":{"continue":true,"list":false,"messages":false},
"retainedControl":{"exactRunIdentity":true,"resultIdentity":true,"eventIdentity":true,"cancellationIdempotency":true},
"nativeContinuation":{"atomicBoundary":true,"requestIdempotency":true},
"interactions":{"kinds":["permission"],"answerFieldTypes":["select"],"responseScopes":["interaction"],"secretAnswers":false,"concurrentRequests":false,"replay":true,"responseIdempotency":true},
"workspace":{"read":false,"write":false,"exec":false,"git":false,"upload":false,"download":false},"branching":{"checkpoint":false,"fork":false},
"placement":true,"usage":true,"confidential":false}`

// nativeFake adds the retained session routes to a fake bridge.
func nativeFake(t *testing.T) (*fakeBridge, *wire.SessionView) {
	f := newFake(t, loadTranscript(t, "canonical_ok.sse"))
	f.caps = piCaps
	view := &wire.SessionView{}
	f.routes["POST /v1/sessions"] = func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		view.ID, _ = body["id"].(string)
		view.Model, _ = body["model"].(string)
		view.CreateRequestDigest, _ = wire.Digest(body)
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(view)
	}
	f.routes["POST /v1/sessions/pi-session/turns"] = func(w http.ResponseWriter, r *http.Request) {
		var body wire.TurnRequest
		json.NewDecoder(r.Body).Decode(&body)
		ref := ControlRef{RunID: body.RunID, Provider: body.Provider, EnvironmentID: body.EnvironmentID, SessionID: view.ID, ExecutionID: body.ExecutionID,
			RequestDigest: "sha256:" + strings.Repeat("d", 64)}
		f.mu.Lock()
		f.runs[ref.RunID] = &fakeRun{ref: ref, status: wire.StatusRunning}
		f.mu.Unlock()
		view.ContextBoundary = &wire.BoundaryProof{RunID: ref.RunID, Provider: ref.Provider, EnvironmentID: ref.EnvironmentID, SessionID: ref.SessionID,
			ExecutionID: ref.ExecutionID, RequestDigest: ref.RequestDigest, Boundary: wire.ContextBoundary{Kind: "revision", Revision: "r1"}, ObservedAt: "2026-01-01T00:00:00Z"}
		w.WriteHeader(202)
		json.NewEncoder(w).Encode(wire.TurnAdmission{Session: *view, Run: wire.AdmittedRun{ID: ref.RunID, Provider: ref.Provider,
			EnvironmentID: ref.EnvironmentID, SessionID: ref.SessionID, ExecutionID: ref.ExecutionID, RequestDigest: ref.RequestDigest}})
	}
	f.routes["GET /v1/sessions/pi-session"] = func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(view) }
	return f, view
}

func TestNative_turnInteractionAndContinuation(t *testing.T) {
	f, view := nativeFake(t)
	p := f.provider(t, func(o *Options) { o.DefaultModel = "" })
	env, err := p.Create(t.Context(), CreateRequest{Profile: Profile{Name: "pi", Harness: "pi", Model: ProfileModel{Default: "gpt-5", Provider: "openai"}}})
	if err != nil {
		t.Fatal(err)
	}
	// A turn with no caller ids derives them (see TestNative_plainTurn).
	if ref, err := env.Dispatch(t.Context(), Turn{Prompt: "x", SessionID: "pi-session"}); err != nil || ref.ControlRef.ExecutionID != ref.ControlRef.RunID {
		t.Errorf("native Dispatch without caller ids = %+v, %v, want a run whose execution id is its run id", ref, err)
	}
	events, err := drain(env.Stream(t.Context(), Turn{Prompt: "x", SessionID: "pi-session", TurnID: "t1", ExecutionID: "pi-exec-1", Interactions: map[string]any{}}))
	if err != nil {
		t.Fatalf("native Stream: %v", err)
	}
	if st := events[len(events)-2]; st.Type != EventStatus || st.Status != StatusCompleted || st.ID != "4" {
		t.Errorf("native event before the result = %+v, want the confirmed terminal status 4", st)
	}
	if last := events[len(events)-1]; last.Type != EventResult || last.FinalText != "Hi" || last.FinishReason != wire.FinishStop ||
		last.Usage == nil || last.ID != "4:1" {
		t.Errorf("last native event = %+v, want the result 4:1 with text Hi, finish stop and usage", last)
	}
	if view.Model != "pi/openai/gpt-5" || f.count("POST /v1/chat/completions") != 0 {
		t.Errorf("native turn used model %q and %d chat requests; want pi/openai/gpt-5 and none", view.Model, f.count("POST /v1/chat/completions"))
	}
	if _, err := drain(env.Stream(t.Context(), Turn{Prompt: "x", SessionID: "pi-session", TurnID: "t9", ExecutionID: "e9", Interactions: map[string]any{"question": true}})); err == nil ||
		!strings.Contains(err.Error(), "does not advertise requested interaction kind(s): question") {
		t.Errorf("unadvertised interaction kind = %v", err)
	}

	s, _ := env.Session("pi-session", SessionOptions{})
	ref, ok := s.ControlRef()
	if !ok {
		t.Fatal("no control ref after a native turn")
	}
	ireq := wire.InteractionRequest{ID: "perm-1", RequestDigest: "sha256:" + strings.Repeat("1", 64),
		Binding: wire.InteractionRequestBinding{RunID: ref.RunID, Provider: ref.Provider, EnvironmentID: ref.EnvironmentID,
			SessionID: ref.SessionID, ExecutionID: ref.ExecutionID, InteractionID: "perm-1"}}
	cmd, err := NewInteractionCommand("op-1", ireq, wire.InteractionResponse{Outcome: wire.OutcomeAccepted, Data: PermissionGrant(wire.GrantAllowOnce)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		status int
		ack    string
		want   string
		err    bool
	}{
		{200, wire.InteractionAccepted, wire.InteractionAccepted, false},
		{409, wire.InteractionAlreadyResolvedDifferent, wire.InteractionAlreadyResolvedDifferent, false},
		{200, wire.InteractionCancelled, "", true}, // status contradicts HTTP
		{502, "", wire.InteractionTransportFailure, false},
	} {
		f.routes["POST /v1/runs/"+ref.RunID+"/interactions/perm-1/respond"] = func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
			if tt.ack != "" {
				json.NewEncoder(w).Encode(wire.InteractionAck{OperationID: cmd.OperationID, Binding: cmd.Binding, CommandDigest: cmd.CommandDigest, Status: tt.ack})
			}
		}
		ack, err := s.RespondToInteraction(t.Context(), cmd)
		if (err != nil) != tt.err || ack.Status != tt.want {
			t.Errorf("RespondToInteraction (HTTP %d, %q) = %+v, %v, want %q (err %v)", tt.status, tt.ack, ack, err, tt.want, tt.err)
		}
	}
	foreign := cmd
	foreign.Binding.SessionID = "other"
	if ack, err := s.RespondToInteraction(t.Context(), foreign); err != nil || ack.Status != wire.InteractionBindingMismatch {
		t.Errorf("foreign binding = %+v, %v, want binding_mismatch", ack, err)
	}

	// A restarted process continues the conversation natively.
	p2 := f.provider(t, func(o *Options) { o.DefaultModel = "" })
	env2, err := p2.Get(t.Context(), env.ID(), GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := env2.Session("pi-session", SessionOptions{ControlRef: &ref})
	if err != nil {
		t.Fatal(err)
	}
	boundary, err := s2.ContextBoundary(t.Context())
	if err != nil || boundary == nil || boundary.Boundary.Revision != "r1" {
		t.Fatalf("ContextBoundary = %+v, %v", boundary, err)
	}
	turn := wire.ContinuationTurn{Prompt: "go on"}
	req, err := NewContinuationRequest("cont-1", ref, *boundary, turn)
	if err != nil {
		t.Fatal(err)
	}
	next := ref
	next.RunID, next.ExecutionID, next.RequestDigest = "pi-exec-2", "pi-exec-2", "sha256:"+strings.Repeat("e", 64)
	for _, tt := range []struct {
		status, want string
		moved        bool
		noBoundary   bool
	}{
		{wire.ContinuationBoundaryMismatch, wire.ContinuationBoundaryMismatch, false, false},
		{wire.ContinuationAccepted, "", false, true},
		{wire.ContinuationAccepted, wire.ContinuationAccepted, true, false},
	} {
		f.routes["POST /v1/sessions/pi-session/continue"] = func(w http.ResponseWriter, r *http.Request) {
			var body wire.ContinueBody
			json.NewDecoder(r.Body).Decode(&body)
			out := wire.ContinuationOutcome{Acknowledgement: wire.ContinuationAck{OperationID: body.Request.OperationID,
				RequestDigest: body.Request.RequestDigest, Status: tt.status, ActualBoundary: &body.Request.ExpectedBoundary}}
			if tt.status == wire.ContinuationAccepted {
				n := next.wire()
				out.ControlRef, out.Result = &n, &wire.ContinuationResult{Text: "continued", Success: true}
			} else {
				w.WriteHeader(409)
			}
			if tt.noBoundary {
				out.Acknowledgement.ActualBoundary = nil
			}
			json.NewEncoder(w).Encode(out)
		}
		out, err := s2.ContinueNative(t.Context(), req, turn)
		if tt.noBoundary {
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Errorf("ContinueNative accepted without the observed boundary = %+v, %v, want *ProtocolError", out, err)
			}
			continue
		}
		if err != nil || out.Acknowledgement.Status != tt.want {
			t.Fatalf("ContinueNative = %+v, %v, want %s", out, err, tt.want)
		}
		if got, _ := s2.ControlRef(); (got == next) != tt.moved {
			t.Errorf("after %s the session's run is %+v", tt.status, got)
		}
	}
	_, err = s2.ContinueNative(t.Context(), req, wire.ContinuationTurn{Prompt: "something else"})
	var im *IdentityMismatchError
	if !errors.As(err, &im) {
		t.Errorf("ContinueNative with the old run = %v, want *IdentityMismatchError", err)
	}
}

func TestNative_sandboxRejectedBeforeSession(t *testing.T) {
	f, _ := nativeFake(t)
	p := f.provider(t, func(o *Options) {
		o.DefaultModel = ""
		o.DefaultExecution = &Execution{Kind: ExecutionSandbox, RepoURL: "https://example.invalid/r.git"}
	})
	env, err := p.Create(t.Context(), CreateRequest{Profile: Profile{Name: "pi", Harness: "pi"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Dispatch(t.Context(), Turn{Prompt: "x", SessionID: "pi-session", TurnID: "t", ExecutionID: "e"})
	if err == nil || !strings.Contains(err.Error(), "cli-bridge retained sessions cannot execute in a sandbox; use one-shot execution") {
		t.Errorf("Dispatch with a sandbox default = %v", err)
	}
	if n := f.count("POST /v1/sessions"); n != 0 {
		t.Errorf("retained session creates = %d, want 0", n)
	}
}

// TestNative_resumedResult reads a completed native turn again from each
// cursor: every read ends with the one result the full replay ends with
// (id 4:1, the whole turn's text and usage), and none repeats an event the
// cursor covered.
func TestNative_resumedResult(t *testing.T) {
	f, _ := nativeFake(t)
	p := f.provider(t, func(o *Options) { o.DefaultModel = "" })
	env, err := p.Create(t.Context(), CreateRequest{Profile: Profile{Name: "pi", Harness: "pi", Model: ProfileModel{Default: "gpt-5", Provider: "openai"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drain(env.Stream(t.Context(), Turn{Prompt: "x", SessionID: "pi-session", TurnID: "t1", ExecutionID: "pi-exec-1"})); err != nil {
		t.Fatal(err)
	}
	s, err := env.Session("pi-session", SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read := func(since string) []Event {
		t.Helper()
		var out []Event
		for ev, err := range s.Events(t.Context(), since) {
			if err != nil {
				t.Fatalf("Events(%q): %v", since, err)
			}
			out = append(out, ev)
		}
		return out
	}
	full := read("")
	ids := func(evs []Event) (out []string) {
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		return out
	}
	if got := strings.Join(ids(full), " "); got != "1 2 3 4 4:1" {
		t.Fatalf("full replay ids = %s, want 1 2 3 4 4:1", got)
	}
	want := full[len(full)-1]
	for _, tt := range []struct {
		since string
		ids   string
	}{
		{"2", "3 4 4:1"},
		{"3", "4 4:1"},
		{"4", "4:1"},
		{"4:0", "4:1"},
		{"4:1", ""},
	} {
		got := read(tt.since)
		if strings.Join(ids(got), " ") != tt.ids {
			t.Errorf("Events(after %s) ids = %v, want %s", tt.since, ids(got), tt.ids)
			continue
		}
		if len(got) == 0 {
			continue
		}
		if last := got[len(got)-1]; last.Type != EventResult || last.FinalText != want.FinalText || last.FinalText != "Hi" ||
			last.Usage == nil || *last.Usage != *want.Usage {
			t.Errorf("Events(after %s) result = %+v, want the full replay's %+v", tt.since, last, want)
		}
	}
}
