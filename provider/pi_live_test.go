package provider_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/pi"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/provider"
)

// piSpec is the Pi release the client's Pi tests drive.
const piSpec = "@earendil-works/pi-coding-agent@1.6.0"

// startPi runs a bridge with the real Pi CLI answering from script and
// returns it with a new Provider's Pi environment on it.
func startPi(t *testing.T, c harnesstest.Config) (*harnesstest.Live, *provider.Environment) {
	t.Helper()
	c.Adapter, c.Spec, c.Bin = pi.Adapter{}, piSpec, "pi"
	l := harnesstest.Start(t, c)
	env, err := newPiProvider(t, l).Create(t.Context(), provider.CreateRequest{Profile: provider.Profile{Name: "pi", Harness: "pi",
		Model: provider.ProfileModel{Default: "router-chat", Provider: "router"}}})
	if err != nil {
		t.Fatal(err)
	}
	return l, env
}

// newPiProvider is a new Provider on l, as a new process makes one.
func newPiProvider(t *testing.T, l *harnesstest.Live) *provider.Provider {
	t.Helper()
	p, err := provider.New(provider.Options{BaseURL: l.URL, BearerToken: harnesstest.Bearer})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLive_PiProviderInteraction drives a Pi environment through the Go
// client: its capability document proves interactions, so Dispatch runs
// the turn as a retained session turn, and the permission question for
// the model's bash call is declined with RespondToInteraction; the
// command does not run and the turn completes.
func TestLive_PiProviderInteraction(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker.txt")
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.ToolCall("bash", fmt.Sprintf(`{"command":"echo ran > %s"}`, marker))).
		AfterTool(routerstub.Text("tool step over"))
	_, env := startPi(t, harnesstest.Config{Script: q})
	ctx := t.Context()
	if !env.Capabilities().InteractionsProven() {
		t.Fatalf("capabilities = %+v, want interactions proven for pi", env.Capabilities())
	}
	ref, err := env.Dispatch(ctx, provider.Turn{Prompt: "Write the marker file.", SessionID: "pi-tool", TurnID: "tool-1",
		ExecutionID: "tool-exec-1"})
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	s, err := env.Session(ref.ID, provider.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var asked int
	var text, final string
	for ev, err := range s.Events(ctx, "0") {
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		text += ev.Delta
		switch {
		case ev.Type == provider.EventInteraction:
			asked++
			in := ev.Interaction
			if in == nil || in.Subject == nil || in.Subject.ToolName != "bash" {
				t.Fatalf("interaction = %s, want the bash permission", ev.Raw)
			}
			cmd, err := provider.NewInteractionCommand("op-decline", *in, wire.InteractionResponse{Outcome: wire.OutcomeDeclined})
			if err != nil {
				t.Fatal(err)
			}
			if ack, err := s.RespondToInteraction(ctx, cmd); err != nil || ack.Status != wire.InteractionAccepted {
				t.Fatalf("RespondToInteraction = %+v, %v, want accepted", ack, err)
			}
		case ev.Type == provider.EventStatus && (ev.Status == provider.StatusCompleted || ev.Status == provider.StatusFailed || ev.Status == provider.StatusCancelled):
			final = ev.Status
		}
	}
	if asked != 1 || final != provider.StatusCompleted || !strings.Contains(text, "tool step over") {
		t.Fatalf("tool turn: asked %d times, final %q, text %q", asked, final, text)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the declined command ran")
	}
}

// TestLive_PiNativeContinuation adds a turn to a retained Pi session from
// a reconstructed environment of the Go client (provider.Get) with
// Session.ContinueNative: the turn runs on the session's native
// conversation; a stale boundary gets boundary_mismatch and starts
// nothing; the same request id repeated gets the same outcome and starts
// nothing; the same id for another request is a conflict.
func TestLive_PiNativeContinuation(t *testing.T) {
	answers := []string{"pi first " + harnesstest.RandomHex(4), "pi continued " + harnesstest.RandomHex(4)}
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"), routerstub.Deltas(answers[0], 3), routerstub.Deltas(answers[1], 3))
	l, env := startPi(t, harnesstest.Config{Script: script, ServedModel: "router-served-model"})
	if c := env.Capabilities(); !c.NativeContinuationProven() {
		t.Fatalf("capabilities = %+v, want native continuation", c)
	}

	// The session's first turn, as the process that created it ran it.
	dispatched, err := env.Dispatch(t.Context(), provider.Turn{Prompt: "first question", SessionID: "pc1", TurnID: "turn-1",
		ExecutionID: "exec-1"})
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	first, err := env.Session("pc1", provider.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := first.Result(t.Context()); err != nil || !res.Success || res.RunID != dispatched.ControlRef.RunID {
		t.Fatalf("first turn = %+v, %v, want success from run %s", res, err, dispatched.ControlRef.RunID)
	}
	ref := dispatched.ControlRef

	// reconstructed is a session of a new process's environment, at ref.
	reconstructed := func() *provider.Session {
		env, err := newPiProvider(t, l).Get(t.Context(), env.ID(), provider.GetOptions{})
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
	reqs := l.ModelRequests()
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
	if n := len(l.ModelRequests()); n != 2 {
		t.Errorf("model requests = %d after the refused and repeated continuations, want still 2", n)
	}
	turns, err := l.Store.Turns(t.Context(), "pc1", 0)
	if err != nil || len(turns) != 2 {
		t.Errorf("session turns = %d (%v), want 2", len(turns), err)
	}
}
