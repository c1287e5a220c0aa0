package codex_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness/codex"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/npmtest"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// sessionModel is the model of every retained Codex session here.
const sessionModel = "codex/gpt-5.5"

// execCall is the model's request to run a shell command that writes
// marker.
func execCall(marker string) routerstub.Reply {
	return routerstub.ToolCall("exec_command", fmt.Sprintf(`{"cmd":"echo ran > %s"}`, marker))
}

// usageOf returns the usage event of a run's frames.
func usageOf(t *testing.T, frames []harnesstest.Frame) wire.UsagePayload {
	t.Helper()
	for _, f := range frames {
		var ev wire.UsageEvent
		if f.Type == wire.EventRaw && json.Unmarshal(f.Env.Event, &ev) == nil && ev.Event.Type == wire.UsagePayloadType {
			return ev.Event
		}
	}
	t.Fatalf("no usage event in %d frames", len(frames))
	return wire.UsagePayload{}
}

// checkUsage fails t unless u is what the stub measured for the model
// requests after seq from, and names served as the served model.
func checkUsage(t *testing.T, l *harnesstest.Live, u wire.UsagePayload, from int, served string) {
	t.Helper()
	in, out, n := l.StubUsage(from)
	if u.Usage == nil || u.Usage.InputTokens != in || u.Usage.OutputTokens != out || n == 0 {
		t.Errorf("usage = %+v, want the stub's %d in, %d out over %d requests", u.Usage, in, out, n)
	}
	if diff := cmp.Diff([]string{served}, u.ProviderModels); diff != "" {
		t.Errorf("provider models (-want +got):\n%s", diff)
	}
}

// lastSeq is the sequence number of the stub's last request.
func lastSeq(l *harnesstest.Live) int {
	reqs := l.Stub.Requests()
	if len(reqs) == 0 {
		return 0
	}
	return reqs[len(reqs)-1].Seq
}

// TestLive_CodexSession runs retained Codex sessions through the bridge
// and the real CLI's app-server, sharing one installation.
func TestLive_CodexSession(t *testing.T) {
	pkg := harnesstest.Install(t, codexSpec)
	for _, outcome := range []string{wire.OutcomeAccepted, wire.OutcomeDeclined} {
		t.Run("interaction "+outcome, func(t *testing.T) { livePermission(t, &pkg, outcome) })
	}
	for _, policy := range []string{wire.PolicyUnattendedAllow, wire.PolicyUnattendedDeny} {
		t.Run(policy, func(t *testing.T) { liveUnattended(t, &pkg, policy) })
	}
	t.Run("a process per turn", func(t *testing.T) { liveProcessPerTurn(t, &pkg) })
}

// livePermission runs a retained turn whose model asks to run a shell
// command: Codex's approval request reaches the stream as an interaction
// naming exec_command and the command; accepted, the command runs;
// declined, it does not, and the turn goes on either way with the turn's
// measured usage and served model. After a decline, a second turn asks
// again and is cancelled while it asks: Codex interrupts the turn
// (turn/interrupt), the interaction is cancelled, an answer after that is
// refused, and the session's process serves a third turn that carries
// the earlier ones.
func livePermission(t *testing.T, pkg *npmtest.Package, outcome string) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker.txt")
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"), execCall(marker)).
		AfterTool(routerstub.Deltas("tool step over", 3))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: codex.Adapter{}, Pkg: pkg, Bin: "codex", Script: q,
		ServedModel: "router-served-model"})
	l.CreateSession(t, "cp1", sessionModel, dir, wire.PolicyInteractive)
	rd, f := l.Asked(t, "cp1", "1", "write the marker", marker)
	l.ResolveTool(t, "cp1-run-1", f, outcome, "exec_command", marker)
	end := harnesstest.ReadFrames(t, rd, harnesstest.Terminal)
	if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "tool step over") {
		t.Fatalf("turn ended %q with %q, want completed after the tool step", last.Status, harnesstest.TextOf(end))
	}
	checkUsage(t, l, usageOf(t, end), 0, "router-served-model")
	harnesstest.CheckRan(t, marker, outcome == wire.OutcomeAccepted)
	if outcome != wire.OutcomeDeclined {
		return
	}

	os.Remove(marker)
	q.Push(execCall(marker))
	rd, f = l.Asked(t, "cp1", "2", "try again", marker)
	pgid := l.RunGroup(t, "cp1-run-2")
	l.CancelAsking(t, "cp1", "cp1-run-2", rd, f, marker)

	from := lastSeq(l)
	q.Push(routerstub.Deltas("after the cancel", 2))
	l.PostTurn(t, "cp1", "3", "go on", "box", "env-1")
	end = harnesstest.ReadFrames(t, l.RunFrames(t, "cp1-run-3"), harnesstest.Terminal)
	if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(end), "after the cancel") {
		t.Errorf("turn after the cancel ended %q with %q", last.Status, harnesstest.TextOf(end))
	}
	checkUsage(t, l, usageOf(t, end), from, "router-served-model")
	if got := l.RunGroup(t, "cp1-run-3"); got != pgid {
		t.Errorf("turn 3 ran in process group %d, want the session's process %d", got, pgid)
	}
	reqs := l.ModelRequests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), "write the marker") || !strings.Contains(string(last.Body), "try again") {
		t.Errorf("turn 3's model request does not carry the earlier turns")
	}
}

// liveUnattended runs the same tool call under an unattended policy: the
// bridge answers Codex's approval request itself, so no interaction
// reaches the stream; allow runs the command, deny does not.
func liveUnattended(t *testing.T, pkg *npmtest.Package, policy string) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker.txt")
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"), execCall(marker)).
		AfterTool(routerstub.Text("tool step over"))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: codex.Adapter{}, Pkg: pkg, Bin: "codex", Script: q})
	l.CreateSession(t, "cu1", sessionModel, dir, policy)
	l.CheckUnattended(t, "cu1", policy, marker)
}

// liveProcessPerTurn runs two retained turns each in a process of its own
// (no session process kept): the second resumes the first's thread.
func liveProcessPerTurn(t *testing.T, pkg *npmtest.Package) {
	want1, want2 := "first "+harnesstest.RandomHex(4), "second "+harnesstest.RandomHex(4)
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"), routerstub.Deltas(want1, 3), routerstub.Deltas(want2, 2))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: codex.Adapter{}, Pkg: pkg, Bin: "codex", Script: q,
		ServedModel: "router-served-model", SessionIdleTimeout: -1})
	l.CreateSession(t, "cf1", sessionModel, l.Work, "")
	for i, want := range []string{want1, want2} {
		n := fmt.Sprint(i + 1)
		from := lastSeq(l)
		l.PostTurn(t, "cf1", n, "turn "+n, "box", "env-1")
		end := harnesstest.ReadFrames(t, l.RunFrames(t, "cf1-run-"+n), harnesstest.Terminal)
		if last := end[len(end)-1]; last.Status != "completed" || harnesstest.TextOf(end) != want {
			t.Fatalf("turn %s ended %q with %q, want completed with %q", n, last.Status, harnesstest.TextOf(end), want)
		}
		checkUsage(t, l, usageOf(t, end), from, "router-served-model")
	}
	reqs := l.ModelRequests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), want1) {
		t.Errorf("turn 2's model request does not carry turn 1's reply")
	}
}
