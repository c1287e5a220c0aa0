package opencode_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/opencode"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// bashCall is the model's request to run a command that writes marker.
func bashCall(marker string) routerstub.Reply {
	return routerstub.ToolCall("bash", `{"command":"echo ran > `+marker+`","description":"Write the marker"}`)
}

// TestLive_OpencodePermissionInteraction runs retained opencode turns
// through `opencode serve` whose model reply asks to run a bash command:
// opencode's permission.asked becomes an interaction naming the tool and
// the command; accepted, the command runs; declined, it does not. The
// turn reports measured usage and the served model. A turn cancelled
// while it asks is aborted, its interaction closed as cancelled, and the
// session's process serves the next turn, which continues the
// conversation.
func TestLive_OpencodePermissionInteraction(t *testing.T) {
	pkg := harnesstest.Install(t, opencodeSpec)
	for _, outcome := range []string{wire.OutcomeAccepted, wire.OutcomeDeclined} {
		t.Run(outcome, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "marker.txt")
			q := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
				routerstub.Join(routerstub.Text("Writing the marker."), bashCall(marker))).
				AfterTool(routerstub.Deltas("tool step over", 3))
			l := harnesstest.Start(t, harnesstest.Config{Adapter: opencode.Adapter{}, Pkg: &pkg, Bin: "opencode", Script: q,
				ServedModel: "router-served-model"})
			l.CreateSession(t, "op1", "opencode/anthropic/claude-sonnet-4-5", dir, wire.PolicyInteractive)
			rd, f := l.Asked(t, "op1", "1", "turn 1", marker)
			req := harnesstest.ResolveInteraction(t, f.Env.Event, outcome, func(iid, body string) (int, wire.InteractionAck) {
				return l.Respond(t, "op1-run-1", iid, body)
			})
			end := harnesstest.ReadFrames(t, rd, harnesstest.Terminal)
			if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "tool step over") {
				t.Fatalf("turn ended %q with %q, want completed after the tool step", last.Status, harnesstest.TextOf(end))
			}
			harnesstest.CheckRan(t, marker, outcome == wire.OutcomeAccepted)
			if req.Subject.ToolName != "bash" || !strings.Contains(req.Title, marker) {
				t.Errorf("interaction = %q about %+v, want the bash call and its command", req.Title, req.Subject)
			}
			checkResult(t, end)
			if outcome != wire.OutcomeDeclined {
				return
			}

			os.Remove(marker)
			q.Push(bashCall(marker))
			rd, f = l.Asked(t, "op1", "2", "turn 2", marker)
			l.CancelAsking(t, "op1", "op1-run-2", rd, f, marker)

			// The session's next turn runs, in the same conversation. Its
			// model request carries the aborted call's result and the new
			// prompt in one user message, which the stub answers as a
			// tool step.
			l.PostTurn(t, "op1", "3", "go on", "box", "env-1")
			end = harnesstest.ReadFrames(t, l.RunFrames(t, "op1-run-3"), harnesstest.Terminal)
			if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "tool step over") {
				t.Errorf("turn after the cancel ended %q with %q", last.Status, harnesstest.TextOf(end))
			}
			reqs := l.Stub.Requests()
			if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, `"go on"`) || !strings.Contains(last, "turn 1") {
				t.Errorf("last model request %s, want the prompt %q after the conversation's first turn", last, "go on")
			}
		})
	}
}

// checkResult checks a completed turn's terminal usage event: measured
// usage and the served model.
func checkResult(t *testing.T, frames []harnesstest.Frame) {
	t.Helper()
	i := slices.IndexFunc(frames, func(f harnesstest.Frame) bool { return strings.Contains(string(f.Env.Event), `"providerModels"`) })
	if i < 0 {
		t.Fatalf("no event names provider models in %s", harnesstest.TextOf(frames))
	}
	ev := string(frames[i].Env.Event)
	if !strings.Contains(ev, `"providerModels":["router-served-model"]`) || !strings.Contains(ev, `"estimated":false`) {
		t.Errorf("usage event = %s, want measured usage and the served model router-served-model", ev)
	}
}
