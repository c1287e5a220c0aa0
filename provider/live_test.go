package provider_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/npmtest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider"
)

// claudeCodeSpec is the Claude Code release the live test drives.
const claudeCodeSpec = "@anthropic-ai/claude-code@2.1.332"

// startBridge runs the box-bridge binary with the real Claude Code CLI
// pointed at a local model endpoint; it returns the bridge URL. The bridge
// takes the bearer "live-bearer".
func startBridge(t *testing.T, script routerstub.Script) string {
	t.Helper()
	env := testbed.Require(t)
	pkg := npmtest.Install(t, env, claudeCodeSpec)
	key := "sk-router-live-" + fmt.Sprint(time.Now().UnixNano())
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: script, ServedModel: "router-served-model"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(stub)
	t.Cleanup(hs.Close)
	p := boxbridgetest.Start(t, boxbridgetest.Options{Bearer: "live-bearer", Env: []string{
		"BRIDGE_BACKENDS=claude", "CLAUDE_BIN=" + pkg.Bin("claude"),
		"TANGLE_API_KEY=" + key, "TANGLE_ROUTER_URL=" + hs.URL, "PATH=" + pkg.PATH(), "HOME=" + t.TempDir(),
	}})
	return p.URL
}

// TestLive_ClaudeCode drives the real bridge binary and the real Claude
// Code CLI through the provider: create, stream, dispatch then events from
// a cursor, a saved ControlRef used from a new Provider to replay and read
// the result, cancel, the refusals of a reconstructed environment, and
// LookupRun.
func TestLive_ClaudeCode(t *testing.T) {
	streamed := "streamed through the provider"
	dispatched := "dispatched and replayed"
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Deltas(streamed, 5),
		routerstub.Deltas(dispatched, 4),
		routerstub.Stall(3*time.Minute),
	)
	url := startBridge(t, script)
	ctx := t.Context()
	opts := provider.Options{BaseURL: url, BearerToken: "live-bearer", DefaultModel: "claude-code/claude-sonnet-4-5", BodyTimeout: 3 * time.Minute}
	p, err := provider.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := p.Capabilities(ctx)
	if err != nil {
		t.Fatalf("Capabilities: %v", err)
	}
	// Claude Code proves retained control and interactions, so turns go
	// through the retained session routes (TestLive_ClaudeCodePlainTurn
	// drives them with turns that carry no caller ids).
	if !caps.RetainedControlProven() || !caps.InteractionsProven() || caps.NativeContinuationProven() {
		t.Fatalf("capabilities = %+v, want retained control and interactions, no native continuation", caps)
	}
	env, err := p.Create(ctx, provider.CreateRequest{Profile: provider.Profile{Name: "live", Harness: "claude-code"}})
	if err != nil {
		t.Fatal(err)
	}

	// Create and stream.
	start := time.Now()
	var text string
	var terminal *provider.Event
	var served []string
	for ev, err := range env.Stream(ctx, provider.Turn{Prompt: "Say something.", SessionID: "live-stream", TurnID: "live-turn-1", ExecutionID: "live-exec-1"}) {
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		text += ev.Delta
		if len(ev.ProviderModels) > 0 {
			served = ev.ProviderModels
		}
		if ev.Type == provider.EventStatus && ev.Status == provider.StatusCompleted {
			terminal = &ev
		}
	}
	t.Logf("stream turn took %s", time.Since(start).Round(time.Millisecond))
	if terminal == nil || terminal.RunID != "live-exec-1" || !strings.Contains(text, streamed) {
		t.Fatalf("stream text = %q, terminal %+v, want %q and a completed status of run live-exec-1", text, terminal, streamed)
	}
	if len(served) == 0 || served[0] != "router-served-model" {
		t.Errorf("provider models = %v, want the model the endpoint named", served)
	}

	// Dispatch, then events from the start and from a cursor.
	ref, err := env.Dispatch(ctx, provider.Turn{Prompt: "Say more.", SessionID: "live-dispatch", TurnID: "live-turn-2", ExecutionID: "live-exec-2"})
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	saved, _ := json.Marshal(ref.ControlRef)
	s, err := env.Session(ref.ID, provider.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var all []provider.Event
	for ev, err := range s.Events(ctx, "0") {
		if err != nil {
			t.Fatalf("Events(0): %v", err)
		}
		all = append(all, ev)
	}
	if len(all) < 2 {
		t.Fatalf("Events(0) = %d events, want at least 2", len(all))
	}
	var rest []string
	for ev, err := range s.Events(ctx, all[0].ID) {
		if err != nil {
			t.Fatalf("Events(%s): %v", all[0].ID, err)
		}
		rest = append(rest, ev.ID)
	}
	if len(rest) != len(all)-1 || rest[0] != all[1].ID {
		t.Errorf("Events(%s) ids = %v, want those after the cursor", all[0].ID, rest)
	}

	// A new Provider (a restarted process) with the saved reference.
	var back provider.ControlRef
	if err := json.Unmarshal(saved, &back); err != nil || back != ref.ControlRef {
		t.Fatalf("ControlRef JSON round trip = %+v, %v", back, err)
	}
	p2, _ := provider.New(opts)
	env2, err := p2.Get(ctx, back.EnvironmentID, provider.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	s2, err := env2.Session(back.SessionID, provider.SessionOptions{ControlRef: &back})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s2.Result(ctx)
	if err != nil || !res.Success || !strings.Contains(res.Text, dispatched) || res.RequestDigest != back.RequestDigest {
		t.Fatalf("Result after restart = %+v, %v", res, err)
	}
	if res.Usage == nil || res.Usage.Provenance != provider.UsageMeasured || res.Usage.OutputTokens <= 0 {
		t.Errorf("usage = %+v, want measured", res.Usage)
	}
	if res.Harness == nil || res.Harness.Process == "" {
		t.Errorf("Result after restart: harness %+v, want how the process came to serve the turn", res.Harness)
	}
	var replayed int
	for _, err := range s2.Events(ctx, "0") {
		if err != nil {
			t.Fatalf("replay after restart: %v", err)
		}
		replayed++
	}
	if replayed != len(all) {
		t.Errorf("replay after restart = %d events, want %d", replayed, len(all))
	}
	_, err = env2.Dispatch(ctx, provider.Turn{Prompt: "x"})
	var re *provider.ReconstructedError
	if !errors.As(err, &re) || err.Error() != "a reconstructed cli-bridge environment can only control an existing run" {
		t.Errorf("reconstructed Dispatch = %v", err)
	}
	if _, err := s2.Prompt(ctx, provider.Turn{Prompt: "x"}); err == nil || err.Error() != "a reconstructed cli-bridge session cannot start another turn" {
		t.Errorf("reconstructed Prompt = %v", err)
	}

	// LookupRun: exact coordinates find the run, one wrong one finds nothing.
	planned := provider.PlannedRun{RunID: back.RunID, EnvironmentID: back.EnvironmentID, SessionID: back.SessionID, ExecutionID: back.ExecutionID}
	if got, err := p2.LookupRun(ctx, planned); err != nil || got == nil || *got != back {
		t.Errorf("LookupRun = %v, %v, want %+v", got, err, back)
	}
	planned.SessionID = "another-session"
	if got, err := p2.LookupRun(ctx, planned); err != nil || got != nil {
		t.Errorf("LookupRun with a wrong session = %v, %v, want nothing", got, err)
	}

	// Cancel a live run from the restarted process.
	live, err := env.Dispatch(ctx, provider.Turn{Prompt: "Think for a long time.", SessionID: "live-cancel", TurnID: "live-turn-3", ExecutionID: "live-exec-3"})
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	s3, err := env2.Session(live.ID, provider.SessionOptions{ControlRef: &live.ControlRef})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	st, err := s3.Cancel(ctx)
	t.Logf("cancel confirmed in %s", time.Since(start).Round(time.Millisecond))
	if err != nil || !st.Terminal || st.Status != provider.StatusCancelled {
		t.Fatalf("Cancel = %+v, %v, want terminal cancelled", st, err)
	}
	if err := env.Destroy(ctx); err != nil {
		t.Errorf("Destroy: %v", err)
	}
}

// TestLive_ClaudeCodePlainTurn drives the real bridge and Claude Code CLI
// with turns as clients of the TypeScript cli-bridge send them: a plain
// turn with no ids, then a turn with only a session and an execution id
// whose model call stalls past its Timeout, so the client cancels it; a
// retry of that execution attaches to the same run without a new model
// call. Then Close refuses new turns.
func TestLive_ClaudeCodePlainTurn(t *testing.T) {
	plain := "a plain turn through the retained routes"
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"), routerstub.Deltas(plain, 3), routerstub.Stall(3*time.Minute))
	var calls atomic.Int64
	url := startBridge(t, routerstub.ScriptFunc(func(r routerstub.Request) routerstub.Reply {
		if !r.Side {
			calls.Add(1)
		}
		return q.Pick(r)
	}))
	ctx := t.Context()
	p, err := provider.New(provider.Options{BaseURL: url, BearerToken: "live-bearer", DefaultModel: "claude-code/claude-sonnet-4-5", BodyTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if caps, err := p.Capabilities(ctx); err != nil || !caps.InteractionsProven() {
		t.Fatalf("Capabilities = %+v, %v, want interactions (the retained native routes)", caps, err)
	}
	env, err := p.Create(ctx, provider.CreateRequest{Profile: provider.Profile{Name: "live-plain", Harness: "claude-code"}})
	if err != nil {
		t.Fatal(err)
	}

	var text string
	var final provider.Event
	for ev, err := range env.Stream(ctx, provider.Turn{Prompt: "Say something."}) {
		if err != nil {
			t.Fatalf("plain Stream: %v", err)
		}
		text += ev.Delta
		final = ev
	}
	if final.Status != provider.StatusCompleted || !strings.Contains(text, plain) || final.ExecutionID != final.RunID || final.SessionID != final.RunID {
		t.Fatalf("plain Stream = %q ending %+v, want %q and a completed run whose session and execution ids are its run id", text, final, plain)
	}

	turn := provider.Turn{Prompt: "Think for a long time.", SessionID: "live-plain-timeout", ExecutionID: "live-plain-timeout-exec", Timeout: 3 * time.Second}
	start := time.Now()
	var last provider.Event
	var serr error
	for ev, err := range env.Stream(ctx, turn) {
		if err != nil {
			serr = err
			break
		}
		last = ev
	}
	t.Logf("timed-out turn ended after %s", time.Since(start).Round(time.Millisecond))
	var te *provider.TimeoutError
	if !errors.As(serr, &te) || te.Timeout != turn.Timeout || te.RunID != turn.ExecutionID {
		t.Fatalf("Stream past its timeout = %v, want a *TimeoutError of run %s", serr, turn.ExecutionID)
	}
	if last.Type != provider.EventStatus || last.Status != provider.StatusFailed || !strings.Contains(last.Detail, "turn timeout after 3s") {
		t.Errorf("last event = %+v, want a failed status naming the timeout", last)
	}
	s, err := env.Session(turn.SessionID, provider.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(ctx)
	if err != nil || !st.Terminal || st.Status != provider.StatusCancelled {
		t.Fatalf("Status after the timeout = %+v, %v, want terminal cancelled", st, err)
	}
	before := calls.Load()
	turn.Timeout = 0 // not part of the run's identity
	ref, err := env.Dispatch(ctx, turn)
	if err != nil || ref.ControlRef.RunID != turn.ExecutionID || ref.ControlRef.RequestDigest != st.Snapshot.RequestDigest {
		t.Fatalf("retried Dispatch = %+v, %v, want the timed-out run %s", ref, err, turn.ExecutionID)
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("the retry made %d model calls, want 0", n)
	}

	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var closedErr error
	for _, err := range env.Stream(ctx, provider.Turn{Prompt: "x"}) {
		closedErr = err
	}
	if !errors.Is(closedErr, provider.ErrClosed) {
		t.Errorf("Stream after Close = %v, want ErrClosed", closedErr)
	}
}

// TestLive_CancelledRunReaders cancels live runs while their readers
// hold an event: a detached reader (Session.Events) and the turn's own
// stream (Environment.Stream) both still read the run to its cancelled
// end, with no error, though the confirmed cancellation stopped them
// where they were.
func TestLive_CancelledRunReaders(t *testing.T) {
	// A long answer, a delta a second, keeps each run live while its
	// reader holds the first event.
	slow := routerstub.Deltas(strings.Repeat("slow ", 180), 180).Paced(time.Second)
	url := startBridge(t, routerstub.NewQueue(routerstub.Text("unexpected extra call"), slow, slow))
	ctx := t.Context()
	p, err := provider.New(provider.Options{BaseURL: url, BearerToken: "live-bearer", DefaultModel: "claude-code/claude-sonnet-4-5", BodyTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(ctx) })
	env, err := p.Create(ctx, provider.CreateRequest{Profile: provider.Profile{Name: "live-readers", Harness: "claude-code"}})
	if err != nil {
		t.Fatal(err)
	}
	// read holds the first event until the run's cancellation is
	// confirmed, then reads on to the end.
	read := func(events func(yield func(provider.Event, error) bool), first chan<- struct{}, confirmed <-chan struct{}) (provider.Event, error) {
		var last provider.Event
		n := 0
		for ev, err := range events {
			if err != nil {
				return last, err
			}
			if n++; n == 1 {
				close(first)
				<-confirmed
			}
			last = ev
		}
		return last, nil
	}
	cases := []struct {
		name   string
		events func(s *provider.Session) func(yield func(provider.Event, error) bool)
	}{
		{"session events", func(s *provider.Session) func(yield func(provider.Event, error) bool) { return s.Events(ctx, "0") }},
		{"turn stream", nil},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sid := fmt.Sprintf("live-readers-%d", i)
			turn := provider.Turn{Prompt: "Think for a long time.", SessionID: sid, ExecutionID: sid + "-exec"}
			first, confirmed := make(chan struct{}), make(chan struct{})
			type outcome struct {
				last provider.Event
				err  error
			}
			done := make(chan outcome, 1)
			if c.events == nil {
				go func() {
					last, err := read(env.Stream(ctx, turn), first, confirmed)
					done <- outcome{last, err}
				}()
			} else {
				if _, err := env.Dispatch(ctx, turn); err != nil {
					t.Fatalf("Dispatch: %v", err)
				}
				s, err := env.Session(sid, provider.SessionOptions{})
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					last, err := read(c.events(s), first, confirmed)
					done <- outcome{last, err}
				}()
			}
			select {
			case <-first:
			case <-time.After(time.Minute):
				t.Fatal("no first event within a minute")
			}
			s, err := env.Session(sid, provider.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Cancel(ctx)
			if err != nil || st.Status != provider.StatusCancelled {
				t.Fatalf("Cancel = %+v, %v, want cancelled", st, err)
			}
			close(confirmed)
			var o outcome
			select {
			case o = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the reader did not end within a minute of the confirmed cancellation")
			}
			if o.err != nil {
				t.Fatalf("reader ended with %v, want the run's end", o.err)
			}
			if o.last.Type != provider.EventStatus || o.last.Status != provider.StatusCancelled {
				t.Errorf("last event = %+v, want the cancelled status", o.last)
			}
		})
	}
}
