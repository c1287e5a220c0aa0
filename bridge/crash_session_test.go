package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// blockStream reads an SSE stream one frame (block of lines) at a time, as
// the bytes came, without its keepalive comments.
type blockStream struct {
	sc     *bufio.Scanner
	cancel context.CancelFunc
}

func openBlocks(t *testing.T, b *bridgeProc, path string) *blockStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	resp := b.req(t, ctx, "GET", path, "")
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	return &blockStream{sc: sc, cancel: cancel}
}

// next returns the next frame, or false at the end of the stream.
func (s *blockStream) next() (string, bool) {
	var lines []string
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "" && len(lines) > 0:
			return strings.Join(lines, "\n"), true
		case line == "", strings.HasPrefix(line, ":"):
		default:
			lines = append(lines, line)
		}
	}
	return "", false
}

// until returns the frames up to and including the first that stop
// accepts; the stream ending first fails the test.
func (s *blockStream) until(t *testing.T, what string, stop func(string) bool) []string {
	t.Helper()
	var out []string
	for {
		f, ok := s.next()
		if !ok {
			t.Fatalf("the stream ended after %d frames without %s: %q", len(out), what, out)
		}
		out = append(out, f)
		if stop(f) {
			return out
		}
	}
}

// frameEvent decodes a frame's envelope event.
func frameEvent(f string) map[string]any {
	var env wire.Envelope
	var ev map[string]any
	for _, l := range strings.Split(f, "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok && json.Unmarshal([]byte(d), &env) == nil {
			json.Unmarshal(env.Event, &ev)
		}
	}
	return ev
}

func terminalFrame(f string) bool {
	ev := frameEvent(f)
	if ev["type"] != "status" {
		return false
	}
	switch ev["status"] {
	case "completed", "failed", "cancelled":
		return true
	}
	return false
}

func deltas(frames []string) string {
	var b strings.Builder
	for _, f := range frames {
		if ev := frameEvent(f); ev["type"] == "message.part.updated" {
			d, _ := ev["delta"].(string)
			b.WriteString(d)
		}
	}
	return b.String()
}

