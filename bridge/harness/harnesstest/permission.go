package harnesstest

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Asked admits turn n of retained session (see PostTurn), whose model
// asks to run a command that writes marker, and reads the run's stream up
// to its interaction. It fails t if the run ends without one, or marker
// exists before the answer. It returns the stream and the interaction.
func (l *Live) Asked(t *testing.T, session, n, message, marker string) (*bufio.Reader, Frame) {
	t.Helper()
	l.PostTurn(t, session, n, message, "box", "env-1")
	rd := l.RunFrames(t, session+"-run-"+n)
	asked := ReadFrames(t, rd, AskedOrEnded)
	f := asked[len(asked)-1]
	if f.Type != "interaction" {
		t.Fatalf("turn %s ended without an interaction: %q", n, TextOf(asked))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran before it was answered")
	}
	return rd, f
}

// ResolveTool answers the interaction f of run with outcome, and fails t
// unless its subject names tool with a command input that contains
// marker.
func (l *Live) ResolveTool(t *testing.T, run string, f Frame, outcome, tool, marker string) {
	t.Helper()
	req := ResolveInteraction(t, f.Env.Event, outcome, func(iid, body string) (int, wire.InteractionAck) {
		return l.Respond(t, run, iid, body)
	})
	var input struct{ Command string }
	if req.Subject.ToolName != tool || json.Unmarshal(req.Subject.Input, &input) != nil || !strings.Contains(input.Command, marker) {
		t.Errorf("interaction subject = %+v, want the %s call with its command", req.Subject, tool)
	}
}

// CheckRan fails t unless the command that writes "ran" to marker ran
// exactly when ran says.
func CheckRan(t *testing.T, marker string, ran bool) {
	t.Helper()
	data, err := os.ReadFile(marker)
	switch {
	case ran && (err != nil || strings.TrimSpace(string(data)) != "ran"):
		t.Errorf("the allowed command did not run: %q, %v", data, err)
	case !ran && err == nil:
		t.Errorf("the command ran, and should not have")
	}
}

// CancelAsking cancels session while its run asks (interaction f on
// stream rd) and reads the run to its end. It fails t unless the
// interaction is cancelled with the run, the harness interrupted its turn
// (so its process stays for the next), an answer after that is refused as
// cancelled, and marker was not written.
func (l *Live) CancelAsking(t *testing.T, session, run string, rd *bufio.Reader, f Frame, marker string) {
	t.Helper()
	if resp := l.CancelTurn(t, session, run); resp.StatusCode != 200 {
		t.Fatalf("cancel session = %d", resp.StatusCode)
	}
	end := ReadFrames(t, rd, Terminal)
	if i := slices.IndexFunc(end, func(f Frame) bool { return f.Type == "interaction.cancel" }); i < 0 ||
		end[len(end)-1].Status != "cancelled" {
		t.Errorf("after cancel: %+v, want interaction.cancel then status cancelled", end)
	}
	var st struct{ Detail string }
	json.Unmarshal(end[len(end)-1].Env.Event, &st)
	if !strings.Contains(st.Detail, "interrupted its turn") {
		t.Errorf("cancelled turn: %q, want the harness to have interrupted it", st.Detail)
	}
	req, cmd := AnswerInteraction(t, f.Env.Event, "op-after-cancel", wire.OutcomeAccepted)
	if code, ack := l.Respond(t, run, req.ID, cmd); code != 409 || ack.Status != wire.InteractionCancelled {
		t.Errorf("answer after cancel = %d %+v, want 409 cancelled", code, ack)
	}
	CheckRan(t, marker, false)
}

// CheckUnattended runs turn 1 of retained session under an unattended
// policy (created with CreateSession), whose model asks to run a command
// that writes marker. It fails t unless the bridge answers the harness
// itself, so that no interaction reaches the stream, the turn completes,
// and the command runs exactly under unattended-allow.
func (l *Live) CheckUnattended(t *testing.T, session, policy, marker string) {
	t.Helper()
	l.PostTurn(t, session, "1", "write the marker", "box", "env-1")
	end := ReadFrames(t, l.RunFrames(t, session+"-run-1"), Terminal)
	if i := slices.IndexFunc(end, func(f Frame) bool { return f.Type == "interaction" }); i >= 0 {
		t.Errorf("an interaction reached the stream under %s", policy)
	}
	if last := end[len(end)-1]; last.Status != "completed" {
		t.Fatalf("turn ended %q: %q", last.Status, TextOf(end))
	}
	CheckRan(t, marker, policy == wire.PolicyUnattendedAllow)
}
