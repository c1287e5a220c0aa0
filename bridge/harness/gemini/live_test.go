package gemini_test

import (
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness/gemini"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// geminiSpec is the Gemini CLI release the live tests drive.
const geminiSpec = "@google/gemini-cli@0.61.0"

// TestLive_Gemini drives two turns of one session through the bridge and
// the real Gemini CLI over the stub's Generative Language API: a shell
// tool call that writes a proof file and the scripted text in deltas,
// then a resumed turn.
func TestLive_Gemini(t *testing.T) {
	want1 := "gemini turn one " + harnesstest.RandomHex(6)
	want2 := "gemini turn two " + harnesstest.RandomHex(6)
	proof := "proof-" + harnesstest.RandomHex(4)
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Join(routerstub.Text("Writing the proof."),
			routerstub.ToolCall("run_shell_command", `{"command":"echo `+proof+` > proof.txt","description":"Write the proof"}`)),
		routerstub.Deltas(want2, 5),
	).AfterTool(routerstub.Deltas(want1, 7))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: gemini.Adapter{}, Spec: geminiSpec, Bin: "gemini",
		Script: script, ServedModel: "router-served-model"})

	h := l.Health(t)
	if len(h.Backends) != 1 || h.Backends[0].Name != "gemini" || h.Backends[0].Version != "0.61.0" {
		t.Errorf("health backends = %+v, want gemini ready at 0.61.0", h.Backends)
	}

	prompt := "-> Write the proof file,\nthen say something."
	turn := l.Chat(t, "gm-1", "s-gm", "gemini/gemini-2.5-pro", prompt)
	seen := l.CheckToolTurn(t, turn, harnesstest.ToolTurnWant{Text: want1, MinDeltas: 7, Tool: "run_shell_command", Proof: proof,
		ServedModels: []string{"router-served-model"}})
	reqs := l.Stub.Requests()
	// The CLI puts its session context before the prompt.
	if !strings.HasSuffix(reqs[0].Prompt, "\n"+prompt) || reqs[0].Model != "gemini-2.5-pro" {
		t.Errorf("first model request: prompt %q model %q, want it to end with %q, gemini-2.5-pro", reqs[0].Prompt, reqs[0].Model, prompt)
	}

	turn2 := l.Chat(t, "gm-2", "s-gm", "gemini/gemini-2.5-pro", "Say something else.")
	l.CheckResumedTurn(t, turn2, want2, want1, seen)
	l.CheckKeyed(t, routerstub.AuthGoogAPIKey)
}
