package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
)

// fakeReplica is a replica's reading side, held in memory.
type fakeReplica struct {
	turns  []replica.Turn
	events map[string][]broker.ReplicaEvent // by run
}

func (f *fakeReplica) ReplicaRuns(context.Context, string) ([]wire.ReplicaRun, error) {
	return nil, nil
}
func (f *fakeReplica) ReplicaTurns(context.Context, string) ([]replica.Turn, error) {
	return f.turns, nil
}
func (f *fakeReplica) NoteReplicaTurn(context.Context, string, replica.Turn) error { return nil }
func (f *fakeReplica) ReplicaEvents(_ context.Context, _, run string, after int64, limit int) ([]broker.ReplicaEvent, error) {
	evs, ok := f.events[run]
	if !ok {
		return nil, replica.ErrNotFound
	}
	var out []broker.ReplicaEvent
	for _, ev := range evs {
		if ev.Seq > after && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

// TestHistories: a session's history holds each ended turn's prompt and
// answer; the box's newest turn is interrupted when its run did not end,
// and also when its bridge ended it on the way out (a graceful stop of
// the box: a retained turn's status, a plain turn's error chunk), so that
// it is offered, never taken for an answered turn.
func TestHistories(t *testing.T) {
	chunk := func(content, finish string) json.RawMessage {
		fr := "null"
		if finish != "" {
			fr = `"` + finish + `"`
		}
		return json.RawMessage(fmt.Sprintf(`{"choices":[{"delta":{"content":%q},"finish_reason":%s}]}`, content, fr))
	}
	env := func(run string, seq int64, ev string) broker.ReplicaEvent {
		return broker.ReplicaEvent{Seq: seq, Data: json.RawMessage(fmt.Sprintf(`{"runId":%q,"eventId":"ev_%d","sequence":%d,"receivedAt":"2026-12-07T00:00:00Z","event":%s}`, run, seq, seq, ev))}
	}
	answered := []broker.ReplicaEvent{{Seq: 1, Data: chunk("Hel", "")}, {Seq: 2, Data: chunk("lo", "")}, {Seq: 3, Data: chunk("", "stop")}}
	for _, tc := range []struct {
		name   string
		newest []broker.ReplicaEvent
	}{
		{"cut short", []broker.ReplicaEvent{{Seq: 1, Data: chunk("Par", "")}}},
		{"plain turn ended by the bridge's shutdown", []broker.ReplicaEvent{{Seq: 1, Data: chunk("Par", "")},
			{Seq: 2, Data: json.RawMessage(`{"error":{"type":"bridge_shutdown","message":"the bridge shut down while the run was live"}}`)}}},
		{"retained turn ended by the bridge's shutdown", []broker.ReplicaEvent{env("r2", 1, `{"type":"status","status":"running"}`),
			env("r2", 2, `{"type":"status","status":"failed","detail":"bridge_shutdown: the bridge shut down while the run was live"}`)}},
		{"not in the replica", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := &fakeReplica{
				turns: []replica.Turn{
					{Run: "r1", RunBox: "b1", SessionID: "s", Prompt: "first"},
					{Run: "r2", RunBox: "b1", SessionID: "s", TurnID: "t2", ExecutionID: "r2", Prompt: "second"},
				},
				events: map[string][]broker.ReplicaEvent{"r1": answered},
			}
			if tc.newest != nil {
				rd.events["r2"] = tc.newest
			}
			p := &Provider{o: Options{Logger: slog.New(slog.DiscardHandler)}}
			sessions, interrupted, kept, err := p.histories(t.Context(), rd, "b1", "")
			if err != nil {
				t.Fatal(err)
			}
			h := sessions["s"]
			if len(h) != 2 || string(h[0].Content) != `"first"` || string(h[1].Content) != `"Hello"` {
				t.Errorf("history = %s", wire.MustJSON(h))
			}
			if len(interrupted) != 1 || interrupted[0].RunID != "r2" || interrupted[0].Turn().TurnID != "t2" || len(kept) != 1 {
				t.Errorf("interrupted = %+v, kept %+v: want r2 offered, r1 kept", interrupted, kept)
			}
		})
	}
	// A failure of the turn's own (not the bridge's shutdown) is its end.
	rd := &fakeReplica{turns: []replica.Turn{{Run: "r1", RunBox: "b1", SessionID: "s", Prompt: "first"}},
		events: map[string][]broker.ReplicaEvent{"r1": {{Seq: 1, Data: json.RawMessage(`{"error":{"type":"harness_error","message":"exit 1"}}`)}}}}
	p := &Provider{o: Options{Logger: slog.New(slog.DiscardHandler)}}
	if _, interrupted, kept, err := p.histories(t.Context(), rd, "b1", ""); err != nil || len(interrupted) != 0 || len(kept) != 1 {
		t.Errorf("a failed turn: interrupted %+v, kept %+v, %v; want it kept", interrupted, kept, err)
	}
}

// TestBoundRef: a run's events are read under the names its interaction
// events bind to (the environment that started it), not the continuing
// provider's; another run's binding is not taken.
func TestBoundRef(t *testing.T) {
	ref := provider.ControlRef{RunID: "r1", SessionID: "s", ExecutionID: "r1", Provider: "boxctl", EnvironmentID: "b1"}
	ev := func(run string) provider.StoredEvent {
		return provider.StoredEvent{Seq: 2, Data: json.RawMessage(fmt.Sprintf(`{"event":{"type":"interaction","request":{"id":"i1",
			"binding":{"runId":%q,"provider":"boxctl-docker","environmentId":"env-7","sessionId":"s","executionId":"x1","interactionId":"i1"}}}}`, run))}
	}
	other := provider.StoredEvent{Seq: 1, Data: json.RawMessage(`{"event":{"type":"status","status":"running"}}`)}
	got := boundRef(ref, []provider.StoredEvent{other, ev("r1")})
	if got.Provider != "boxctl-docker" || got.EnvironmentID != "env-7" || got.ExecutionID != "x1" || got.RunID != "r1" {
		t.Errorf("bound = %+v", got)
	}
	if got := boundRef(ref, []provider.StoredEvent{ev("r9")}); got != ref {
		t.Errorf("another run's binding taken: %+v", got)
	}
}
