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

// AnswerPermission admits turn n of retained session, whose model reply
// asks to run a shell command that writes "ran" to marker, and answers
// the permission interaction with outcome: the command must not run
// before the answer, the turn must complete with a text holding after,
// and the marker must exist exactly when the answer accepted. It returns
// the interaction's request and the turn's frames after the answer.
func (l *Live) AnswerPermission(t *testing.T, session, n, marker, outcome, after string) (wire.InteractionRequest, []Frame) {
	t.Helper()
	run, rd, f := l.askPermission(t, session, n)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran before it was answered")
	}
	req := ResolveInteraction(t, f.Env.Event, outcome, func(iid, body string) (int, wire.InteractionAck) {
		return l.Respond(t, run, iid, body)
	})
	end := ReadFrames(t, rd, Terminal)
	if last := end[len(end)-1]; last.Status != "completed" || !strings.Contains(TextOf(end), after) {
		t.Fatalf("turn ended %q with %q, want completed after the tool step", last.Status, TextOf(end))
	}
	data, err := os.ReadFile(marker)
	switch {
	case outcome == wire.OutcomeAccepted && (err != nil || strings.TrimSpace(string(data)) != "ran"):
		t.Errorf("accepted command did not run: %q, %v", data, err)
	case outcome != wire.OutcomeAccepted && err == nil:
		t.Errorf("declined command ran")
	}
	return req, end
}

// CancelPermission admits turn n of retained session, whose model reply
// asks to run a command that writes marker, and cancels the session while
// the permission interaction is open: the interaction is closed as
// cancelled, the run ends cancelled with the harness having interrupted
// its turn (so its process serves the next one), a later answer is
// refused, and the command never runs.
func (l *Live) CancelPermission(t *testing.T, session, n, marker string) {
	t.Helper()
	run, rd, f := l.askPermission(t, session, n)
	if resp := l.Do(t, "POST", "/v1/sessions/"+session+"/cancel?wait_ms=20000", ""); resp.StatusCode != 200 {
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
	req, cmd := AnswerInteraction(t, f.Env.Event, "op-late", wire.OutcomeAccepted)
	if code, ack := l.Respond(t, run, req.ID, cmd); code != 409 || ack.Status != wire.InteractionCancelled {
		t.Errorf("answer after cancel = %d %+v, want 409 cancelled", code, ack)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command of the cancelled turn ran")
	}
}

// askPermission admits turn n of session and reads its run's frames up to
// its interaction, which it returns with the run id and the open stream.
func (l *Live) askPermission(t *testing.T, session, n string) (string, *bufio.Reader, Frame) {
	t.Helper()
	l.PostTurn(t, session, n, "turn "+n, "box", "env-1")
	run := session + "-run-" + n
	rd := l.RunFrames(t, run)
	asked := ReadFrames(t, rd, AskedOrEnded)
	f := asked[len(asked)-1]
	if f.Type != "interaction" {
		t.Fatalf("turn %s ended without an interaction: %q", n, TextOf(asked))
	}
	return run, rd, f
}
