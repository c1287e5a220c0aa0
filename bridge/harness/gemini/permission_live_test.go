package gemini_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness/gemini"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// geminiModel is the model id of the retained Gemini sessions here.
const geminiModel = "gemini/gemini-2.5-pro"

// shellCall is the model's request to run a shell command that writes
// marker.
func shellCall(marker string) routerstub.Reply {
	return routerstub.ToolCall("run_shell_command", `{"command":"echo ran > `+marker+`","description":"Write the marker"}`)
}

// TestLive_GeminiPermissionInteraction runs retained Gemini CLI turns over
// ACP whose model reply asks to run a shell command: the CLI's
// session/request_permission becomes an interaction naming the tool;
// accepted, the command runs; declined, it does not; repeated and
// different answers get the protocol's acknowledgements. The turn reports
// measured usage and the served model. A turn cancelled while it asks is
// interrupted (session/cancel), its interaction closed as cancelled, and
// the session's process serves the next turn, which continues the
// conversation.
func TestLive_GeminiPermissionInteraction(t *testing.T) {
	pkg := harnesstest.Install(t, geminiSpec)
	for _, outcome := range []string{wire.OutcomeAccepted, wire.OutcomeDeclined} {
		t.Run(outcome, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "marker.txt")
			q := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
				routerstub.Join(routerstub.Text("Writing the marker."), shellCall(marker))).
				AfterTool(routerstub.Deltas("tool step over", 3))
			l := harnesstest.Start(t, harnesstest.Config{Adapter: gemini.Adapter{}, Pkg: &pkg, Bin: "gemini", Script: q,
				ServedModel: "router-served-model"})
			l.CreateSession(t, "gp1", geminiModel, dir, wire.PolicyInteractive)
			rd, f := l.Asked(t, "gp1", "1", "turn 1", marker)
			req := harnesstest.ResolveInteraction(t, f.Env.Event, outcome, func(iid, body string) (int, wire.InteractionAck) {
				return l.Respond(t, "gp1-run-1", iid, body)
			})
			end := harnesstest.ReadFrames(t, rd, harnesstest.Terminal)
			if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "tool step over") {
				t.Fatalf("turn ended %q with %q, want completed after the tool step", last.Status, harnesstest.TextOf(end))
			}
			harnesstest.CheckRan(t, marker, outcome == wire.OutcomeAccepted)
			if req.Subject.ToolName != "run_shell_command" || !strings.Contains(req.Title, marker) {
				t.Errorf("interaction = %q about %+v, want the run_shell_command call and its command", req.Title, req.Subject)
			}
			checkResult(t, end)
			if outcome != wire.OutcomeDeclined {
				return
			}

			// A second turn asks again and is cancelled while asking: the
			// CLI is sent session/cancel and ends the turn.
			os.Remove(marker)
			q.Push(shellCall(marker))
			rd, f = l.Asked(t, "gp1", "2", "turn 2", marker)
			l.CancelAsking(t, "gp1", "gp1-run-2", rd, f, marker)

			// The session's next turn runs, in the same conversation.
			q.Push(routerstub.Deltas("after the cancel", 2))
			l.PostTurn(t, "gp1", "3", "go on", "box", "env-1")
			end = harnesstest.ReadFrames(t, l.RunFrames(t, "gp1-run-3"), harnesstest.Terminal)
			if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "after the cancel") {
				t.Errorf("turn after the cancel ended %q with %q", last.Status, harnesstest.TextOf(end))
			}
			reqs := l.Stub.Requests()
			if last := reqs[len(reqs)-1]; last.Prompt != "go on" || !strings.Contains(string(last.Body), "turn 1") {
				t.Errorf("last model request: prompt %q, want %q with the conversation's first turn before it", last.Prompt, "go on")
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
