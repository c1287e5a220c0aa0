package gemini_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness/gemini"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/conformance/routerstub"
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
	if !turn.Done || turn.Err != nil || turn.Finish != wire.FinishStop {
		t.Fatalf("turn 1: %s", turn)
	}
	if !strings.Contains(turn.Text, want1) || turn.TextDeltas < 7 {
		t.Errorf("turn 1 text = %q in %d deltas, want %q streamed", turn.Text, turn.TextDeltas, want1)
	}
	if len(turn.ToolCalls) != 1 || turn.ToolCalls[0].Function.Name != "run_shell_command" || !strings.Contains(turn.ToolCalls[0].Function.Arguments, proof) ||
		len(turn.ToolResults) != 1 || turn.ToolResults[0].IsError {
		t.Errorf("turn 1 tool calls %+v, results %+v; want the shell call and its result", turn.ToolCalls, turn.ToolResults)
	}
	harnesstest.CheckMeasured(t, turn.Usage)
	in, out, n := l.StubUsage(0)
	if turn.Usage != nil && (turn.Usage.PromptTokens != in || turn.Usage.CompletionTokens != out) {
		t.Errorf("turn 1 usage = %d in / %d out, want %d / %d as the stub measured over %d requests",
			turn.Usage.PromptTokens, turn.Usage.CompletionTokens, in, out, n)
	}
	if diff := cmp.Diff([]string{"router-served-model"}, turn.ProviderModels); diff != "" {
		t.Errorf("provider_models (-want +got):\n%s", diff)
	}
	reqs := l.Stub.Requests()
	// The CLI puts its session context before the prompt.
	if !strings.HasSuffix(reqs[0].Prompt, "\n"+prompt) || reqs[0].Model != "gemini-2.5-pro" {
		t.Errorf("first model request: prompt %q model %q, want it to end with %q, gemini-2.5-pro", reqs[0].Prompt, reqs[0].Model, prompt)
	}
	seen := len(reqs)

	turn2 := l.Chat(t, "gm-2", "s-gm", "gemini/gemini-2.5-pro", "Say something else.")
	if !turn2.Done || turn2.Err != nil || !strings.Contains(turn2.Text, want2) || strings.Contains(turn2.Text, want1) {
		t.Fatalf("turn 2: %s", turn2)
	}
	harnesstest.CheckMeasured(t, turn2.Usage)
	in2, out2, _ := l.StubUsage(seen)
	if turn2.Usage != nil && (turn2.Usage.PromptTokens != in2 || turn2.Usage.CompletionTokens != out2) {
		t.Errorf("resumed turn usage = %d in / %d out, want %d / %d", turn2.Usage.PromptTokens, turn2.Usage.CompletionTokens, in2, out2)
	}
	reqs = l.Stub.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), want1) {
		t.Error("the resumed turn's model request lacks turn one's answer: the session was not resumed")
	}
	l.CheckKeyed(t, routerstub.AuthGoogAPIKey)
}
