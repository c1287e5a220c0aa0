package pi_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/pi"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/conformance/routerstub"
)

// TestLive_Pi drives two turns of one session through the bridge and the
// real Pi CLI, for each release line: a bash tool call that writes a proof
// file and the scripted text in deltas, then a resumed turn.
func TestLive_Pi(t *testing.T) {
	for _, tt := range []struct{ spec, version string }{
		{"@earendil-works/pi-coding-agent@1.6.0", "1.6.0"},
		{"@mariozechner/pi-coding-agent@0.73.1", "0.73.1"},
	} {
		t.Run(tt.version, func(t *testing.T) { liveTurns(t, tt.spec, tt.version) })
	}
}

func liveTurns(t *testing.T, spec, version string) {
	want1 := "pi turn one " + harnesstest.RandomHex(6)
	want2 := "pi turn two " + harnesstest.RandomHex(6)
	proof := "proof-" + harnesstest.RandomHex(4)
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Join(routerstub.Text("Writing the proof."), routerstub.ToolCall("bash", `{"command":"echo `+proof+` > proof.txt"}`)),
		routerstub.Deltas(want2, 5),
	).AfterTool(routerstub.Deltas(want1, 7))
	l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Spec: spec, Bin: "pi",
		Script: script, ServedModel: "router-served-model"})

	h := l.Health(t)
	if len(h.Backends) != 1 || h.Backends[0].Name != "pi" || h.Backends[0].Version != version {
		t.Errorf("health backends = %+v, want pi ready at %s", h.Backends, version)
	}

	turn := l.Chat(t, "pi-1", "s-pi", "pi/router/router-chat", "Write the proof file, then say something.")
	if !turn.Done || turn.Err != nil || turn.Finish != wire.FinishStop {
		t.Fatalf("turn 1: %s", turn)
	}
	if !strings.Contains(turn.Text, want1) || turn.TextDeltas < 5 {
		t.Errorf("turn 1 text = %q in %d deltas, want %q streamed", turn.Text, turn.TextDeltas, want1)
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
	if diff := cmp.Diff([]string{"router-served-model"}, turn.ProviderModels); diff != "" {
		t.Errorf("provider_models (-want +got):\n%s", diff)
	}
	seen := len(l.Stub.Requests())

	turn2 := l.Chat(t, "pi-2", "s-pi", "pi/router/router-chat", "Say something else.")
	if !turn2.Done || turn2.Err != nil || !strings.Contains(turn2.Text, want2) || strings.Contains(turn2.Text, want1) {
		t.Fatalf("turn 2: %s", turn2)
	}
	harnesstest.CheckMeasured(t, turn2.Usage)
	in2, out2, _ := l.StubUsage(seen)
	if turn2.Usage != nil && (turn2.Usage.PromptTokens != in2 || turn2.Usage.CompletionTokens != out2) {
		t.Errorf("resumed turn usage = %d in / %d out, want %d / %d", turn2.Usage.PromptTokens, turn2.Usage.CompletionTokens, in2, out2)
	}
	reqs := l.Stub.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), want1) || last.Model != "router-chat" {
		t.Errorf("the resumed turn's model request (model %q) lacks turn one's answer: the session was not resumed", last.Model)
	}
	l.CheckKeyed(t, routerstub.AuthBearer)
}
