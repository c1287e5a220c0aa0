package provider_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/provider"
)

// recorder is a Script that answers from a Queue and keeps the bodies of
// the main-conversation requests it answered.
type recorder struct {
	q      *routerstub.Queue
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) Pick(req routerstub.Request) routerstub.Reply {
	if !req.Side {
		r.mu.Lock()
		r.bodies = append(r.bodies, bytes.Clone(req.Body))
		r.mu.Unlock()
	}
	return r.q.Pick(req)
}

func (r *recorder) last() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) == 0 {
		return nil
	}
	return r.bodies[len(r.bodies)-1]
}

// TestLive_ClaudeCodeSession drives a retained native Claude Code session
// through provider.Session against the real bridge binary and CLI: three
// turns of one conversation, a reader that drops after turn two and
// resumes from its cursor, and a permission interaction for a scripted
// Bash tool call answered with RespondToInteraction.
func TestLive_ClaudeCodeSession(t *testing.T) {
	replies := []string{"first reply of the retained session", "second reply, streamed in many small pieces", "third reply"}
	marker := filepath.Join(t.TempDir(), "ran")
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Deltas(replies[0], 3), routerstub.Deltas(replies[1], 8), routerstub.Deltas(replies[2], 3),
		routerstub.ToolCall("Bash", `{"command":"echo live-ok > `+marker+`","description":"Write a marker file"}`),
	).AfterTool(routerstub.Text("the command ran"))
	script := &recorder{q: q}
	url := startBridge(t, script)
	ctx := t.Context()
	p, err := provider.New(provider.Options{BaseURL: url, BearerToken: "live-bearer", DefaultModel: "claude-code/claude-sonnet-4-5",
		BodyTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Discovery proves the route's contract; environments of a
	// discovered route carry it.
	if _, err := p.Capabilities(ctx); err != nil {
		t.Fatalf("Capabilities: %v", err)
	}
	env, err := p.Create(ctx, provider.CreateRequest{Profile: provider.Profile{Name: "live-session", Harness: "claude-code"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Destroy(t.Context()) })
	if !env.Capabilities().InteractionsProven() {
		t.Fatalf("capabilities = %+v, want the retained native contract with interactions", env.Capabilities())
	}

	s, err := env.Session("live-three", provider.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prompts := []string{"Remember the word cobalt.", "Say more.", "What word did I ask you to remember?"}
	for i, prompt := range prompts {
		n := string(rune('1' + i))
		start := time.Now()
		res, err := s.Prompt(ctx, provider.Turn{Prompt: prompt, TurnID: "turn-" + n, ExecutionID: "session-exec-" + n})
		if err != nil || !res.Success || !strings.Contains(res.Text, replies[i]) || res.RunID != "session-exec-"+n || res.SessionID != "live-three" {
			t.Fatalf("turn %s = %+v, %v, want %q", n, res, err, replies[i])
		}
		t.Logf("turn %s took %s (%d events)", n, time.Since(start).Round(time.Millisecond), res.EventCount)
		if res.Usage == nil || res.Usage.Provenance != provider.UsageMeasured {
			t.Errorf("turn %s usage = %+v, want measured", n, res.Usage)
		}

		if i == 1 {
			// A reader drops after two events of turn two and resumes
			// from its cursor: no gap, no duplicate.
			var all []provider.Event
			for ev, err := range s.Events(ctx, "0") {
				if err != nil {
					t.Fatalf("Events(0): %v", err)
				}
				all = append(all, ev)
			}
			var read []provider.Event
			for ev, err := range s.Events(ctx, "0") {
				if err != nil {
					t.Fatalf("Events(0): %v", err)
				}
				read = append(read, ev)
				if len(read) == 2 {
					break
				}
			}
			for ev, err := range s.Events(ctx, read[len(read)-1].ID) {
				if err != nil {
					t.Fatalf("Events(%s): %v", read[1].ID, err)
				}
				read = append(read, ev)
			}
			// The CLI may coalesce the scripted pieces (4 to 11 events
			// were seen); three leave one to resume after the two read.
			if len(read) != len(all) || len(all) < 3 {
				t.Fatalf("resumed reader = %d events, want %d (and at least 3)", len(read), len(all))
			}
			for j := range all {
				if read[j].ID != all[j].ID || !bytes.Equal(read[j].Raw, all[j].Raw) {
					t.Errorf("resumed reader event %d = %s %s, want %s %s", j, read[j].ID, read[j].Raw, all[j].ID, all[j].Raw)
				}
			}
		}
	}
	// One CLI conversation: the third turn's model request carries the
	// earlier turns.
	if body := script.last(); !bytes.Contains(body, []byte(replies[0])) || !bytes.Contains(body, []byte("cobalt")) {
		t.Errorf("the third turn's model request does not carry the conversation:\n%s", body)
	}

	// A permission interaction: the scripted reply asks to run a command.
	ref, err := env.Dispatch(ctx, provider.Turn{Prompt: "Write the marker file.", SessionID: "live-tool", TurnID: "tool-1", ExecutionID: "tool-exec-1"})
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	ts, err := env.Session(ref.ID, provider.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var asked, acked bool
	var text, final string
	for ev, err := range ts.Events(ctx, "0") {
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		text += ev.Delta
		switch {
		case ev.Type == provider.EventInteraction:
			asked = true
			in := ev.Interaction
			if in == nil || in.Kind != wire.InteractionKindPermission || in.Subject == nil || in.Subject.ToolName != "Bash" {
				t.Fatalf("interaction = %s, want a Bash permission", ev.Raw)
			}
			cmd, err := provider.NewInteractionCommand("op-live-allow", *in,
				wire.InteractionResponse{Outcome: wire.OutcomeAccepted, Data: provider.PermissionGrant(wire.GrantAllowOnce)})
			if err != nil {
				t.Fatal(err)
			}
			ack, err := ts.RespondToInteraction(ctx, cmd)
			if err != nil || ack.Status != wire.InteractionAccepted {
				t.Fatalf("RespondToInteraction = %+v, %v, want accepted", ack, err)
			}
			again, err := ts.RespondToInteraction(ctx, cmd)
			if err != nil || again.Status != ack.Status || again.Message != ack.Message || again.OperationID != ack.OperationID {
				t.Errorf("repeated RespondToInteraction = %+v, %v, want the stored %+v", again, err, ack)
			}
			acked = true
		case ev.Type == provider.EventStatus && (ev.Status == provider.StatusCompleted || ev.Status == provider.StatusFailed):
			final = ev.Status
		}
	}
	if !asked || !acked || final != provider.StatusCompleted || !strings.Contains(text, "the command ran") {
		t.Fatalf("tool turn: asked %v, answered %v, final %q, text %q", asked, acked, final, text)
	}
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "live-ok" {
		t.Errorf("marker file = %q, %v: the allowed command did not run", b, err)
	}
}
