package codex_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/codex"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/npmtest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// codexSpec is the Codex release the live tests drive.
const codexSpec = "@openai/codex@0.171.0"

// TestLive_Codex runs the live tests of the real Codex CLI through the
// bridge, sharing one installation.
//
// liveTurns drives two turns of one session through the bridge and
// the real Codex CLI: a shell tool call that writes a proof file, then the
// scripted text; then a resumed turn. Each turn's usage must equal what
// the stub measured for that turn's requests, although Codex reports
// totals over the thread.
func TestLive_Codex(t *testing.T) {
	pkg := harnesstest.Install(t, codexSpec)
	t.Run("two turns", func(t *testing.T) { liveTurns(t, &pkg, false) })
	t.Run("two turns, the second in a spare", func(t *testing.T) { liveTurns(t, &pkg, true) })
	t.Run("reconnecting", func(t *testing.T) { liveReconnecting(t, &pkg) })
}

func liveTurns(t *testing.T, pkg *npmtest.Package, spares bool) {
	want1 := "codex turn one " + harnesstest.RandomHex(6)
	want2 := "codex turn two " + harnesstest.RandomHex(6)
	proof := "proof-" + harnesstest.RandomHex(4)
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Join(routerstub.Text("Writing the proof."), routerstub.ToolCall("exec_command", `{"cmd":"echo `+proof+` > proof.txt"}`)),
		routerstub.Deltas(want2, 5),
	).AfterTool(routerstub.Deltas(want1, 7))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: codex.Adapter{}, Pkg: pkg, Bin: "codex",
		Script: script, ServedModel: "router-served-model", Spares: spares})

	h := l.Health(t)
	if len(h.Backends) != 1 || h.Backends[0].Name != "codex" || h.Backends[0].Version != "codex-cli 0.171.0" {
		t.Errorf("health backends = %+v, want codex ready at codex-cli 0.171.0", h.Backends)
	}

	turn := l.Chat(t, "codex-1", "s-codex", "codex/gpt-5.5", "Write the proof file, then say something.")
	// The stub names the served model in the Openai-Model header; Codex
	// reports it as a reroute, once per turn.
	seen := l.CheckToolTurn(t, turn, harnesstest.ToolTurnWant{Text: want1, MinDeltas: 2, Tool: "shell", Proof: proof,
		ServedModels: []string{"router-served-model"}})

	if spares {
		polltest.Until(t, 30*time.Second, "the spares", func() bool { return l.Engine.Stats().Spares == 2 })
	}
	turn2 := l.Chat(t, "codex-2", "s-codex", "codex/gpt-5.5", "Say something else.")
	l.CheckResumedTurn(t, turn2, want2, want1, seen)
	if r, err := l.Store.GetRun(t.Context(), "codex-2"); err != nil || strings.HasPrefix(r.Marker, engine.MarkerVar+"=spare-") != spares {
		t.Errorf("the resumed turn's marker %q (%v): spares %v", r.Marker, err, spares)
	}
	reqs := l.Stub.Requests()
	last := reqs[len(reqs)-1]
	l.CheckKeyed(t, routerstub.AuthBearer)
	if diff := cmp.Diff("gpt-5.5", last.Model); diff != "" {
		t.Errorf("requested model (-want +got):\n%s", diff)
	}
}

// liveReconnecting points Codex at an endpoint that does not listen: it
// retries forever, and the run ends at its deadline with an error that
// says why.
func liveReconnecting(t *testing.T, pkg *npmtest.Package) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	l := harnesstest.Start(t, harnesstest.Config{Adapter: codex.Adapter{}, Pkg: pkg, Bin: "codex",
		Script: routerstub.NewQueue(routerstub.Text("never")), RouterURL: dead, Timeout: 20 * time.Second})
	turn := l.Chat(t, "codex-dead", "", "codex/default", "Say hi.")
	if !turn.Done || turn.Err == nil || turn.Err.Type != wire.TypeHarnessTimeout ||
		!strings.Contains(turn.Err.Message, "Reconnecting") {
		t.Errorf("turn = %s, want a harness_timeout error naming codex's reconnecting", turn)
	}
	if turn.Err != nil {
		t.Logf("error: %s", turn.Err.Message)
	}
}
