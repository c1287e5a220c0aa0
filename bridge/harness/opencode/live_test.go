package opencode_test

import (
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/opencode"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// opencodeSpec is the opencode release the live tests drive.
const opencodeSpec = "opencode-ai@1.18.33"

// TestLive_Opencode drives two turns of one session through the bridge
// and the real opencode CLI over the Anthropic provider: thinking, a bash
// tool call that writes a proof file, the scripted text; then a resumed
// turn. The first prompt looks like a flag on purpose.
func TestLive_Opencode(t *testing.T) {
	want1 := "opencode turn one " + harnesstest.RandomHex(6)
	want2 := "opencode turn two " + harnesstest.RandomHex(6)
	proof := "proof-" + harnesstest.RandomHex(4)
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Join(routerstub.Thinking("Plan: write it."), routerstub.Text("Writing the proof."),
			routerstub.ToolCall("bash", `{"command":"echo `+proof+` > proof.txt","description":"Write the proof"}`)),
		routerstub.Deltas(want2, 5),
	).AfterTool(routerstub.Deltas(want1, 7))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: opencode.Adapter{}, Spec: opencodeSpec, Bin: "opencode",
		Script: script, ServedModel: "router-served-model"})

	h := l.Health(t)
	if len(h.Backends) != 1 || h.Backends[0].Name != "opencode" || h.Backends[0].Version != "1.18.33" {
		t.Errorf("health backends = %+v, want opencode ready at 1.18.33", h.Backends)
	}

	prompt := "-> Write the proof file, then say something."
	turn := l.Chat(t, "oc-1", "s-oc", "opencode/anthropic/claude-sonnet-4-5", prompt)
	// The served-model plugin names the model of both requests, once.
	seen := l.CheckToolTurn(t, turn, harnesstest.ToolTurnWant{Text: want1, MinDeltas: 2, Tool: "bash", Proof: proof,
		ServedModels: []string{"router-served-model"}})
	if turn.Reasoning != "Plan: write it." {
		t.Errorf("turn 1 reasoning = %q, want the scripted thinking", turn.Reasoning)
	}
	reqs := l.Stub.Requests()
	if _, _, n := l.StubUsage(0); n != 2 || reqs[0].Prompt != prompt {
		t.Errorf("stub saw %d model requests, the first with prompt %q; want 2 (no title call) and %q", n, reqs[0].Prompt, prompt)
	}

	turn2 := l.Chat(t, "oc-2", "s-oc", "opencode/anthropic/claude-sonnet-4-5", "Say something else.")
	l.CheckResumedTurn(t, turn2, want2, want1, seen)
	l.CheckKeyed(t, routerstub.AuthAPIKey)
}
