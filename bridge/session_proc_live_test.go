package bridge

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// runTurn admits turn n of session and reads the run's events to its
// terminal status, which it returns with the run's recorded process group.
func (b *liveBridge) runTurn(t *testing.T, session string, n int, message string) (status string, text string, pgid int) {
	t.Helper()
	if code, adm := b.turn(t, session, strconv.Itoa(n), message); code != http.StatusAccepted {
		t.Fatalf("turn %d = %d %+v", n, code, adm)
	}
	id := session + "-run-" + strconv.Itoa(n)
	frames := newCanonicalReader(t, b.do(t, "GET", "/v1/runs/"+id+"/events", "").Body).until(terminalStatus)
	last := frames[len(frames)-1].Raw
	s, _ := last["status"].(string)
	if s != "completed" {
		t.Logf("run %s ended %s: %v", id, s, last["detail"])
	}
	return s, textOf(frames), b.pgid(t, id)
}

func (b *liveBridge) pgid(t *testing.T, runID string) int {
	t.Helper()
	return harnesstest.RunGroup(t, b.st, runID)
}

// TestLive_ClaudeSessionProcess shows a retained Claude Code session served
// by one long-lived process: turns share it; a crash between turns is
// survived by a fresh process that resumes the conversation; a cancelled
// turn is interrupted and the process serves the next turn; closing the
// session ends it.
func TestLive_ClaudeSessionProcess(t *testing.T) {
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Text("answer one"), routerstub.Text("answer two"), routerstub.Text("answer three"),
		routerstub.Stall(0), routerstub.Text("answer five"))
	b, stub, _ := startLive(t, q)
	b.createSession(t, "lp", wire.PolicyInteractive, t.TempDir())

	s1, text1, g1 := b.runTurn(t, "lp", 1, "first")
	s2, text2, g2 := b.runTurn(t, "lp", 2, "second")
	if s1 != "completed" || s2 != "completed" || !strings.Contains(text1, "answer one") || !strings.Contains(text2, "answer two") {
		t.Fatalf("turns 1, 2 = %s %q, %s %q", s1, text1, s2, text2)
	}
	if g1 != g2 || !harnesstest.GroupAlive(g1) {
		t.Fatalf("turns 1 and 2 ran in process groups %d and %d (alive %v), want one live process", g1, g2, harnesstest.GroupAlive(g1))
	}

	// A crash between turns: the next turn resumes in a fresh process.
	syscall.Kill(-g2, syscall.SIGKILL)
	harnesstest.WaitGone(t, g2)
	from := len(stub.Requests())
	s3, text3, g3 := b.runTurn(t, "lp", 3, "third")
	if s3 != "completed" || !strings.Contains(text3, "answer three") || g3 == g2 {
		t.Fatalf("turn after a crash = %s %q in group %d, want completed in a fresh process (not %d)", s3, text3, g3, g2)
	}
	reqs := harnesstest.MainRequests(stub, from)
	if len(reqs) != 1 || !bytes.Contains(reqs[0].Body, []byte("answer two")) {
		t.Errorf("the resumed turn's model request does not carry the conversation (%d requests)", len(reqs))
	}

	// A turn cancelled while the model stalls is interrupted; the process stays.
	if code, _ := b.turn(t, "lp", "4", "fourth"); code != http.StatusAccepted {
		t.Fatalf("turn 4 = %d", code)
	}
	rd := newCanonicalReader(t, b.do(t, "GET", "/v1/runs/lp-run-4/events", "").Body)
	rd.until(func(f sseFrame) bool { return f.Type == "status" })
	polltest.UntilNil(t, 30*time.Second, "turn 3's and turn 4's stalled model requests", func() error {
		if n := len(harnesstest.MainRequests(stub, from)); n < 2 {
			return fmt.Errorf("the stub saw %d main requests", n)
		}
		return nil
	})
	start := time.Now()
	if resp := b.do(t, "POST", "/v1/runs/lp-run-4/cancel?wait_ms=20000", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel = %d", resp.StatusCode)
	}
	end := rd.until(terminalStatus)
	if s := end[len(end)-1].Raw["status"]; s != "cancelled" || !strings.Contains(fmt.Sprint(end[len(end)-1].Raw["detail"]), "interrupted") {
		t.Fatalf("cancelled turn ended %v (%v), want cancelled by an interrupt", s, end[len(end)-1].Raw["detail"])
	}
	t.Logf("cancel to terminal status: %v", time.Since(start))
	g4 := b.pgid(t, "lp-run-4")
	if g4 != g3 || !harnesstest.GroupAlive(g4) {
		t.Fatalf("interrupted turn ran in group %d (alive %v), want the live process %d", g4, harnesstest.GroupAlive(g4), g3)
	}
	s5, text5, g5 := b.runTurn(t, "lp", 5, "fifth")
	if s5 != "completed" || !strings.Contains(text5, "answer five") || g5 != g4 {
		t.Fatalf("turn after the interrupt = %s %q in group %d, want completed in group %d", s5, text5, g5, g4)
	}

	if resp := b.do(t, "POST", "/v1/sessions/lp/close", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("close = %d", resp.StatusCode)
	}
	harnesstest.WaitGone(t, g5)
}

