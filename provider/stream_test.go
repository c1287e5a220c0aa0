package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func newEnv(t *testing.T, f *fakeBridge, mod ...func(*Options)) *Environment {
	t.Helper()
	env, err := f.provider(t, mod...).Create(t.Context(), CreateRequest{Profile: Profile{Name: "worker", Harness: "claude-code"}})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// drain collects a stream's events and its error.
func drain(seq func(func(Event, error) bool)) ([]Event, error) {
	var events []Event
	var err error
	seq(func(ev Event, e error) bool {
		if e != nil {
			err = e
			return false
		}
		events = append(events, ev)
		return true
	})
	return events, err
}

func TestStream_legacy(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	env := newEnv(t, f)
	events, err := drain(env.Stream(t.Context(), Turn{Prompt: "hi", SessionID: "s1"}))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	type brief struct{ ID, Type, Delta, Part, Status string }
	var got []brief
	for _, ev := range events {
		b := brief{ID: ev.ID, Type: ev.Type, Delta: ev.Delta, Status: ev.Status}
		if ev.Part != nil {
			b.Part = ev.Part.Type
		}
		got = append(got, b)
	}
	want := []brief{
		{"1:0", EventMessagePart, "Hello", "text", ""},
		{"2:0", EventMessagePart, "", "tool", ""},
		{"3:0", EventMessagePart, " world", "text", ""},
		{"5:0", EventUsage, "", "", ""},
		{"5:1", EventResult, "", "", StatusCompleted},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Stream events (-want +got):\n%s", diff)
	}
	res := events[len(events)-1]
	if res.FinalText != "Hello world" || res.FinishReason != "stop" {
		t.Errorf("result = %q/%q, want Hello world/stop", res.FinalText, res.FinishReason)
	}
	if diff := cmp.Diff([]string{"claude-sonnet-4-5"}, res.ProviderModels); diff != "" {
		t.Errorf("provider models (-want +got):\n%s", diff)
	}
	if res.ModelRequests == nil || *res.ModelRequests != 2 {
		t.Errorf("model requests = %v, want 2", res.ModelRequests)
	}
	u := events[3].Usage
	if u == nil || u.InputTokens != 0 || u.OutputTokens != 7 || u.Provenance != UsageMeasured {
		t.Errorf("usage = %+v, want an observed zero input, 7 output, measured", u)
	}
	if diff := cmp.Diff(u, res.Usage); diff != "" {
		t.Errorf("result usage (-stream total +result):\n%s", diff)
	}
	if n := f.count("POST /v1/chat/completions"); n != 2 {
		t.Errorf("chat requests = %d, want 2 (stream, then the aggregate confirmation)", n)
	}
	for _, ev := range events {
		if ev.RunID == "" || ev.SessionID != "s1" {
			t.Errorf("event %s has coordinates run=%q session=%q", ev.ID, ev.RunID, ev.SessionID)
		}
	}
}

func TestStream_rejections(t *testing.T) {
	tests := []struct {
		name       string
		transcript string
		replay     bool
		as         any
		message    string
	}{
		{"legacy then canonical", "mixed_legacy_then_canonical.sse", false, new(*ProtocolError), "cli-bridge mixed canonical and OpenAI stream formats"},
		{"canonical then done", "mixed_canonical_then_done.sse", true, new(*ProtocolError), "cli-bridge mixed canonical and OpenAI stream formats"},
		{"non-increasing ids", "nonincreasing_ids.sse", false, new(*ProtocolError), "cli-bridge event id 2 does not increase after 2"},
		{"zero id", "zero_id.sse", false, new(*ProtocolError), `cli-bridge event id "0" is not a positive base-10 integer`},
		{"foreign run", "foreign_run.sse", true, new(*IdentityMismatchError), "cli-bridge canonical event belongs to another retained run"},
		{"event type mismatch", "event_type_mismatch.sse", true, new(*ProtocolError), "cli-bridge SSE event type does not match its canonical envelope"},
		{"sequence mismatch", "sequence_mismatch.sse", true, new(*ProtocolError), "cli-bridge canonical event cursor does not match its sequence"},
		{"event after terminal", "canonical_after_terminal.sse", true, new(*ProtocolError), "cli-bridge emitted an event after canonical terminal status"},
		{"no done marker", "no_done.sse", false, new(*TransportError), "cli-bridge stream ended without the [DONE] protocol marker"},
		{"error frame", "error_frame.sse", false, new(*BridgeError), "harness failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, loadTranscript(t, tt.transcript))
			env := newEnv(t, f)
			var err error
			if tt.replay {
				ref := dispatch(t, env, "s1")
				s, serr := env.Session("s1", SessionOptions{ControlRef: &ref})
				if serr != nil {
					t.Fatal(serr)
				}
				_, err = drain(s.Events(t.Context(), "0"))
			} else {
				_, err = drain(env.Stream(t.Context(), Turn{Prompt: "hi", SessionID: "s1"}))
			}
			if err == nil {
				t.Fatalf("%s: got no error, want %q", tt.transcript, tt.message)
			}
			if !errors.As(err, tt.as) {
				t.Errorf("error %T %v, want %T", err, err, tt.as)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error = %q, want it to contain %q", err, tt.message)
			}
		})
	}
}

