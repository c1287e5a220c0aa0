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
			l.CreateSession(t, "gp1", geminiModel, wire.PolicyInteractive, dir)
			l.PostTurn(t, "gp1", "1", "write the marker", "box", "env-1")
			run := "gp1-run-1"
			rd := l.RunFrames(t, run)
			asked := harnesstest.ReadFrames(t, rd, harnesstest.AskedOrEnded)
			f := asked[len(asked)-1]
			if f.Type != "interaction" {
				t.Fatalf("turn ended without an interaction: %q", harnesstest.TextOf(asked))
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the command ran before it was answered")
			}
			req := harnesstest.ResolveInteraction(t, f.Env.Event, outcome, func(iid, body string) (int, wire.InteractionAck) {
				return l.Respond(t, run, iid, body)
			})
			if req.Subject.ToolName != "run_shell_command" || !strings.Contains(req.Title, marker) {
				t.Errorf("interaction = %q about %+v, want the run_shell_command call and its command", req.Title, req.Subject)
			}
			end := harnesstest.ReadFrames(t, rd, harnesstest.Terminal)
			if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "tool step over") {
				t.Fatalf("turn ended %q with %q, want completed after the tool step", last.Status, harnesstest.TextOf(end))
			}
			checkResult(t, end)
			data, err := os.ReadFile(marker)
			switch {
			case outcome == wire.OutcomeAccepted && (err != nil || strings.TrimSpace(string(data)) != "ran"):
				t.Errorf("accepted command did not run: %q, %v", data, err)
			case outcome == wire.OutcomeDeclined && err == nil:
				t.Errorf("declined command ran")
			}
			if outcome != wire.OutcomeDeclined {
				return
			}

			// A second turn asks again and is cancelled while asking.
			os.Remove(marker)
			q.Push(shellCall(marker))
			l.PostTurn(t, "gp1", "2", "try again", "box", "env-1")
			run = "gp1-run-2"
			rd = l.RunFrames(t, run)
			asked = harnesstest.ReadFrames(t, rd, harnesstest.AskedOrEnded)
			f = asked[len(asked)-1]
			if f.Type != "interaction" {
				t.Fatalf("turn 2 ended without an interaction")
			}
			if resp := l.Do(t, "POST", "/v1/sessions/gp1/cancel?wait_ms=20000", ""); resp.StatusCode != 200 {
				t.Fatalf("cancel session = %d", resp.StatusCode)
			}
			end = harnesstest.ReadFrames(t, rd, harnesstest.Terminal)
			if i := slices.IndexFunc(end, func(f harnesstest.Frame) bool { return f.Type == "interaction.cancel" }); i < 0 ||
				end[len(end)-1].Status != "cancelled" || !strings.Contains(string(end[len(end)-1].Env.Event), "interrupted its turn") {
				t.Errorf("after cancel: %+v, want interaction.cancel then status cancelled, interrupted", end)
			}
			req, cmd := harnesstest.AnswerInteraction(t, f.Env.Event, "op-4", wire.OutcomeAccepted)
			if code, ack := l.Respond(t, run, req.ID, cmd); code != 409 || ack.Status != wire.InteractionCancelled {
				t.Errorf("answer after cancel = %d %+v, want 409 cancelled", code, ack)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the command of the cancelled turn ran")
			}

			// The session's next turn runs, in the same conversation.
			q.Push(routerstub.Deltas("after the cancel", 2))
			l.PostTurn(t, "gp1", "3", "go on", "box", "env-1")
			end = harnesstest.ReadFrames(t, l.RunFrames(t, "gp1-run-3"), harnesstest.Terminal)
			if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "after the cancel") {
				t.Errorf("turn after the cancel ended %q with %q", last.Status, harnesstest.TextOf(end))
			}
			reqs := l.Stub.Requests()
			if last := reqs[len(reqs)-1]; !strings.Contains(last.Prompt, "try again") && !strings.Contains(last.Prompt, "go on") {
				t.Errorf("last model request %q, want the conversation's turns", last.Prompt)
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
