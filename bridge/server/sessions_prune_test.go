package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// fakeClock is a settable store clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// runReply runs one turn of session to its end and returns its text and
// the process group that served it.
func runReply(t *testing.T, v *env, session, turnID, runID, message string) (string, int) {
	t.Helper()
	postTurn(t, v, session, turnBody(turnID, runID, message))
	frames := openEvents(t, v, "/v1/runs/"+runID+"/events", "").until(isTerminal)
	if st := frames[len(frames)-1].body["status"]; st != "completed" {
		t.Fatalf("run %s ended %v: %s", runID, st, frames[len(frames)-1].raw)
	}
	r, err := v.e.Store().GetRun(context.Background(), runID)
	if err != nil || r.PGID <= 0 {
		t.Fatalf("run %s: process group %d, %v", runID, r.PGID, err)
	}
	return frameText(frames), r.PGID
}

// TestSessionPrune shows the session retention through the routes: an
// idle open session is closed by the engine's prune, which ends its
// long-lived process; a closed session whose identity expired is
// forgotten (404 on every route) and its id can be created afresh, with a
// new native session.
func TestSessionPrune(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Now()}
	v := newEnv(t, config{store: store.Options{Now: clk.Now}})
	createSession(t, v, "s-gone", "")
	createSession(t, v, "s-idle", "")
	createSession(t, v, "s-live", "")
	first, _ := runReply(t, v, "s-gone", "t1", "gone-1", "pid")
	_, idlePGID := runReply(t, v, "s-idle", "t1", "idle-1", "pid")
	if syscall.Kill(-idlePGID, 0) != nil {
		t.Fatal("the session process of s-idle is gone after its turn; the test cannot show that pruning ends it")
	}
	postTurn(t, v, "s-live", turnBody("t1", "live-1", "stall"))
	if resp := v.do(t, "POST", "/v1/sessions/s-gone/close", ""); resp.StatusCode != 200 {
		t.Fatalf("close = %d", resp.StatusCode)
	}

	// Nothing goes before its time.
	clk.Add(store.DefaultIdentityTTL - time.Second)
	if err := v.e.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s-gone", "s-idle", "s-live"} {
		if resp := v.do(t, "GET", "/v1/sessions/"+id, ""); resp.StatusCode != 200 {
			t.Errorf("GET /v1/sessions/%s before expiry = %d, want 200", id, resp.StatusCode)
		}
	}
	if got := decode[wire.SessionView](t, v.do(t, "GET", "/v1/sessions/s-idle", "")); got.Closed {
		t.Error("s-idle closed before it was idle for SessionIdle")
	}

	clk.Add(2 * time.Second)
	if err := v.e.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/sessions/s-gone", "/v1/sessions/s-gone/events", "/v1/runs/gone-1"} {
		resp := v.do(t, "GET", path, "")
		if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 404 || e.Error.Type != wire.TypeNotFound {
			t.Errorf("GET %s after prune = %d %+v, want 404 %s", path, resp.StatusCode, e.Error, wire.TypeNotFound)
		}
	}
	if got := decode[wire.SessionView](t, v.do(t, "GET", "/v1/sessions/s-idle", "")); !got.Closed {
		t.Error("s-idle is still open after SessionIdle without a turn")
	}
	polltest.Until(t, 5*time.Second, fmt.Sprintf("the process group %d of idle session s-idle to end with its close", idlePGID),
		func() bool { return syscall.Kill(-idlePGID, 0) != nil })
	if resp := v.do(t, "POST", "/v1/sessions/s-idle/turns", turnBody("t2", "idle-2", "hello")); resp.StatusCode != 409 {
		t.Errorf("turn to the idle-closed session = %d, want 409", resp.StatusCode)
	}
	live := decode[wire.SessionView](t, v.do(t, "GET", "/v1/sessions/s-live", ""))
	if live.Closed {
		t.Error("s-live, with a live run, was closed")
	}
	if s := decode[wire.RunSnapshot](t, v.do(t, "GET", "/v1/runs/live-1", "")); s.Terminal {
		t.Errorf("the live run was ended by the prune: %+v", s)
	}

	// The forgotten id starts over: a new session, the same turn and run
	// ids, and a new native session rather than the old one resumed.
	createSession(t, v, "s-gone", "")
	again, _ := runReply(t, v, "s-gone", "t1", "gone-1", "pid")
	oldSession, newSession := strings.Fields(first)[1], strings.Fields(again)[1]
	if oldSession == newSession {
		t.Errorf("the re-created session resumed the forgotten native session (%s)", oldSession)
	}
	cancelRun(t, v, "s-live", "live-1")
}

// TestSessionEventsAfterPrune reads a session whose first turn retention
// deleted: a reader from the start gets expired_replay_cursor, not the
// later turn's events with a silent gap; a reader past the deleted turn
// reads on.
func TestSessionEventsAfterPrune(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Now()}
	v := newEnv(t, config{store: store.Options{Now: clk.Now}})
	createSession(t, v, "s-old", "")
	runReply(t, v, "s-old", "t1", "old-1", "pid")
	clk.Add(store.DefaultIdentityTTL + time.Second)
	runReply(t, v, "s-old", "t2", "old-2", "pid")
	if err := v.e.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if resp := v.do(t, "GET", "/v1/runs/old-1", ""); resp.StatusCode != 404 {
		t.Fatalf("GET the first turn's run after prune = %d, want 404", resp.StatusCode)
	}
	turns, err := v.e.Store().Turns(ctx, "s-old", 0)
	if err != nil || len(turns) != 1 || turns[0].Index != 1 {
		t.Fatalf("turns after prune = %+v, %v; want the second alone", turns, err)
	}

	req, _ := http.NewRequestWithContext(ctx, "GET", v.url+"/v1/sessions/s-old/events", nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "event: error\n") || !strings.Contains(string(body), wire.TypeExpiredReplayCursor) ||
		strings.Contains(string(body), "message.part.updated") {
		t.Errorf("session events from the start after prune:\n%s\nwant only an expired_replay_cursor error", body)
	}

	frames := openEvents(t, v, "/v1/sessions/s-old/events", strconv.FormatInt(turns[0].Offset, 10)).until(isTerminal)
	if got := frameText(frames); !strings.HasPrefix(got, "pid=") {
		t.Errorf("session events after the deleted turn = %q, want the second turn's reply", got)
	}
}