// dispatch starts a run and returns its reference.
func dispatch(t *testing.T, env *Environment, session string) ControlRef {
	t.Helper()
	ref, err := env.Dispatch(t.Context(), Turn{Prompt: "hi", SessionID: session})
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	return ref.ControlRef
}

func TestStream_terminalIdentity(t *testing.T) {
	tests := []struct {
		name    string
		header  string
		value   string
		message string
	}{
		{"other run id", wire.HeaderRunID, "other-run", `cli-bridge accepted run "other-run" for requested run`},
		{"other digest", wire.HeaderRunRequestDigest, "sha256:" + strings.Repeat("0", 64), "cli-bridge changed request digest for run"},
		{"other session", wire.HeaderRunSessionID, "other-session", "cli-bridge returned another retained run identity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
			f.aggregate = func(w http.ResponseWriter, r *fakeRun) {
				w.Header().Set(tt.header, tt.value)
				fmt.Fprint(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}`)
			}
			env := newEnv(t, f)
			events, err := drain(env.Stream(t.Context(), Turn{Prompt: "hi"}))
			var im *IdentityMismatchError
			if !errors.As(err, &im) || !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("Stream error = %v, want *IdentityMismatchError containing %q", err, tt.message)
			}
			for _, ev := range events {
				if ev.Type == EventResult || ev.Type == EventUsage {
					t.Errorf("provisional %s event was yielded before confirmation", ev.Type)
				}
			}
		})
	}
}

func TestStream_admissionIdentity(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	f.headers = func(h http.Header) { h.Set(wire.HeaderRunEnvironmentID, "cb1.someone-else") }
	f.final = wire.StatusRunning
	env := newEnv(t, f)
	_, err := env.Dispatch(t.Context(), Turn{Prompt: "hi"})
	var im *IdentityMismatchError
	if !errors.As(err, &im) || !strings.Contains(err.Error(), "cli-bridge returned another retained run identity") {
		t.Fatalf("Dispatch error = %v, want identity mismatch", err)
	}
	if f.cancels != 1 {
		t.Errorf("cancel requests = %d, want 1 (an admitted run with a wrong identity is cancelled)", f.cancels)
	}
}

func TestStream_provisionalFinishCancelled(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	f.aggregate = func(w http.ResponseWriter, r *fakeRun) {
		fmt.Fprint(w, `{"error":{"message":"cancelled by request","type":"run_cancelled"}}`)
	}
	env := newEnv(t, f)
	events, err := drain(env.Stream(t.Context(), Turn{Prompt: "hi"}))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	last := events[len(events)-1]
	if last.Type != EventStatus || last.Status != StatusCancelled {
		t.Errorf("last event = %s/%s, want status/cancelled: the finish frame was only provisional", last.Type, last.Status)
	}
	for _, ev := range events {
		if ev.Type == EventResult {
			t.Error("a result event was yielded for a cancelled run")
		}
	}
}

func TestStream_cancelledFrame(t *testing.T) {
	f := newFake(t, loadTranscript(t, "cancelled_frame.sse"))
	env := newEnv(t, f)
	events, err := drain(env.Stream(t.Context(), Turn{Prompt: "hi"}))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if last := events[len(events)-1]; last.Status != StatusCancelled || last.ID != "2:0" {
		t.Errorf("last event = %+v, want cancelled status 2:0", last)
	}
}

func TestStream_stopCancelsRun(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	f.final = wire.StatusRunning // the run goes on after the reader leaves
	env := newEnv(t, f)
	for range env.Stream(t.Context(), Turn{Prompt: "hi", SessionID: "s"}) {
		break
	}
	if f.cancels != 1 {
		t.Fatalf("cancel requests = %d, want 1", f.cancels)
	}
	s, _ := env.Session("s", SessionOptions{})
	st, err := s.Status(t.Context())
	if err != nil || st.Status != StatusCancelled || !st.Terminal {
		t.Errorf("Status = %+v, %v, want terminal cancelled", st, err)
	}
}

func TestSession_eventsStopDetachesOnly(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	f.final = wire.StatusRunning
	env := newEnv(t, f)
	ref := dispatch(t, env, "s")
	s, err := env.Session("s", SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range s.Events(t.Context(), "0") {
		break
	}
	if f.cancels != 0 {
		t.Errorf("cancel requests = %d, want 0: stopping a reader only detaches", f.cancels)
	}
	if got, _ := s.ControlRef(); got != ref {
		t.Errorf("ControlRef = %+v, want %+v", got, ref)
	}
}

func TestSession_eventsFromCursor(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	env := newEnv(t, f)
	dispatch(t, env, "s")
	s, _ := env.Session("s", SessionOptions{})
	all, err := drain(s.Events(t.Context(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	// Resuming before the finish frame replays it, so the result follows;
	// the cursors after it are covered by the result's own frame.
	for i, ev := range all[:3] {
		rest, err := drain(s.Events(t.Context(), ev.ID))
		if err != nil {
			t.Fatalf("Events(%q): %v", ev.ID, err)
		}
		var want, got []string
		for _, e := range all[i+1:] {
			want = append(want, e.ID)
		}
		for _, e := range rest {
			got = append(got, e.ID)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Events(%q) ids (-want +got):\n%s", ev.ID, diff)
		}
	}
}

func TestStream_canonical(t *testing.T) {
	f := newFake(t, loadTranscript(t, "canonical_ok.sse"))
	env := newEnv(t, f)
	dispatch(t, env, "s")
	s, _ := env.Session("s", SessionOptions{})
	f.snapshot = func(s *wire.RunSnapshot) {
		s.Harness = &wire.HarnessStart{Process: wire.HarnessStarted, Reason: wire.StartSettingsChanged, Changed: []string{"model"}}
	}
	res, err := s.Result(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h := res.Harness; h == nil || h.Reason != wire.StartSettingsChanged || len(h.Changed) != 1 {
		t.Errorf("Result harness = %+v, want the snapshot's", h)
	}
	if res.Text != "Hi" || !res.Success || res.Status != StatusCompleted || res.EventCount != 5 || res.FinishReason != wire.FinishStop {
		t.Errorf("Result = %+v, want text Hi, finish stop, completed, 4 events and the result", res)
	}
	if res.Usage == nil || res.Usage.InputTokens != 0 || res.Usage.OutputTokens != 4 || res.Usage.Provenance != UsageUnknown {
		t.Errorf("usage = %+v, want 0/4 of unknown provenance", res.Usage)
	}
	f.final = wire.StatusError
	f.mu.Lock()
	for _, r := range f.runs {
		r.status = wire.StatusError
	}
	f.mu.Unlock()
	_, err = drain(s.Events(t.Context(), "0"))
	if err == nil || !strings.Contains(err.Error(), `canonical terminal status "completed" contradicts retained run status "error"`) {
		t.Errorf("Events over a contradicted terminal status = %v", err)
	}
}

func TestStream_ctxCancelCancelsRun(t *testing.T) {
	f := newFake(t, "")
	block := make(chan struct{})
	f.routes["POST /v1/chat/completions"] = func(w http.ResponseWriter, r *http.Request) {
		f.chatHeaders(w, r)
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-block:
		}
	}
	defer close(block)
	env := newEnv(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	var err error
	go func() { <-f.started; cancel() }()
	_, err = drain(env.Stream(ctx, Turn{Prompt: "hi"}))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Stream error = %v, want context.Canceled", err)
	}
	if f.cancels != 1 {
		t.Errorf("cancel requests = %d, want 1", f.cancels)
	}
}

// TestEvent_Frame: the stored frame of an event, from its sequence or its
// id; none for the client's own events.
func TestEvent_Frame(t *testing.T) {
	for _, c := range []struct {
		ev   Event
		want int64
	}{
		{Event{Sequence: 9, ID: "9"}, 9},
		{Event{ID: "7"}, 7},
		{Event{ID: "7:1"}, 7},
		{Event{ID: ""}, 0},
		{Event{ID: "x:1"}, 0},
		{Event{ID: "-3"}, 0},
	} {
		if got := c.ev.Frame(); got != c.want {
			t.Errorf("%+v.Frame() = %d, want %d", c.ev, got, c.want)
		}
	}
}
