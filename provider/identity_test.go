package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// nativeEnv returns an environment of a claude-code route whose discovered
// capability document proves interactions, so its turns take the
// retained native session routes, as against our bridge.
func nativeEnv(t *testing.T, f *fakeBridge, key string) *Environment {
	t.Helper()
	f.caps = piCaps
	p := f.provider(t)
	if _, err := p.Capabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	env, err := p.Create(t.Context(), CreateRequest{Profile: Profile{Name: "worker", Harness: "claude-code"}, IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if !env.native() {
		t.Fatal("environment does not use the retained native routes")
	}
	return env
}

func lastTurn(t *testing.T, f *fakeBridge) wire.TurnRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.turns) == 0 {
		t.Fatal("the bridge admitted no retained turn")
	}
	return f.turns[len(f.turns)-1]
}

func agentID(env, session, exec string) string {
	sum := sha256.Sum256([]byte(env + "\x00" + session + "\x00" + exec))
	return "agent-" + hex.EncodeToString(sum[:])
}

func TestPrepareRun_identity(t *testing.T) {
	const env = "cb1.env"
	tests := []struct {
		name string
		turn Turn
		// want is the identity; "" for RunID means derived from a nonce.
		want   ControlRef
		turnID string
	}{
		{"execution id is a run id", Turn{ExecutionID: "exec-1"},
			ControlRef{RunID: "exec-1", SessionID: "exec-1", ExecutionID: "exec-1"}, "exec-1"},
		{"execution id in a session", Turn{SessionID: "s", ExecutionID: "exec-1"},
			ControlRef{RunID: "exec-1", SessionID: "s", ExecutionID: "exec-1"}, "exec-1"},
		{"execution id that is no run id", Turn{SessionID: "s", ExecutionID: "exec/1 a"},
			ControlRef{RunID: agentID(env, "s", "exec/1 a"), SessionID: "s", ExecutionID: "exec/1 a"}, "exec/1 a"},
		{"execution and turn id", Turn{SessionID: "s", ExecutionID: "exec-1", TurnID: "t1"},
			ControlRef{RunID: "exec-1", SessionID: "s", ExecutionID: "exec-1"}, "t1"},
		{"turn id only", Turn{SessionID: "s", TurnID: "t1"},
			ControlRef{RunID: agentID(env, "s", "t1"), SessionID: "s", ExecutionID: agentID(env, "s", "t1")}, "t1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // derived the same way every time
				r, err := prepareRun(DefaultName, env, &tt.turn)
				if err != nil {
					t.Fatal(err)
				}
				want := tt.want
				want.Provider, want.EnvironmentID = DefaultName, env
				if diff := cmp.Diff(want, r.ref); diff != "" {
					t.Errorf("prepareRun(%+v) identity (-want +got):\n%s", tt.turn, diff)
				}
				if r.turnID != tt.turnID {
					t.Errorf("prepareRun(%+v) turn id = %q, want %q", tt.turn, r.turnID, tt.turnID)
				}
			}
		})
	}
	t.Run("fresh turn", func(t *testing.T) {
		var ids []string
		for range 2 {
			r, err := prepareRun(DefaultName, env, &Turn{Prompt: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			ref := r.ref
			if !strings.HasPrefix(ref.RunID, "agent-") || ref.SessionID != ref.RunID || ref.ExecutionID != ref.RunID || r.turnID != ref.RunID {
				t.Errorf("prepareRun(fresh) = %+v turn %q, want session, execution and turn id equal to an agent- run id", ref, r.turnID)
			}
			ids = append(ids, ref.RunID)
		}
		if ids[0] == ids[1] {
			t.Errorf("two fresh turns got the same run id %q", ids[0])
		}
	})
}

func TestNative_plainTurn(t *testing.T) {
	tests := []struct {
		name string
		turn Turn
		// start runs the turn and returns its control reference.
		start func(t *testing.T, env *Environment, turn Turn) ControlRef
	}{
		{"Stream, no ids", Turn{Prompt: "hi"}, streamTurn},
		{"Stream, session and execution id", Turn{Prompt: "hi", SessionID: "s1", ExecutionID: "exec-1"}, streamTurn},
		{"Dispatch, no ids", Turn{Prompt: "hi"}, dispatchTurn},
		{"Dispatch, session id only", Turn{Prompt: "hi", SessionID: "s2"}, dispatchTurn},
		{"Prompt, no ids", Turn{Prompt: "hi"}, promptTurn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, loadTranscript(t, "canonical_ok.sse"))
			env := nativeEnv(t, f, "")
			ref := tt.start(t, env, tt.turn)
			if err := ref.Validate(); err != nil {
				t.Errorf("ControlRef %+v: %v", ref, err)
			}
			got := lastTurn(t, f)
			wantTurn := tt.turn.ExecutionID
			if wantTurn == "" {
				wantTurn = ref.RunID
			}
			if got.RunID != ref.RunID || got.ExecutionID != ref.ExecutionID || got.TurnID != wantTurn {
				t.Errorf("turn request run/execution/turn = %q/%q/%q, want %q/%q/%q", got.RunID, got.ExecutionID, got.TurnID, ref.RunID, ref.ExecutionID, wantTurn)
			}
			if tt.turn.SessionID != "" && ref.SessionID != tt.turn.SessionID {
				t.Errorf("session = %q, want %q", ref.SessionID, tt.turn.SessionID)
			}
			if n := f.count("POST /v1/chat/completions"); n != 0 {
				t.Errorf("chat requests = %d, want 0: the turn takes the retained routes", n)
			}
		})
	}
}

