package engine

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// retainedTurn admits turn 1 of a new session sid with prompt and waits
// for its end; it returns the run's frames.
func (f *fixture) retainedTurn(t *testing.T, sid, prompt string) []string {
	t.Helper()
	ctx := context.Background()
	if _, _, err := f.st.CreateSession(ctx, store.RetainedSession{ID: sid, Harness: "claude-code", Model: "claude-code/sonnet",
		Digest: "d-" + sid, Request: []byte(`{}`), Policy: wire.PolicyInteractive}); err != nil {
		t.Fatal(err)
	}
	run := sid + "-r1"
	if _, _, _, err := f.e.AdmitTurn(ctx, TurnRequest{Turn: store.Turn{SessionID: sid, TurnID: "t1", Digest: "d-" + run},
		RunID: run, Digest: "d-" + run, Backend: f.backend, Model: "sonnet", ModelID: "claude-code/sonnet", Prompt: prompt,
		Policy: wire.PolicyInteractive, Boundary: func(store.Turn) []byte { return []byte(`{}`) }}); err != nil {
		t.Fatalf("AdmitTurn(%s): %v", sid, err)
	}
	frames := readAll(t, f.e, run, 0)
	waitRun(t, f, run)
	return frames
}

var pidReply = regexp.MustCompile(`pid=(\d+)`)

// TestEngine_MaxSessionProcs shows the cap on idle session processes: with
// MaxSessionProcs 1, the turn of a second session ends the idle process
// of the first, and Stats counts one idle process throughout.
func TestEngine_MaxSessionProcs(t *testing.T) {
	f := newFixture(t, Options{MaxSessionProcs: 1})
	m := pidReply.FindStringSubmatch(strings.Join(f.retainedTurn(t, "a", "pid"), "\n"))
	if m == nil {
		t.Fatal("session a's turn did not report its pid")
	}
	pidA, _ := strconv.Atoi(m[1])
	if n := f.e.Stats().IdleSessionProcs; n != 1 || syscall.Kill(pidA, 0) != nil {
		t.Fatalf("after session a's turn: %d idle processes (a's alive: %v), want a's", n, syscall.Kill(pidA, 0) == nil)
	}
	f.retainedTurn(t, "b", "hello")
	polltest.Until(t, 10*time.Second, "session a's idle process to end after session b's turn (MaxSessionProcs 1)",
		func() bool { return syscall.Kill(pidA, 0) != nil })
	if n := f.e.Stats().IdleSessionProcs; n != 1 {
		t.Errorf("idle processes after session b's turn = %d, want 1 (b's)", n)
	}
}

// TestEngine_Stats shows the figures Stats reports: open readers, and a
// harness that cannot be started counted as a spawn failure of its
// harness.
func TestEngine_Stats(t *testing.T) {
	f := newFixture(t, Options{})
	f.backend.Bin = "/nonexistent/claude"
	f.start(t, "r1", "hello")
	r := waitRun(t, f, "r1")
	if r.Status != store.StatusError || r.ErrType != wire.TypeHarnessUnavailable {
		t.Fatalf("run with a missing binary = %s %s, want error %s", r.Status, r.ErrType, wire.TypeHarnessUnavailable)
	}
	rd1, rd2 := f.e.NewReader("r1", 0), f.e.NewReader("r1", 0)
	st := f.e.Stats()
	if st.Readers != 2 || st.SpawnFailures["claude-code"] != 1 || st.LiveRuns != 0 {
		t.Errorf("Stats() = %+v, want 2 readers, 1 claude-code spawn failure, no live run", st)
	}
	rd1.Close()
	rd1.Close() // closing twice counts once
	rd2.Close()
	if n := f.e.Stats().Readers; n != 0 {
		t.Errorf("Stats().Readers after closing both = %d, want 0", n)
	}
}
