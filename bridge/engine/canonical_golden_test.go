package engine

import (
	"bytes"
	"encoding/json"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/goldentest"
)

var framesOut = flag.String("frames", "", "write every envelope of TestCanonical_frames to this file, as a JSON array, for checking with another validator")

// canonicalStep is one thing the engine asks of a run's canonical encoder.
type canonicalStep func(t *testing.T, c *canonical) [][]byte

// canonicalScenario is a scripted retained turn: the run it belongs to and
// the encoder calls the engine makes for it, in order.
type canonicalScenario struct {
	name    string
	run     store.Run
	backend string
	steps   []canonicalStep
}

// on feeds one harness event, as retainedTurn.handle does.
func on(ev harness.Event) canonicalStep {
	return func(_ *testing.T, c *canonical) [][]byte { return c.events(ev) }
}

// status queues a status event, as retainedTurn.start and fail do.
func status(s, detail string) canonicalStep {
	return func(_ *testing.T, c *canonical) [][]byte { return [][]byte{c.status(s, detail)} }
}

// ask raises interaction id for question q of run, as Engine.question
// does for an attended turn.
func ask(q harness.Question, id string, run store.Run) canonicalStep {
	return func(t *testing.T, c *canonical) [][]byte {
		t.Helper()
		ir, err := interactionRequest(q, id, run, true)
		if err != nil {
			t.Fatalf("interactionRequest(%q) = %v", id, err)
		}
		return [][]byte{c.frame(interactionEvent{Type: "interaction", Request: ir})}
	}
}

// withdraw closes an open interaction, as retainedTurn.finish does.
func withdraw(id, reason string) canonicalStep {
	return func(_ *testing.T, c *canonical) [][]byte {
		return [][]byte{c.frame(interactionCancelEvent{Type: "interaction.cancel", ID: id, Reason: reason})}
	}
}

// endWith ends the turn with its end event.
func endWith(ev harness.Event) canonicalStep {
	ev.Kind = harness.KindEnd
	return func(_ *testing.T, c *canonical) [][]byte { return c.end(ev) }
}

func text(s string) canonicalStep { return on(harness.Event{Kind: harness.KindText, Text: s}) }
func think(s string) canonicalStep {
	return on(harness.Event{Kind: harness.KindReasoning, Text: s})
}

// call announces tool call index (with its whole arguments, or "" when
// they follow as fragments); fragment streams a piece of its arguments.
func call(index int, id, name, args string) canonicalStep {
	return on(harness.Event{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: index, ID: id, Type: "function",
		Function: wire.ToolCallFunction{Name: name, Arguments: args}}})
}

func fragment(index int, args string) canonicalStep {
	return on(harness.Event{Kind: harness.KindToolCall, ToolCall: &wire.ToolCall{Index: index,
		Function: wire.ToolCallFunction{Arguments: args}}})
}

func result(id, content string, isError bool) canonicalStep {
	return on(harness.Event{Kind: harness.KindToolResult, ToolResult: &wire.ToolResult{ToolCallID: id, Content: content, IsError: isError}})
}

// testRun is the run of a scenario, with every coordinate of a binding.
func testRun(id string) store.Run {
	return store.Run{ID: id, Provider: "box", EnvironmentID: "env-1", SessionID: "ses_1", ExecutionID: "exec-" + id}
}

// canonicalScenarios covers every kind of event a retained run's frames
// carry: text and reasoning parts, tool parts in each state (pending while
// arguments stream, running, completed, error; a result without its call;
// arguments that are not an object), interactions and their withdrawal,
// usage as a raw event, a warning that an output was cut, and each
// terminal status.
func canonicalScenarios() []canonicalScenario {
	done, failed, cancelled := testRun("run-done"), testRun("run-failed"), testRun("run-cancelled")
	return []canonicalScenario{
		{name: "completed", run: done, backend: "claude", steps: []canonicalStep{
			status("started", ""),
			think("Let me look"),
			think(" around."),
			text("Hel"),
			text("lo"),
			call(0, "toolu_1", "Bash", ""),
			fragment(0, `{"command":`),
			fragment(0, ` "ls -la"}`),
			ask(harness.Question{NativeID: "n-1", Kind: "permission", Tool: "Bash", Input: json.RawMessage(`{"command":"ls -la"}`),
				Title: "Run ls -la"}, "perm-1", done),
			result("toolu_1", "a.txt\nb.txt", false),
			call(1, "call-2", "Read", `{"path":"/etc/shadow"}`),
			result("call-2", "permission denied", true),
			call(2, "call-3", "Edit", `["not","an object"]`),
			result("call-3", "", true),
			result("item_7", "ok", false),
			text("Done."),
			on(harness.Event{Kind: harness.KindProviderModel, ProviderModel: "served-model-1"}),
			on(harness.Event{Kind: harness.KindProviderModel, ProviderModel: "served-model-1"}),
			endWith(harness.Event{Finish: wire.FinishStop, Usage: &wire.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150,
				CacheReadInputTokens: ptr(int64(100)), CacheWriteInputTokens: ptr(int64(5)), Cost: ptr(0.0125), Estimated: ptr(false)}}),
		}},
		{name: "failed", run: failed, backend: "codex", steps: []canonicalStep{
			status("started", ""),
			text("partial"),
			call(0, "item_1", "shell", `{"command":["yes"]}`),
			result("item_1", strings.Repeat("y\n", wire.MaxContractString/2)+"y", false), // one character past the bound
			endWith(harness.Event{Err: &wire.ErrorBody{Type: wire.TypeHarnessError, Message: "the model API refused the request"}}),
		}},
		{name: "cancelled", run: cancelled, backend: "pi", steps: []canonicalStep{
			status("started", ""),
			ask(harness.Question{NativeID: "n-9", Kind: "permission", Title: "Allow this?", Input: json.RawMessage(`{}`)}, "perm-1", cancelled),
			withdraw("perm-1", wire.TypeRunCancelled),
			status("cancelled", wire.TypeRunCancelled+": the run was cancelled; pi interrupted its turn"),
		}},
	}
}

// play runs a scenario through a fresh encoder whose clock starts at a
// fixed instant and ticks a millisecond per frame.
func play(t *testing.T, sc canonicalScenario) [][]byte {
	t.Helper()
	c := newCanonical(sc.run.ID, sc.run.SessionID, sc.backend, 0)
	at := time.Date(2026, 11, 30, 0, 10, 10, 0, time.UTC)
	c.now = func() time.Time { at = at.Add(time.Millisecond); return at }
	var out [][]byte
	for _, step := range sc.steps {
		out = append(out, step(t, c)...)
	}
	return out
}

// TestCanonical_golden pins the frames of the scripted turns byte for byte:
// one envelope a line, as the store keeps and a reader replays them.
func TestCanonical_golden(t *testing.T) {
	for _, sc := range canonicalScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			var got bytes.Buffer
			for _, f := range play(t, sc) {
				got.Write(f)
				got.WriteByte('\n')
			}
			goldentest.Check(t, filepath.Join("testdata", "canonical_"+sc.name+".golden"), got.Bytes())
		})
	}
}

// TestCanonical_replay checks that a run's frames, ids included, are a
// function of its events alone, apart from the clock.
func TestCanonical_replay(t *testing.T) {
	for _, sc := range canonicalScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			if diff := cmp.Diff(play(t, sc), play(t, sc)); diff != "" {
				t.Errorf("two plays of %s differ (-first +second):\n%s", sc.name, diff)
			}
		})
	}
}
