package opencode_test

import (
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/opencode"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/conformance/routerstub"
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
	if !turn.Done || turn.Err != nil || turn.Finish != wire.FinishStop {
		t.Fatalf("turn 1: %s", turn)
	}
	if !strings.Contains(turn.Text, want1) || turn.TextDeltas < 2 || turn.Reasoning != "Plan: write it." {
		t.Errorf("turn 1 text = %q in %d deltas, reasoning %q; want %q after the first part and the thinking",
			turn.Text, turn.TextDeltas, turn.Reasoning, want1)
	}
	if len(turn.ToolCalls) != 1 || turn.ToolCalls[0].Function.Name != "bash" || !strings.Contains(turn.ToolCalls[0].Function.Arguments, proof) ||
		len(turn.ToolResults) != 1 || turn.ToolResults[0].IsError {
		t.Errorf("turn 1 tool calls %+v, results %+v; want the bash call and its result", turn.ToolCalls, turn.ToolResults)
	}
	harnesstest.CheckMeasured(t, turn.Usage)
	in, out, n := l.StubUsage(0)
	if turn.Usage != nil && (turn.Usage.PromptTokens != in || turn.Usage.CompletionTokens != out) {
		t.Errorf("turn 1 usage = %d in / %d out, want %d / %d as the stub measured over %d requests",
			turn.Usage.PromptTokens, turn.Usage.CompletionTokens, in, out, n)
	}
	// opencode's output never names the model that served a request.
	if len(turn.ProviderModels) != 0 {
		t.Errorf("provider_models = %v, want none: opencode does not report the served model", turn.ProviderModels)
	}
	reqs := l.Stub.Requests()
	if n != 2 || reqs[0].Prompt != prompt {
		t.Errorf("stub saw %d model requests, the first with prompt %q; want 2 (no title call) and %q", n, reqs[0].Prompt, prompt)
	}
	seen := len(reqs)

	turn2 := l.Chat(t, "oc-2", "s-oc", "opencode/anthropic/claude-sonnet-4-5", "Say something else.")
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
	l.CheckKeyed(t, routerstub.AuthAPIKey)
}
