package pi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/pi"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// TestLive_Pi drives two turns of one session through the bridge and the
// real Pi CLI, for each release line: a bash tool call that writes a proof
// file and the scripted text in deltas, then a resumed turn, which the
// pinned line's bridge hands to a Pi started ahead of it (a spare).
func TestLive_Pi(t *testing.T) {
	for _, tt := range []struct {
		spec, version string
		spares        bool
	}{
		{"@earendil-works/pi-coding-agent@1.6.0", "1.6.0", true},
		{"@mariozechner/pi-coding-agent@0.73.1", "0.73.1", false},
	} {
		t.Run(tt.version, func(t *testing.T) { liveTurns(t, tt.spec, tt.version, tt.spares) })
	}
}

func liveTurns(t *testing.T, spec, version string, spares bool) {
	want1 := "pi turn one " + harnesstest.RandomHex(6)
	want2 := "pi turn two " + harnesstest.RandomHex(6)
	proof := "proof-" + harnesstest.RandomHex(4)
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Join(routerstub.Text("Writing the proof."), routerstub.ToolCall("bash", `{"command":"echo `+proof+` > proof.txt"}`)),
		routerstub.Deltas(want2, 5),
	).AfterTool(routerstub.Deltas(want1, 7))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Spec: spec, Bin: "pi",
		Script: script, ServedModel: "router-served-model", Spares: spares})

	h := l.Health(t)
	if len(h.Backends) != 1 || h.Backends[0].Name != "pi" || h.Backends[0].Version != version {
		t.Errorf("health backends = %+v, want pi ready at %s", h.Backends, version)
	}

	turn := l.Chat(t, "pi-1", "s-pi", "pi/router/router-chat", "Write the proof file, then say something.")
	seen := l.CheckToolTurn(t, turn, harnesstest.ToolTurnWant{Text: want1, MinDeltas: 5, Tool: "bash", Proof: proof,
		ServedModels: []string{"router-served-model"}})

	if spares {
		polltest.Until(t, time.Minute, "the spares", func() bool { return l.Engine.Stats().Spares == 2 })
	}
	turn2 := l.Chat(t, "pi-2", "s-pi", "pi/router/router-chat", "Say something else.")
	l.CheckResumedTurn(t, turn2, want2, want1, seen)
	if r, err := l.Store.GetRun(t.Context(), "pi-2"); err != nil || strings.HasPrefix(r.Marker, engine.MarkerVar+"=spare-") != spares {
		t.Errorf("the resumed turn's marker %q (%v): spares %v", r.Marker, err, spares)
	}
	reqs := l.Stub.Requests()
	if last := reqs[len(reqs)-1]; last.Model != "router-chat" {
		t.Errorf("the resumed turn's model request asked for %q, want router-chat", last.Model)
	}
	l.CheckKeyed(t, routerstub.AuthBearer)
}
