package harnesstest

import (
	"slices"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// ToolTurnWant is what a live turn with one tool step must show.
type ToolTurnWant struct {
	// Text is the answer the model gave after the tool step; it must have
	// arrived in at least MinDeltas deltas.
	Text      string
	MinDeltas int
	// Tool is the tool call's name as the turn reports it; Proof is a
	// string its arguments hold.
	Tool, Proof string
	// ServedModels are the provider_models the turn must report: nil for
	// a harness that never names the model that served a request.
	ServedModels []string
}

// CheckToolTurn checks the first turn of a live session: it completed
// with finish reason stop, streamed w.Text, ran the one tool call (its
// result not an error), reported measured usage equal to what the stub
// counted over all its requests so far, and the served models of w. It
// returns how many requests the stub has seen, for CheckResumedTurn.
func (l *Live) CheckToolTurn(t *testing.T, turn Turn, w ToolTurnWant) int {
	t.Helper()
	if !turn.Done || turn.Err != nil || turn.Finish != wire.FinishStop {
		t.Fatalf("turn 1: %s", turn)
	}
	if !strings.Contains(turn.Text, w.Text) || turn.TextDeltas < w.MinDeltas {
		t.Errorf("turn 1 text = %q in %d deltas, want %q in at least %d", turn.Text, turn.TextDeltas, w.Text, w.MinDeltas)
	}
	if len(turn.ToolCalls) != 1 || turn.ToolCalls[0].Function.Name != w.Tool || !strings.Contains(turn.ToolCalls[0].Function.Arguments, w.Proof) ||
		len(turn.ToolResults) != 1 || turn.ToolResults[0].IsError {
		t.Errorf("turn 1 tool calls %+v, results %+v; want the %s call and its successful result", turn.ToolCalls, turn.ToolResults, w.Tool)
	}
	CheckMeasured(t, turn.Usage)
	in, out, n := l.StubUsage(0)
	if turn.Usage != nil && (turn.Usage.PromptTokens != in || turn.Usage.CompletionTokens != out) {
		t.Errorf("turn 1 usage = %d in / %d out, want %d / %d as the stub measured over %d requests",
			turn.Usage.PromptTokens, turn.Usage.CompletionTokens, in, out, n)
	}
	if !slices.Equal(turn.ProviderModels, w.ServedModels) {
		t.Errorf("provider_models = %v, want %v (only what the model API named)", turn.ProviderModels, w.ServedModels)
	}
	return len(l.Stub.Requests())
}

// CheckResumedTurn checks a session's second turn: it completed with
// want and not the first turn's answer earlier, reported usage equal to
// what the stub counted over the requests after the first seen, and its
// last model request carried earlier (the native session was resumed).
func (l *Live) CheckResumedTurn(t *testing.T, turn Turn, want, earlier string, seen int) {
	t.Helper()
	if !turn.Done || turn.Err != nil || !strings.Contains(turn.Text, want) || strings.Contains(turn.Text, earlier) {
		t.Fatalf("turn 2: %s", turn)
	}
	CheckMeasured(t, turn.Usage)
	in, out, n := l.StubUsage(seen)
	if turn.Usage != nil && (turn.Usage.PromptTokens != in || turn.Usage.CompletionTokens != out) {
		t.Errorf("resumed turn usage = %d in / %d out, want %d / %d as the stub measured over its %d requests",
			turn.Usage.PromptTokens, turn.Usage.CompletionTokens, in, out, n)
	}
	reqs := l.Stub.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), earlier) {
		t.Error("the resumed turn's model request lacks turn one's answer: the session was not resumed")
	}
}
