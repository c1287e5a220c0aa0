package conformance_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/boxtest"
)

// The suite against deliberately broken images: each makes the cases it
// breaks fail, with evidence that says why, and leaves no box behind.

// TestSuite_PinMismatch runs the suite with pins whose Claude Code
// version the image does not have: no box passes the pin check, and
// box.pin names both versions.
func TestSuite_PinMismatch(t *testing.T) {
	t.Parallel()
	w := setup(t)
	tg := dockerTarget(t, w, boxtest.Options{})
	real := boxtest.Pins(t)
	h, _ := real.Harness("claude-code")
	mismatch := real.Clone()
	for i := range mismatch.Harnesses {
		if p := &mismatch.Harnesses[i]; p.Name == "claude-code" {
			p.Version, p.VersionPattern = "9.9.9", `^9\.9\.9 \(Claude Code\)$`
		}
	}
	tg.Pins = mismatch
	rep := run(t, tg, conformance.Options{Cases: []string{"box", "provider.turn", "session.dispatch"}})
	wantFail(t, result(t, rep, "claude-code", "box.pin"), "version 9.9.9", h.Version+" (Claude Code)")
	for _, res := range rep.Results {
		switch {
		case res.Case == "box.clone" && res.Outcome == conformance.NotApplicable:
		default:
			// No box can be made: every case says the pin does not match.
			wantFail(t, res, "9.9.9")
		}
	}
}

// TestSuite_NeverReady runs the suite on an image whose bridge never
// listens: box.ready fails naming the deadline, and so does every case
// that needs a box.
func TestSuite_NeverReady(t *testing.T) {
	t.Parallel()
	w := setup(t)
	tg := dockerTarget(t, w, boxtest.Options{Bridge: []byte("#!/bin/sh\necho 'box-bridge: this build never listens' >&2\nexec sleep 3600\n")})
	const ready = 5 * time.Second
	rep := run(t, tg, conformance.Options{ReadyTimeout: ready, Cases: []string{"box.ready", "provider.turn", "box.destroy"}})
	wantFail(t, result(t, rep, "claude-code", "box.ready"), "backend claude-code ready within 5s", "did not answer /health within 5s")
	for _, id := range []string{"provider.turn", "box.destroy"} {
		wantFail(t, result(t, rep, "claude-code", id), "did not answer /health within 5s")
	}
}

// TestSuite_LossyReplay runs the suite on an image whose bridge drops
// every other frame of a replay (conformance/internal/lossybridge): live
// turns still pass, every case that replays fails, and the event ids case
// shows the missing events.
func TestSuite_LossyReplay(t *testing.T) {
	t.Parallel()
	w := setup(t)
	bin, err := os.ReadFile(boxbridgetest.Binary(t, "conformance/internal/lossybridge", "box-bridge"))
	if err != nil {
		t.Fatal(err)
	}
	tg := dockerTarget(t, w, boxtest.Options{Bridge: bin})
	rep := run(t, tg, conformance.Options{Cases: []string{"provider.turn", "control.cancel", "session"}})
	for _, id := range []string{"provider.turn", "control.cancel"} {
		if res := result(t, rep, "claude-code", id); res.Outcome != conformance.Pass {
			t.Errorf("%s = %s, want pass: live streams are whole (%v)", id, res.Outcome, res.Evidence)
		}
	}
	wantFail(t, result(t, rep, "claude-code", "session.event-ids"), "the live stream's events", ", want ")
	for _, res := range rep.Results {
		if strings.HasPrefix(res.Case, "session.") {
			wantFail(t, res)
		}
	}
}
