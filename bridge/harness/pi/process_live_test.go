package pi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/pi"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// runPiTurn admits turn n of session and reads the run's events to its
// terminal status, which it returns with the run's text and recorded
// process group.
func runPiTurn(t *testing.T, l *harnesstest.Live, session string, n int, message string) (status, text string, pgid int) {
	t.Helper()
	adm := l.PostTurn(t, session, strconv.Itoa(n), message, "box", "env-1")
	frames := harnesstest.ReadFrames(t, bufio.NewReader(l.Do(t, "GET", "/v1/runs/"+adm.Run.ID+"/events", "").Body), harnesstest.Terminal)
	return frames[len(frames)-1].Status, harnesstest.TextOf(frames), l.RunGroup(t, adm.Run.ID)
}

// groupAlive reports whether process group pgid has a member.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// waitGroupGone waits until process group pgid has no member.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	polltest.Until(t, 15*time.Second, fmt.Sprintf("process group %d to have no member", pgid), func() bool { return !groupAlive(pgid) })
}

// TestLive_PiSessionProcess shows, for each release line, a retained Pi
// session served by one long-lived rpc process: turns share it; a turn
// cancelled while the model stalls is stopped by an rpc abort and the
// process serves the next turn; a crash between turns is survived by a
// fresh process that resumes the conversation; closing the session ends
// the process.
func TestLive_PiSessionProcess(t *testing.T) {
	for _, rel := range piReleases {
		t.Run(rel.version, func(t *testing.T) {
			script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
				routerstub.Text("answer one"), routerstub.Text("answer two"), routerstub.Stall(0),
				routerstub.Text("answer four"), routerstub.Text("answer five"))
			l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Spec: rel.spec, Bin: "pi", Script: script,
				ServedModel: "router-served-model"})
			l.CreateSession(t, "pp", piModel, l.Work, "")
			s1, text1, g1 := runPiTurn(t, l, "pp", 1, "first")
			s2, text2, g2 := runPiTurn(t, l, "pp", 2, "second")
			if s1 != "completed" || s2 != "completed" || !strings.Contains(text1, "answer one") || !strings.Contains(text2, "answer two") {
				t.Fatalf("turns 1, 2 = %s %q, %s %q", s1, text1, s2, text2)
			}
			if g1 != g2 || !groupAlive(g1) {
				t.Fatalf("turns 1 and 2 ran in process groups %d and %d (alive %v), want one live process", g1, g2, groupAlive(g1))
			}

			// A turn cancelled while the model stalls is aborted; the process stays.
			adm := l.PostTurn(t, "pp", "3", "third", "box", "env-1")
			br := bufio.NewReader(l.Do(t, "GET", "/v1/runs/"+adm.Run.ID+"/events", "").Body)
			harnesstest.ReadFrames(t, br, func(f harnesstest.Frame) bool { return f.Type == "status" })
			l.WaitModelRequests(t, 3, 30*time.Second) // the stalled third
			start := time.Now()
			if resp := l.Do(t, "POST", "/v1/runs/"+adm.Run.ID+"/cancel?wait_ms=20000", ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("cancel = %d", resp.StatusCode)
			}
			end := harnesstest.ReadFrames(t, br, harnesstest.Terminal)
			last := end[len(end)-1]
			var detail struct {
				Detail string `json:"detail"`
			}
			if err := json.Unmarshal(last.Env.Event, &detail); err != nil || last.Status != "cancelled" || !strings.Contains(detail.Detail, "interrupted") {
				t.Fatalf("cancelled turn ended %q (%q), want cancelled by an abort", last.Status, detail.Detail)
			}
			t.Logf("cancel to harnesstest.Terminal status: %v", time.Since(start).Round(time.Millisecond))
			g3 := l.RunGroup(t, adm.Run.ID)
			if g3 != g2 || !groupAlive(g3) {
				t.Fatalf("aborted turn ran in group %d (alive %v), want the live process %d", g3, groupAlive(g3), g2)
			}
			s4, text4, g4 := runPiTurn(t, l, "pp", 4, "fourth")
			if s4 != "completed" || !strings.Contains(text4, "answer four") || g4 != g3 {
				t.Fatalf("turn after the abort = %s %q in group %d, want completed in group %d", s4, text4, g4, g3)
			}

			// A crash between turns: the next turn resumes in a fresh process.
			syscall.Kill(-g4, syscall.SIGKILL)
			waitGroupGone(t, g4)
			s5, text5, g5 := runPiTurn(t, l, "pp", 5, "fifth")
			if s5 != "completed" || !strings.Contains(text5, "answer five") || g5 == g4 {
				t.Fatalf("turn after a crash = %s %q in group %d, want completed in a fresh process (not %d)", s5, text5, g5, g4)
			}
			reqs := l.ModelRequests()
			if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "answer four") || !strings.Contains(body, "first") {
				t.Errorf("the resumed turn's model request does not carry the conversation")
			}

			if resp := l.Do(t, "POST", "/v1/sessions/pp/close", ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("close = %d", resp.StatusCode)
			}
			waitGroupGone(t, g5)
		})
	}
}

