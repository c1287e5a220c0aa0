package pi_test

import (
	"fmt"
	"os"
	"path/filepath"
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
				l.CreateSession(t, "pp1", piModel, dir, wire.PolicyInteractive)
				run := "pp1-run-1"
				rd, f := l.Asked(t, "pp1", "1", "write the marker", marker)
				l.ResolveTool(t, run, f, outcome, "bash", marker)
				end := harnesstest.ReadFrames(t, rd, harnesstest.Terminal)
				if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "tool step over") {
					t.Fatalf("turn ended %q with %q, want completed after the tool step", last.Status, harnesstest.TextOf(end))
				}
				harnesstest.CheckRan(t, marker, outcome == wire.OutcomeAccepted)
				if outcome != wire.OutcomeDeclined {
					return
				}

				// A second turn asks again and is cancelled while asking:
				// Pi dismisses the dialog and aborts the turn, its process
				// is not killed, and serves the next turn.
				os.Remove(marker)
				q.Push(bashCall(marker))
				rd, f = l.Asked(t, "pp1", "2", "try again", marker)
				l.CancelAsking(t, "pp1", "pp1-run-2", rd, f, marker)

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
			l.CreateSession(t, "pu1", piModel, dir, policy)
			l.CheckUnattended(t, "pu1", policy, marker)
		})
	}
}
