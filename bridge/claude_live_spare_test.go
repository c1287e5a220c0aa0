package bridge

import (
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// TestLive_ClaudeSpare: after a completed turn the engine starts real
// Claude Code processes ahead of the next turns (the session's next, and
// a new session's first); those turns are served by them, complete with
// their own text, and the session's model calls carry its earlier turn,
// for the session that resumed and for the new one whose state the spare
// started.
func TestLive_ClaudeSpare(t *testing.T) {
	replies := []string{"first " + randHex(4), "second " + randHex(4), "third " + randHex(4), "fourth " + randHex(4)}
	var script []routerstub.Reply
	for _, r := range replies {
		script = append(script, routerstub.Text(r))
	}
	b, stub, _ := startLive(t, routerstub.NewQueue(routerstub.Text("unexpected extra call"), script...),
		func(o *engine.Options) { o.Spares = true })
	turn := func(run, session, prompt, want string) store.Run {
		t.Helper()
		body := `{"model":"claude-code","stream":true,"run_id":"` + run + `","session_id":"` + session +
			`","messages":[{"role":"user","content":"` + prompt + `"}]}`
		resp := b.do(t, "POST", "/v1/chat/completions", body)
		frames, done := readFrames(t, resp.Body, 1<<20)
		if resp.StatusCode != 200 || !done || !strings.Contains(strings.Join(frames, ""), want) {
			t.Fatalf("run %s: POST = %d, done %v, frames %q, want %q", run, resp.StatusCode, done, frames, want)
		}
		r, err := b.st.GetRun(t.Context(), run)
		if err != nil || r.Status != store.StatusDone {
			t.Fatalf("run %s = %+v, %v", run, r, err)
		}
		return r
	}
	spares := func(want int) {
		t.Helper()
		polltest.Until(t, 30*time.Second, "the spares", func() bool { return b.eng.Stats().Spares == want })
	}
	first := turn("turn-1", "sess-a", "Hello one.", replies[0])
	if strings.HasPrefix(first.Marker, engine.MarkerVar+"=spare-") {
		t.Errorf("the first turn's marker %q: no spare was kept before it", first.Marker)
	}
	spares(2)
	second := turn("turn-2", "sess-a", "Hello two.", replies[1])
	spares(2)
	third := turn("turn-3", "sess-b", "Hello three.", replies[2])
	spares(2)
	fourth := turn("turn-4", "sess-b", "Hello four.", replies[3])
	for _, r := range []store.Run{second, third, fourth} {
		if !strings.HasPrefix(r.Marker, engine.MarkerVar+"=spare-") {
			t.Errorf("run %s has marker %q, want a spare's", r.ID, r.Marker)
		}
	}
	if got := b.eng.Stats().SpareTurns; got != 3 {
		t.Errorf("SpareTurns = %d, want 3", got)
	}
	// Each session's later turn sent its earlier one to the model.
	var mains []routerstub.Request
	for _, r := range stub.Requests() {
		if r.Family != routerstub.FamilyNone && !r.Side {
			mains = append(mains, r)
		}
	}
	if len(mains) != 4 {
		t.Fatalf("%d main model calls, want 4", len(mains))
	}
	for i, want := range map[int]string{1: replies[0], 3: replies[2]} {
		if !strings.Contains(string(mains[i].Body), want) {
			t.Errorf("model call %d does not carry the session's earlier reply %q", i+1, want)
		}
	}
	if strings.Contains(string(mains[2].Body), replies[1]) {
		t.Errorf("the new session's first call carries the other session's reply")
	}
}
