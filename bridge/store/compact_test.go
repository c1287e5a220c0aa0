package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// finishedRun stores a terminal run with events and returns the store
// with its clock past the run's full replay.
func finishedRun(t *testing.T, opts Options, id string, events [][]byte) *Store {
	t.Helper()
	ctx := context.Background()
	clk := &clock{t: time.UnixMilli(1_700_000_000_000)}
	opts.Now = clk.Now
	s := open(t, t.TempDir(), opts)
	if _, _, err := s.CreateRun(ctx, Run{ID: id, Digest: "sha256:d", Harness: "claude-code", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, id, events[:len(events)-1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, id, Finish{Status: StatusDone}, events[len(events)-1:]); err != nil {
		t.Fatal(err)
	}
	clk.Add(s.Options().ReplayTTL + time.Second)
	if st, err := s.Prune(ctx); err != nil || st.ReplayExpired != 1 {
		t.Fatalf("Prune = %+v, %v, want one run replay-expired", st, err)
	}
	return s
}

func allEvents(t *testing.T, s *Store, id string) []Event {
	t.Helper()
	evs, err := s.Events(context.Background(), id, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestStore_CompactChunks(t *testing.T) {
	const n = KeptResultEvents + 300
	var events [][]byte
	var want strings.Builder
	for i := range n - 1 {
		text := fmt.Sprintf("w%d ", i)
		want.WriteString(text)
		c := wire.Chunk{ID: "chatcmpl-r", Object: wire.ChunkObject, Model: "m",
			Choices: []wire.ChunkChoice{{Delta: wire.Delta{Content: text}}}}
		if i == 5 {
			c.Choices[0].Delta.ToolCalls = []wire.ToolCall{{Index: 0, ID: "call-1", Function: wire.ToolCallFunction{Name: "Bash", Arguments: `{"c`}}}
		}
		if i == 6 {
			c.Choices[0].Delta.ToolCalls = []wire.ToolCall{{Index: 0, Function: wire.ToolCallFunction{Arguments: `md":1}`}}}
		}
		events = append(events, mustMarshal(c))
	}
	stop := "stop"
	events = append(events, mustMarshal(wire.Chunk{ID: "chatcmpl-r", Object: wire.ChunkObject, Model: "m",
		Choices: []wire.ChunkChoice{{FinishReason: &stop}}, Usage: &wire.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}}))
	s := finishedRun(t, Options{}, "r", events)

	r, err := s.GetRun(context.Background(), "r")
	if err != nil || !r.ResultKept || r.LastSeq != n || r.FirstSeq != n-KeptResultEvents || r.RetainedEvents != KeptResultEvents+1 {
		t.Fatalf("run after its replay = %+v, %v, want its result kept: events %d.. (one folded, %d verbatim)", r, err,
			n-KeptResultEvents, KeptResultEvents)
	}
	evs := allEvents(t, s, "r")
	var got strings.Builder
	var calls []wire.ToolCall
	var usage *wire.Usage
	for i, e := range evs {
		if want := int64(n-KeptResultEvents) + int64(i); e.Seq != want {
			t.Fatalf("event %d has seq %d, want %d", i, e.Seq, want)
		}
		var c wire.Chunk
		if err := json.Unmarshal(e.Data, &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			got.WriteString(ch.Delta.Content)
			calls = wire.MergeToolCalls(calls, ch.Delta.ToolCalls)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	if got.String() != want.String() {
		t.Errorf("text read from the start = %d bytes, want the whole %d", got.Len(), want.Len())
	}
	if len(calls) != 1 || calls[0].ID != "call-1" || calls[0].Function.Arguments != `{"cmd":1}` {
		t.Errorf("tool calls = %+v, want the whole folded call", calls)
	}
	if usage == nil || usage.TotalTokens != 7 {
		t.Errorf("usage = %+v, want the run's", usage)
	}
}

func TestStore_CompactCanonical(t *testing.T) {
	const n = KeptResultEvents + 650
	envelope := func(seq int64, ev any) []byte {
		return mustMarshal(wire.Envelope{RunID: "r", EventID: fmt.Sprintf("r:%d", seq), Sequence: seq, ReceivedAt: "t",
			Event: mustMarshal(ev)})
	}
	var events [][]byte
	var want, sofar strings.Builder
	for i := range n - 1 {
		seq := int64(i + 1)
		switch {
		case i == 0:
			events = append(events, envelope(seq, wire.StatusEvent{Type: wire.EventStatus, Status: wire.CanonicalStarted}))
		case i%100 == 7:
			events = append(events, envelope(seq, wire.WarningEvent{Type: wire.EventWarning, Code: "w", Message: "m"}))
		default:
			d := fmt.Sprintf("w%d ", i)
			want.WriteString(d)
			sofar.WriteString(d)
			part := wire.Part{ID: fmt.Sprintf("r:text:%d", 1+i/200), SessionID: "s", MessageID: "r:message", Type: "text", Text: sofar.String()}
			if (i+1)%200 == 0 {
				sofar.Reset()
			}
			events = append(events, envelope(seq, wire.PartEvent{Type: wire.EventMessagePartUpdated, Part: part, Delta: &d}))
		}
	}
	events = append(events, envelope(n, wire.StatusEvent{Type: wire.EventStatus, Status: wire.CanonicalCompleted}))
	s := finishedRun(t, Options{}, "r", events)

	evs := allEvents(t, s, "r")
	var got strings.Builder
	types := map[string]int{}
	for i, e := range evs {
		var env wire.Envelope
		if err := json.Unmarshal(e.Data, &env); err != nil || env.Sequence != e.Seq {
			t.Fatalf("event %d: %s, %v, want an envelope of seq %d", i, e.Data, err, e.Seq)
		}
		var ev wire.PartEvent
		json.Unmarshal(env.Event, &ev)
		if e.Seq <= n-KeptResultEvents {
			types[ev.Type]++ // of the folded events
		}
		if ev.Delta != nil {
			got.WriteString(*ev.Delta)
		}
	}
	if got.String() != want.String() {
		t.Errorf("deltas read from the start = %q..., want the whole text", got.String()[:40])
	}
	if types[wire.EventWarning] != 0 || types[wire.EventStatus] != 1 || types[wire.EventMessagePartUpdated] != 4 ||
		len(evs) != KeptResultEvents+5 {
		t.Errorf("kept %d events, folded ones of types %v, want the last update of each of the 4 folded parts and the start status",
			len(evs), types)
	}
}

func TestStore_CompactHeadDropped(t *testing.T) {
	var events [][]byte
	for i := range 20 {
		events = append(events, mustMarshal(wire.Chunk{ID: "c", Object: wire.ChunkObject,
			Choices: []wire.ChunkChoice{{Delta: wire.Delta{Content: fmt.Sprint(i)}}}}))
	}
	s := finishedRun(t, Options{MaxEvents: 10}, "r", events)
	r, _ := s.GetRun(context.Background(), "r")
	if !r.ReplayExpired || r.ResultKept || len(allEvents(t, s, "r")) != 0 {
		t.Errorf("run = %+v, want its events dropped: retention had already cut its result", r)
	}
}
