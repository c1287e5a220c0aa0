package pi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/pi"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// bashCall is the model's request to run a shell command that writes
// marker.
func bashCall(marker string) routerstub.Reply {
	return routerstub.ToolCall("bash", fmt.Sprintf(`{"command":"echo ran > %s"}`, marker))
}

// TestLive_PiPermissionInteraction runs retained Pi turns whose model
// reply asks to run a shell command, with the real CLI of each release
// line: the bridge's permission gate turns Pi's confirm dialog into an
// interaction event naming the tool and its input; accepted, the command
// runs; declined, it does not; the same operation repeated gets the stored
// acknowledgement, a different answer already_resolved_different. A turn
// cancelled while it asks closes the interaction as cancelled, an answer
// after that is refused, and the session's next turn still runs.
func TestLive_PiPermissionInteraction(t *testing.T) {
	for _, rel := range piReleases {
		pkg := harnesstest.Install(t, rel.spec)
		for _, outcome := range []string{wire.OutcomeAccepted, wire.OutcomeDeclined} {
			t.Run(rel.version+"/"+outcome, func(t *testing.T) {
				dir := t.TempDir()
				marker := filepath.Join(dir, "marker.txt")
				q := routerstub.NewQueue(routerstub.Text("unexpected extra call"), bashCall(marker)).
					AfterTool(routerstub.Text("tool step over"))
				l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Pkg: &pkg, Bin: "pi", Script: q,
					ServedModel: "router-served-model"})
				l.CreateSession(t, "pp1", piModel, wire.PolicyInteractive, dir)
				l.PostTurn(t, "pp1", "1", "write the marker", "box", "env-1")
				run := "pp1-run-1"
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
				var input struct{ Command string }
				if req.Subject.ToolName != "bash" || json.Unmarshal(req.Subject.Input, &input) != nil || !strings.Contains(input.Command, marker) {
					t.Errorf("interaction subject = %+v, want the bash call with its command", req.Subject)
				}
				end := harnesstest.ReadFrames(t, rd, harnesstest.Terminal)
				if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "tool step over") {
					t.Fatalf("turn ended %q with %q, want completed after the tool step", last.Status, harnesstest.TextOf(end))
				}
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
				q.Push(bashCall(marker))
				l.PostTurn(t, "pp1", "2", "try again", "box", "env-1")
				run = "pp1-run-2"
				rd = l.RunFrames(t, run)
				asked = harnesstest.ReadFrames(t, rd, harnesstest.AskedOrEnded)
				f = asked[len(asked)-1]
				if f.Type != "interaction" {
					t.Fatalf("turn 2 ended without an interaction")
				}
				if resp := l.Do(t, "POST", "/v1/sessions/pp1/cancel?wait_ms=20000", ""); resp.StatusCode != 200 {
					t.Fatalf("cancel session = %d", resp.StatusCode)
				}
				end = harnesstest.ReadFrames(t, rd, harnesstest.Terminal)
				if i := slices.IndexFunc(end, func(f harnesstest.Frame) bool { return f.Type == "interaction.cancel" }); i < 0 ||
					end[len(end)-1].Status != "cancelled" {
					t.Errorf("after cancel: %+v, want interaction.cancel then status cancelled", end)
				}
				// Pi dismissed the dialog and aborted the turn: its process
				// was not killed, and serves the next turn.
				var st struct{ Detail string }
				json.Unmarshal(end[len(end)-1].Env.Event, &st)
				if !strings.Contains(st.Detail, "interrupted its turn") {
					t.Errorf("cancelled turn: %q, want Pi to have interrupted it", st.Detail)
				}
				req, cmd := harnesstest.AnswerInteraction(t, f.Env.Event, "op-4", wire.OutcomeAccepted)
				if code, ack := l.Respond(t, run, req.ID, cmd); code != 409 || ack.Status != wire.InteractionCancelled {
					t.Errorf("answer after cancel = %d %+v, want 409 cancelled", code, ack)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("the command of the cancelled turn ran")
				}

				// The session's next turn runs.
				q.Push(routerstub.Deltas("after the cancel", 2))
				l.PostTurn(t, "pp1", "3", "go on", "box", "env-1")
				end = harnesstest.ReadFrames(t, l.RunFrames(t, "pp1-run-3"), harnesstest.Terminal)
				if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "after the cancel") {
					t.Errorf("turn after the cancel ended %q with %q", last.Status, harnesstest.TextOf(end))
				}
			})
		}
	}
}

// TestLive_PiUnattendedPolicies runs the same tool call under each
// unattended policy: the bridge answers the gate itself, so no interaction
// reaches the stream; allow runs the command, deny does not.
func TestLive_PiUnattendedPolicies(t *testing.T) {
	rel := piReleases[0]
	pkg := harnesstest.Install(t, rel.spec)
	for _, policy := range []string{wire.PolicyUnattendedAllow, wire.PolicyUnattendedDeny} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "marker.txt")
			q := routerstub.NewQueue(routerstub.Text("unexpected extra call"), bashCall(marker)).
				AfterTool(routerstub.Text("tool step over"))
			l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Pkg: &pkg, Bin: "pi", Script: q})
			l.CreateSession(t, "pu1", piModel, policy, dir)
			l.PostTurn(t, "pu1", "1", "write the marker", "box", "env-1")
			end := harnesstest.ReadFrames(t, l.RunFrames(t, "pu1-run-1"), harnesstest.Terminal)
			if i := slices.IndexFunc(end, func(f harnesstest.Frame) bool { return f.Type == "interaction" }); i >= 0 {
				t.Errorf("an interaction reached the stream under %s", policy)
			}
			if last := end[len(end)-1]; last.Status != "completed" {
				t.Fatalf("turn ended %q: %q", last.Status, harnesstest.TextOf(end))
			}
			_, err := os.Stat(marker)
			if ran := err == nil; ran != (policy == wire.PolicyUnattendedAllow) {
				t.Errorf("under %s the command ran = %v", policy, ran)
			}
		})
	}
}
