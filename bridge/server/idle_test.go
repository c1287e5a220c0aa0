package server

import (
	"bufio"
	"fmt"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// TestHealth_idle checks that /health reports the time since the last
// turn, that a live run and an attached stream hold it at zero, and that
// health polls and other reads do not move it.
func TestHealth_idle(t *testing.T) {
	start := time.Now().UnixMilli()
	v := newEnv(t, config{})
	health := func() wire.Idle {
		t.Helper()
		h := decode[wire.Health](t, v.do(t, "GET", "/health", "", "Authorization", ""))
		if h.Idle == nil {
			t.Fatal("GET /health has no idle field")
		}
		return *h.Idle
	}
	if got := health(); got.LiveRuns != 0 || got.Streams != 0 || got.Since < start-1000 || got.Since > time.Now().UnixMilli() {
		t.Errorf("idle of a new bridge = %+v, want idle since about its start (%d)", got, start)
	}

	resp := v.do(t, "POST", "/v1/chat/completions", chatBody("idle-run", "graceful", true))
	if resp.StatusCode != 200 {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the run streams
		t.Fatal(err)
	}
	if got := health(); got.LiveRuns != 1 || got.Streams != 1 || got.IdleMS != 0 || got.Since != 0 {
		t.Errorf("idle during a live streamed run = %+v, want 1 live run, 1 stream, not idle", got)
	}
	beforeEnd := time.Now().UnixMilli()
	if r := v.do(t, "POST", "/v1/runs/idle-run/cancel?wait_ms=10000", ""); r.StatusCode != 200 {
		t.Fatalf("cancel = %d", r.StatusCode)
	}
	readSSE(t, br)
	resp.Body.Close()
	var after wire.Idle
	polltest.UntilNil(t, 10*time.Second, "the run's stream to end", func() error {
		if after = health(); after.Streams != 0 {
			return fmt.Errorf("idle = %+v", after)
		}
		return nil
	})
	if after.LiveRuns != 0 || after.Streams != 0 || after.Since < beforeEnd || after.Since > time.Now().UnixMilli() {
		t.Fatalf("idle after the run = %+v, want idle since the run's end (after %d)", after, beforeEnd)
	}
	// Passive traffic keeps nothing awake.
	for range 5 {
		v.do(t, "GET", "/v1/runs/idle-run", "")
		v.do(t, "GET", "/v1/models", "")
		if got := health(); got.Since != after.Since || got.IdleMS < after.IdleMS {
			t.Fatalf("idle after passive requests = %+v, want still idle since %d", got, after.Since)
		}
	}
}
