package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness/claude"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/provider"
)

// TestLive_ClaudeClientPlainTurnsIdle drives our bridge and the real
// Claude Code CLI through the Go client with turns that carry no TurnID
// (nor ExecutionID), as a TypeScript cli-bridge user writes them: a
// Stream and a Dispatch in one session, served by the session's one
// long-lived process; left idle past SessionIdleTimeout, that process is
// released, and the next turn resumes the conversation in a fresh process
// (its model request carries both earlier turns). After Destroy, which
// closes nothing on the bridge, the idle timeout still releases the
// process.
func TestLive_ClaudeClientPlainTurnsIdle(t *testing.T) {
	word := "quokka-" + harnesstest.RandomHex(4)
	answer1, answer2, answer3 := "I will remember "+word+".", "Noted, second turn.", "The word was "+word+"."
	q := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Deltas(answer1, 3), routerstub.Text(answer2), routerstub.Text(answer3))
	const idle = 2 * time.Second
	l := harnesstest.Start(t, harnesstest.Config{Adapter: claude.Adapter{}, Spec: claudeCodeSpec, Bin: "claude", Script: q,
		ServedModel: "router-served-model", SessionIdleTimeout: idle})
	ctx := t.Context()
	p, err := provider.New(provider.Options{BaseURL: l.URL, BearerToken: harnesstest.Bearer,
		DefaultModel: "claude-code/claude-sonnet-4-5", BodyTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	// Discovering the capabilities switches the environment to the
	// retained routes (interactions are proven for claude-code).
	if caps, err := p.Capabilities(ctx); err != nil || !caps.InteractionsProven() {
		t.Fatalf("Capabilities = %+v, %v, want interactions proven", caps, err)
	}
	env, err := p.Create(ctx, provider.CreateRequest{Profile: provider.Profile{Name: "live-idle", Harness: "claude-code"}})
	if err != nil {
		t.Fatal(err)
	}
	const session = "live-idle-conv"
	stream := func(prompt string) (text string, final provider.Event) {
		t.Helper()
		for ev, err := range env.Stream(ctx, provider.Turn{Prompt: prompt, SessionID: session}) {
			if err != nil {
				t.Fatalf("Stream(%q): %v", prompt, err)
			}
			text += ev.Delta
			final = ev
		}
		return text, final
	}

	text1, end1 := stream("Remember the word " + word + ".")
	if end1.Status != provider.StatusCompleted || text1 != answer1 || end1.SessionID != session {
		t.Fatalf("Stream without TurnID = %q ending %+v, want %q completed in session %s", text1, end1, answer1, session)
	}
	ref, err := env.Dispatch(ctx, provider.Turn{Prompt: "Say something else.", SessionID: session})
	if err != nil {
		t.Fatalf("Dispatch without TurnID: %v", err)
	}
	s, err := env.Session(session, provider.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Result(ctx)
	if err != nil || !res.Success || res.Text != answer2 || res.RunID != ref.ControlRef.RunID {
		t.Fatalf("Result of the dispatched turn = %+v, %v, want %q from run %s", res, err, answer2, ref.ControlRef.RunID)
	}
	ended := time.Now()
	g1, g2 := l.RunGroup(t, end1.RunID), l.RunGroup(t, res.RunID)
	if g1 != g2 || !harnesstest.GroupAlive(g2) {
		t.Fatalf("the streamed and dispatched turns ran in process groups %d and %d (alive %v), want one live process", g1, g2, harnesstest.GroupAlive(g2))
	}

	t.Logf("the idle session process holds %d KiB of resident memory", groupRSS(g2))
	// Idle past the timeout: the process is released.
	harnesstest.WaitGone(t, g2)
	t.Logf("idle process released %v after its last turn (SessionIdleTimeout %v)", time.Since(ended).Round(10*time.Millisecond), idle)

	from := len(l.Stub.Requests())
	text3, end3 := stream("Which word did I ask you to remember?")
	if end3.Status != provider.StatusCompleted || text3 != answer3 {
		t.Fatalf("turn after the release = %q ending %+v, want %q completed", text3, end3, answer3)
	}
	g3 := l.RunGroup(t, end3.RunID)
	if g3 == g2 {
		t.Fatalf("turn after the release ran in the released process group %d", g3)
	}
	reqs := harnesstest.MainRequests(l.Stub, from)
	if len(reqs) != 1 {
		t.Fatalf("the resumed turn made %d model requests, want 1", len(reqs))
	}
	for _, prior := range []string{word, answer1, answer2} {
		if body := reqs[0].Body; !bytes.Contains(body, []byte(prior)) {
			t.Errorf("the resumed turn's model request lacks %q from the earlier turns; it ends:\n%s", prior, body[max(0, len(body)-2000):])
		}
	}

	if err := env.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	destroyed := time.Now()
	harnesstest.WaitGone(t, g3)
	if d := time.Since(destroyed); d > idle+10*time.Second {
		t.Errorf("the process outlived Destroy by %v, want about SessionIdleTimeout %v", d, idle)
	}
	t.Logf("after Destroy the idle process was released in %v", time.Since(destroyed).Round(10*time.Millisecond))
}

// groupRSS is the resident memory of the process group's members, in KiB.
func groupRSS(pgid int) int {
	total := 0
	for _, pid := range harnesstest.GroupMembers(pgid) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				total += n
			}
		}
	}
	return total
}