// TestLive_ClaudeSessionIdle shows the idle timeout: a session process
// left without a turn is ended, and the next turn resumes in a fresh one.
func TestLive_ClaudeSessionIdle(t *testing.T) {
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"), routerstub.Text("answer one"), routerstub.Text("answer two"))
	b, stub, _ := startLive(t, q, func(o *engine.Options) { o.SessionIdleTimeout = 2 * time.Second })
	b.createSession(t, "idle", wire.PolicyInteractive, t.TempDir())
	if s, text, _ := b.runTurn(t, "idle", 1, "first"); s != "completed" || !strings.Contains(text, "answer one") {
		t.Fatalf("turn 1 = %s %q", s, text)
	}
	g1 := b.pgid(t, "idle-run-1")
	harnesstest.WaitGone(t, g1)
	from := len(stub.Requests())
	s, text, g2 := b.runTurn(t, "idle", 2, "second")
	if s != "completed" || !strings.Contains(text, "answer two") || g2 == g1 {
		t.Fatalf("turn after idle = %s %q in group %d, want completed in a fresh process", s, text, g2)
	}
	if reqs := harnesstest.MainRequests(stub, from); len(reqs) != 1 || !bytes.Contains(reqs[0].Body, []byte("answer one")) {
		t.Errorf("the resumed turn's model request does not carry the conversation")
	}
}

// TestLive_ClaudeSessionLatency measures the time from admitting a turn
// to its terminal status, for turns after the first, with the session's
// long-lived process and with a fresh resumed process per turn, and
// reports the medians.
func TestLive_ClaudeSessionLatency(t *testing.T) {
	const turns = 7
	measure := func(t *testing.T, idle time.Duration) time.Duration {
		b, _, _ := startLive(t, routerstub.NewQueue(routerstub.Text("unexpected extra call"), harnesstest.LatencyReplies(turns)...),
			func(o *engine.Options) { o.SessionIdleTimeout = idle })
		b.createSession(t, "lat", wire.PolicyInteractive, t.TempDir())
		return harnesstest.TurnLatency(t, turns, func(n int, prompt string) (string, string) {
			s, text, _ := b.runTurn(t, "lat", n, prompt)
			return s, text
		})
	}
	var fresh, kept time.Duration
	t.Run("fresh process per turn", func(t *testing.T) { fresh = measure(t, -1) })
	t.Run("long-lived process", func(t *testing.T) { kept = measure(t, 0) })
	t.Logf("median turn latency after the first: fresh process %v, long-lived process %v", fresh, kept)
	if kept >= fresh {
		t.Errorf("long-lived median %v is not below the fresh-process median %v", kept, fresh)
	}
}

// TestLive_ClaudeConcurrentPermissions shows Claude Code asking two
// permissions at once: a scripted reply with two parallel Read calls
// outside the working directory raises two interactions before either is
// answered; both answered, both tools run.
func TestLive_ClaudeConcurrentPermissions(t *testing.T) {
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Join(routerstub.ToolCall("Read", `{"file_path":"/etc/hostname"}`), routerstub.ToolCall("Read", `{"file_path":"/etc/os-release"}`))).
		AfterTool(routerstub.Text("both read"))
	b, _, _ := startLive(t, q)
	b.createSession(t, "cc", wire.PolicyInteractive, t.TempDir())
	if code, _ := b.turn(t, "cc", "1", "read both"); code != http.StatusAccepted {
		t.Fatalf("turn = %d", code)
	}
	rd := newCanonicalReader(t, b.do(t, "GET", "/v1/runs/cc-run-1/events", "").Body)
	var asked []sseFrame
	rd.until(func(f sseFrame) bool {
		if f.Type == "interaction" {
			asked = append(asked, f)
		}
		if terminalStatus(f) {
			t.Fatalf("run ended after %d interactions, want 2 open at once", len(asked))
		}
		return len(asked) == 2
	})
	for i, f := range asked {
		code, ack := b.respond(t, "cc-run-1", f.Raw["request"].(map[string]any)["id"].(string),
			interactionCommand(t, f, "op-cc-"+strconv.Itoa(i), wire.OutcomeAccepted))
		if code != 200 || ack.Status != wire.InteractionAccepted {
			t.Fatalf("respond %d = %d %+v", i, code, ack)
		}
	}
	end := rd.until(terminalStatus)
	if s := end[len(end)-1].Raw["status"]; s != "completed" || !strings.Contains(textOf(end), "both read") {
		t.Fatalf("run ended %v: %q", s, textOf(end))
	}
	results := 0
	for _, f := range end {
		part, _ := f.Raw["part"].(map[string]any)
		state, _ := part["state"].(map[string]any)
		if out, ok := state["output"].(string); ok && state["status"] == "completed" && out != "" {
			results++
		}
	}
	if results != 2 {
		t.Errorf("successful tool results = %d, want 2", results)
	}
}