// TestLive_PiSessionIdle shows the idle timeout: a session process left
// without a turn is ended, and the next turn resumes in a fresh one.
func TestLive_PiSessionIdle(t *testing.T) {
	rel := piReleases[0]
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"), routerstub.Text("answer one"), routerstub.Text("answer two"))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Spec: rel.spec, Bin: "pi", Script: script,
		ServedModel: "router-served-model", SessionIdleTimeout: 2 * time.Second})
	l.CreateSession(t, "pi-idle", piModel, l.Work, "")
	s1, text1, g1 := runPiTurn(t, l, "pi-idle", 1, "first")
	if s1 != "completed" || !strings.Contains(text1, "answer one") {
		t.Fatalf("turn 1 = %s %q", s1, text1)
	}
	waitGroupGone(t, g1)
	s2, text2, g2 := runPiTurn(t, l, "pi-idle", 2, "second")
	if s2 != "completed" || !strings.Contains(text2, "answer two") || g2 == g1 {
		t.Fatalf("turn after idle = %s %q in group %d, want completed in a fresh process", s2, text2, g2)
	}
	if reqs := l.ModelRequests(); len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "answer one") {
		t.Errorf("the resumed turn's model request does not carry the conversation")
	}
}

// TestLive_PiSessionLatency measures, for each release line, the time
// from admitting a turn to its harnesstest.Terminal status for turns after the first,
// with the session's long-lived process and with a fresh resumed process
// per turn, and reports the medians.
func TestLive_PiSessionLatency(t *testing.T) {
	const turns = 7
	for _, rel := range piReleases {
		t.Run(rel.version, func(t *testing.T) {
			pkg := harnesstest.Install(t, rel.spec)
			measure := func(t *testing.T, idle time.Duration) time.Duration {
				l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Spec: rel.spec, Pkg: &pkg, Bin: "pi",
					Script:             routerstub.NewQueue(routerstub.Text("unexpected extra call"), harnesstest.LatencyReplies(turns)...),
					ServedModel:        "router-served-model",
					SessionIdleTimeout: idle})
				l.CreateSession(t, "lat", piModel, l.Work, "")
				return harnesstest.TurnLatency(t, turns, func(n int, prompt string) (string, string) {
					s, text, _ := runPiTurn(t, l, "lat", n, prompt)
					return s, text
				})
			}
			var fresh, kept time.Duration
			t.Run("fresh process per turn", func(t *testing.T) { fresh = measure(t, -1) })
			t.Run("long-lived process", func(t *testing.T) { kept = measure(t, 0) })
			t.Logf("%s median turn latency after the first: fresh process %v, long-lived process %v", rel.version,
				fresh.Round(time.Millisecond), kept.Round(time.Millisecond))
			if kept >= fresh {
				t.Errorf("long-lived median %v is not below the fresh-process median %v", kept, fresh)
			}
		})
	}
}