func streamTurn(t *testing.T, env *Environment, turn Turn) ControlRef {
	t.Helper()
	events, err := drain(env.Stream(t.Context(), turn))
	if err != nil {
		t.Fatalf("Stream(%+v): %v", turn, err)
	}
	last := events[len(events)-1]
	if last.Type != EventResult || last.Status != StatusCompleted || last.FinalText == "" || last.FinishReason == "" {
		t.Fatalf("Stream(%+v) ended with %s/%s %q/%q, want a completed result with its text and finish reason", turn,
			last.Type, last.Status, last.FinalText, last.FinishReason)
	}
	s, err := env.Session(last.SessionID, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref, ok := s.ControlRef()
	if !ok || ref.RunID != last.RunID {
		t.Fatalf("session %q ControlRef = %+v, %v, want run %q", last.SessionID, ref, ok, last.RunID)
	}
	return ref
}

func dispatchTurn(t *testing.T, env *Environment, turn Turn) ControlRef {
	t.Helper()
	ref, err := env.Dispatch(t.Context(), turn)
	if err != nil {
		t.Fatalf("Dispatch(%+v): %v", turn, err)
	}
	return ref.ControlRef
}

func promptTurn(t *testing.T, env *Environment, turn Turn) ControlRef {
	t.Helper()
	s, err := env.Session("prompted", SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Prompt(t.Context(), turn)
	if err != nil || !res.Success || res.Text != "Hi" {
		t.Fatalf("Prompt(%+v) = %+v, %v, want a successful Hi", turn, res, err)
	}
	ref, _ := s.ControlRef()
	return ref
}

// TestDispatch_sameExecutionID retries one execution: in the same process,
// and from another one (the same environment through its idempotency key),
// on both transports. Every retry is the same turn and run.
func TestDispatch_sameExecutionID(t *testing.T) {
	for _, native := range []bool{false, true} {
		for _, exec := range []string{"exec-retry", "exec/retry 1"} {
			name := map[bool]string{false: "one-shot", true: "native"}[native] + " " + exec
			t.Run(name, func(t *testing.T) {
				transcript := map[bool]string{false: "legacy_ok.sse", true: "canonical_ok.sse"}[native]
				f := newFake(t, loadTranscript(t, transcript))
				f.final = wire.StatusRunning
				start := func() *Environment {
					if native {
						return nativeEnv(t, f, "k")
					}
					env, err := f.provider(t).Create(t.Context(), CreateRequest{Profile: Profile{Name: "worker", Harness: "claude-code"}, IdempotencyKey: "k"})
					if err != nil {
						t.Fatal(err)
					}
					return env
				}
				env, restarted := start(), start()
				turn := Turn{Prompt: "hi", SessionID: "s", ExecutionID: exec}
				first := dispatchTurn(t, env, turn)
				for i, e := range []*Environment{env, restarted} {
					if again := dispatchTurn(t, e, turn); again != first {
						t.Errorf("retry %d = %+v, want %+v", i, again, first)
					}
				}
				f.mu.Lock()
				runs := len(f.runs)
				f.mu.Unlock()
				if runs != 1 {
					t.Errorf("bridge runs = %d, want 1", runs)
				}
				if native {
					f.mu.Lock()
					for _, tr := range f.turns {
						if tr.TurnID != exec || tr.RunID != first.RunID {
							t.Errorf("turn request turn/run = %q/%q, want %q/%q", tr.TurnID, tr.RunID, exec, first.RunID)
						}
					}
					f.mu.Unlock()
				}
				// Without an ExecutionID every call is a fresh turn.
				a, b := dispatchTurn(t, env, Turn{Prompt: "hi"}), dispatchTurn(t, env, Turn{Prompt: "hi"})
				if a.RunID == b.RunID {
					t.Errorf("two fresh dispatches share run %q", a.RunID)
				}
			})
		}
	}
}

// TestTurn_History: a turn's history travels before its prompt, as the
// chat route's messages and as the retained turn's history; one that is
// not user and assistant text is refused before any request.
func TestTurn_History(t *testing.T) {
	history := []wire.Message{{Role: "user", Content: wire.MustJSON("two and two?")}, {Role: "assistant", Content: wire.MustJSON("four")}}
	t.Run("chat route", func(t *testing.T) {
		f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
		ref := dispatchTurn(t, newEnv(t, f), Turn{Prompt: "and three?", History: history, ExecutionID: "exec-1"})
		msgs, _ := f.run(ref.RunID).body["messages"].([]any)
		got, _ := json.Marshal(msgs)
		want := `[{"content":"two and two?","role":"user"},{"content":"four","role":"assistant"},{"content":"and three?","role":"user"}]`
		if string(got) != want {
			t.Errorf("messages = %s, want %s", got, want)
		}
	})
	t.Run("retained route", func(t *testing.T) {
		f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
		dispatchTurn(t, nativeEnv(t, f, "k1"), Turn{Prompt: "and three?", History: history, ExecutionID: "exec-1"})
		if got := lastTurn(t, f); !cmp.Equal(got.History, history) || got.Message != "and three?" {
			t.Errorf("retained turn = %+v, want the history before the message", got)
		}
	})
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	env := newEnv(t, f)
	if _, err := env.Dispatch(t.Context(), Turn{Prompt: "x", History: []wire.Message{{Role: "system", Content: wire.MustJSON("obey")}}}); err == nil {
		t.Error("a system message in the history was sent")
	}
	if n := f.count("POST"); n != 0 {
		t.Errorf("%d requests for a refused turn", n)
	}
}
