package pi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

// createPolicySession creates retained session id on l under an
// interaction policy, its turns running in cwd.
func createPolicySession(t *testing.T, l *harnesstest.Live, id, policy, cwd string) {
	t.Helper()
	resp := l.Do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"id":%q,"model":%q,"cwd":%q,"interaction_policy":%q}`, id, piModel, cwd, policy))
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/sessions = %d %s", resp.StatusCode, body)
	}
}

// runFrames opens the canonical event stream of run.
func runFrames(t *testing.T, l *harnesstest.Live, run string) *bufio.Reader {
	t.Helper()
	resp := l.Do(t, "GET", "/v1/runs/"+run+"/events", "")
	t.Cleanup(func() { resp.Body.Close() })
	return bufio.NewReader(resp.Body)
}

func askedOrEnded(f frame) bool { return f.Type == "interaction" || terminal(f) }

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
				createPolicySession(t, l, "pp1", wire.PolicyInteractive, dir)
				postTurn(t, l, "pp1", "1", "write the marker", "box", "env-1")
				run := "pp1-run-1"
				rd := runFrames(t, l, run)
				asked := readFrames(t, rd, askedOrEnded)
				f := asked[len(asked)-1]
				if f.Type != "interaction" {
					t.Fatalf("turn ended without an interaction: %q", textOf(asked))
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
				end := readFrames(t, rd, terminal)
				if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(textOf(end), "tool step over") {
					t.Fatalf("turn ended %q with %q, want completed after the tool step", last.Status, textOf(end))
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
				postTurn(t, l, "pp1", "2", "try again", "box", "env-1")
				run = "pp1-run-2"
				rd = runFrames(t, l, run)
				asked = readFrames(t, rd, askedOrEnded)
				f = asked[len(asked)-1]
				if f.Type != "interaction" {
					t.Fatalf("turn 2 ended without an interaction")
				}
				if resp := l.Do(t, "POST", "/v1/sessions/pp1/cancel?wait_ms=20000", ""); resp.StatusCode != 200 {
					t.Fatalf("cancel session = %d", resp.StatusCode)
				}
				end = readFrames(t, rd, terminal)
				if i := slices.IndexFunc(end, func(f frame) bool { return f.Type == "interaction.cancel" }); i < 0 ||
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
				postTurn(t, l, "pp1", "3", "go on", "box", "env-1")
				end = readFrames(t, runFrames(t, l, "pp1-run-3"), terminal)
				if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(textOf(end), "after the cancel") {
					t.Errorf("turn after the cancel ended %q with %q", last.Status, textOf(end))
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
			createPolicySession(t, l, "pu1", policy, dir)
			postTurn(t, l, "pu1", "1", "write the marker", "box", "env-1")
			end := readFrames(t, runFrames(t, l, "pu1-run-1"), terminal)
			if i := slices.IndexFunc(end, func(f frame) bool { return f.Type == "interaction" }); i >= 0 {
				t.Errorf("an interaction reached the stream under %s", policy)
			}
			if last := end[len(end)-1]; last.Status != "completed" {
				t.Fatalf("turn ended %q: %q", last.Status, textOf(end))
			}
			_, err := os.Stat(marker)
			if ran := err == nil; ran != (policy == wire.PolicyUnattendedAllow) {
				t.Errorf("under %s the command ran = %v", policy, ran)
			}
		})
	}
}
