package provider

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestDecodeStored: a run's stored events decode as its live stream
// would: a plain turn's chunks into text parts (their text adding up from
// the first event, yielded after `after` only) and its result; a retained
// run's envelopes into their events and terminal status; a run whose
// events stop short is not ended; data of neither format is a protocol
// error.
func TestDecodeStored(t *testing.T) {
	ref := ControlRef{RunID: "run_1", SessionID: "ses_1", ExecutionID: "run_1"}
	chunk := func(content, finish string) json.RawMessage {
		fr := "null"
		if finish != "" {
			fr = `"` + finish + `"`
		}
		return json.RawMessage(fmt.Sprintf(`{"choices":[{"delta":{"content":%q},"finish_reason":%s}]}`, content, fr))
	}
	legacy := []StoredEvent{{1, chunk("Hel", "")}, {2, chunk("lo", "")}, {3, chunk("", "stop")}}
	var got []Event
	ended, err := DecodeStored(ref, "", 1, legacy, func(ev Event) bool { got = append(got, ev); return true })
	if err != nil || !ended {
		t.Fatalf("legacy: ended %v, %v", ended, err)
	}
	if len(got) != 2 || got[0].Part == nil || got[0].Part.Text != "Hello" || got[0].Delta != "lo" || got[0].ID != "2:0" ||
		got[1].Type != EventResult || got[1].FinalText != "Hello" || got[1].Status != StatusCompleted {
		t.Errorf("legacy events after 1 = %+v", got)
	}
	if ended, err := DecodeStored(ref, "", 0, legacy[:2], func(Event) bool { return true }); ended || err != nil {
		t.Errorf("a plain turn cut short: ended %v, %v", ended, err)
	}

	env := func(seq int64, ev string) StoredEvent {
		return StoredEvent{seq, json.RawMessage(fmt.Sprintf(`{"runId":"run_1","eventId":"ev_%d","sequence":%d,"receivedAt":"2026-12-07T00:00:00Z","event":%s}`, seq, seq, ev))}
	}
	canonical := []StoredEvent{
		env(1, `{"type":"status","status":"running"}`),
		env(2, `{"type":"status","status":"completed"}`),
	}
	got = nil
	ended, err = DecodeStored(ref, "", 0, canonical, func(ev Event) bool { got = append(got, ev); return true })
	if err != nil || !ended || len(got) != 2 || got[1].Status != StatusCompleted || got[1].RunID != "run_1" {
		t.Errorf("canonical: %+v, ended %v, %v", got, ended, err)
	}
	if _, err := DecodeStored(ref, "", 0, []StoredEvent{{1, json.RawMessage(`not json`)}}, func(Event) bool { return true }); err == nil ||
		!strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("garbage: %v, want a protocol error", err)
	}
}