// TestCrashSessionProcess kills the bridge with SIGKILL while a retained
// session's long-lived harness process serves the session's second turn,
// restarts it on the same data directory, and checks that the orphaned
// process group is ended, the turn reads error/bridge_restarted, every
// frame committed before the crash replays byte for byte on the run and
// session streams, and the session's next turn resumes the native session
// in a fresh process.
func TestCrashSessionProcess(t *testing.T) {
	data := t.TempDir()
	pidfile := filepath.Join(t.TempDir(), "pids")
	env := []string{"BRIDGE_REPLAY_RETENTION_MS=600000"}
	b1 := startBridge(t, data, env...)
	ctx := context.Background()
	const session = "crash-ses"
	if resp := b1.req(t, ctx, "POST", "/v1/sessions", fmt.Sprintf(`{"id":%q,"model":"claude-code/sonnet","env":{"FAKE_PIDFILE":%q}}`,
		session, pidfile)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create session = %d", resp.StatusCode)
	}
	runID := func(n int) string { return session + "-run-" + strconv.Itoa(n) }
	turn := func(b *bridgeProc, n int, message string) {
		t.Helper()
		body := fmt.Sprintf(`{"message":%q,"turn_id":"t%d","execution_id":"x%d","run_id":%q}`, message, n, n, runID(n))
		if resp := b.req(t, ctx, "POST", "/v1/sessions/"+session+"/turns", body); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("turn %d = %d", n, resp.StatusCode)
		}
	}
	// pidSession parses the reply of the fake's pid scenario.
	pidSession := func(reply string) (int, string) {
		t.Helper()
		var pid int
		var ses string
		if _, err := fmt.Sscanf(reply, "pid=%d session=%s", &pid, &ses); err != nil {
			t.Fatalf("reply %q: %v", reply, err)
		}
		return pid, ses
	}

	turn(b1, 1, "pid")
	run1 := openBlocks(t, b1, "/v1/runs/"+runID(1)+"/events").until(t, "the end of turn 1", terminalFrame)
	if ev := frameEvent(run1[len(run1)-1]); ev["status"] != "completed" {
		t.Fatalf("turn 1 ended %v", ev)
	}
	pid1, native1 := pidSession(deltas(run1))

	turn(b1, 2, "stubborn")
	working := func(f string) bool { return strings.Contains(f, "working") }
	run2 := openBlocks(t, b1, "/v1/runs/"+runID(2)+"/events").until(t, "turn 2 working", working)
	ses := openBlocks(t, b1, "/v1/sessions/"+session+"/events").until(t, "turn 2 working", working)
	var pids []int
	polltest.UntilNil(t, 10*time.Second, "turn 2's process and its child in the pidfile", func() error {
		pids = nil
		b, _ := os.ReadFile(pidfile)
		for _, f := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(f)
			pids = append(pids, p)
		}
		if len(pids) < 2 {
			return fmt.Errorf("the pidfile holds %v", pids)
		}
		return nil
	})
	if len(pids) != 2 || pids[0] != pid1 {
		t.Fatalf("turn 2 ran in processes %v, want turn 1's process %d and its child", pids, pid1)
	}

	// SIGKILL: no shutdown code runs; the session's process group stays.
	b1.Kill() // SIGKILL: no shutdown code runs
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("harness process %d died with the bridge; the test cannot show recovery kills it", p)
		}
	}
	if err := syscall.Kill(-pid1, 0); err != nil {
		t.Fatalf("process group %d: %v", pid1, err)
	}

	b2 := startBridge(t, data, env...)
	for _, p := range pids {
		polltest.Until(t, 5*time.Second, fmt.Sprintf("orphaned session process %d to end with the restart", p), func() bool { return !alive(p) })
	}
	for n, want := range map[int]string{1: wire.StatusDone, 2: wire.StatusError} {
		resp := b2.req(t, ctx, "GET", "/v1/runs/"+runID(n), "")
		var snap wire.RunSnapshot
		json.NewDecoder(resp.Body).Decode(&snap)
		resp.Body.Close()
		if snap.Status != want || !snap.Terminal {
			t.Errorf("run %d after restart = %s (terminal %v), want %s", n, snap.Status, snap.Terminal, want)
		}
		if n == 2 && (snap.Error == nil || snap.Error.Type != wire.TypeBridgeRestarted || !strings.Contains(snap.Error.Message, "restarted")) {
			t.Errorf("run 2 error = %+v, want %s naming the restart", snap.Error, wire.TypeBridgeRestarted)
		}
	}

	// Every frame committed before the crash replays byte for byte, and
	// turn 2 ends with a failed status naming the restart.
	replay1 := openBlocks(t, b2, "/v1/runs/"+runID(1)+"/events").until(t, "the end of turn 1", terminalFrame)
	if diff := cmp.Diff(run1, replay1); diff != "" {
		t.Errorf("run 1 replay differs (-before +after):\n%s", diff)
	}
	replay2 := openBlocks(t, b2, "/v1/runs/"+runID(2)+"/events").until(t, "the end of turn 2", terminalFrame)
	checkRestarted := func(name string, before, after []string) {
		t.Helper()
		if len(after) <= len(before) {
			t.Fatalf("%s replay = %d frames, want the %d before the crash and the end", name, len(after), len(before))
		}
		if diff := cmp.Diff(before, after[:len(before)]); diff != "" {
			t.Errorf("%s replay differs (-before +after):\n%s", name, diff)
		}
		end := frameEvent(after[len(after)-1])
		if detail, _ := end["detail"].(string); end["status"] != "failed" || !strings.Contains(detail, wire.TypeBridgeRestarted) {
			t.Errorf("%s ends with %v, want a failed status naming %s", name, end, wire.TypeBridgeRestarted)
		}
	}
	checkRestarted("run 2", run2, replay2)
	sesReplay := openBlocks(t, b2, "/v1/sessions/"+session+"/events")
	sesAfter := sesReplay.until(t, "turn 1's end", terminalFrame)
	sesAfter = append(sesAfter, sesReplay.until(t, "turn 2's end", terminalFrame)...)
	checkRestarted("session", ses, sesAfter)

	// Turn 3 runs in a fresh process that resumes the native session.
	turn(b2, 3, "pid")
	run3 := openBlocks(t, b2, "/v1/runs/"+runID(3)+"/events").until(t, "the end of turn 3", terminalFrame)
	if ev := frameEvent(run3[len(run3)-1]); ev["status"] != "completed" {
		t.Fatalf("turn 3 ended %v", ev)
	}
	pid3, native3 := pidSession(deltas(run3))
	if pid3 == pid1 || native3 != native1 {
		t.Errorf("turn 3 ran in process %d on native session %s, want a fresh process resuming %s", pid3, native3, native1)
	}
	next, _ := sesReplay.next()
	if !strings.Contains(next, runID(3)) {
		t.Errorf("the session stream after turn 2 = %q, want turn 3's frames", next)
	}
}
