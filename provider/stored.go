package provider

import (
	"encoding/json"
	"errors"
	"strconv"
)

// StoredEvent is an event of a run as a bridge stores it: its sequence
// number and its data (a canonical envelope, or an OpenAI chunk of a
// plain turn). A replica outside the box holds them.
type StoredEvent struct {
	Seq  int64
	Data json.RawMessage
}

// DecodeStored yields the events a stream of the run ref (of turn turnID,
// "" for its execution id) gives for its stored events, all of them from
// the first, in order: those after sequence number after only, with the
// checks a live stream has. When the stored events end the run it yields
// the run's end too (its terminal status, or the result of a completed
// plain turn) and reports ended. A stored event neither format reads is a
// *ProtocolError.
func DecodeStored(ref ControlRef, turnID string, after int64, stored []StoredEvent, yield func(Event) bool) (ended bool, err error) {
	if turnID == "" {
		turnID = ref.ExecutionID
	}
	var cur int64
	d := &decoder{ref: ref, r: &run{ref: ref, turnID: turnID}, spec: streamSpec{op: "replica"}}
	d.yield = func(ev Event) bool {
		if cur <= after {
			return true // a reader had it: decoded for the text it adds up to
		}
		return yield(ev)
	}
	for _, s := range stored {
		cur = s.Seq
		f := frame{ID: strconv.FormatInt(s.Seq, 10), HasID: true, Data: string(s.Data)}
		var env struct {
			Event struct {
				Type string `json:"type"`
			} `json:"event"`
		}
		if json.Unmarshal(s.Data, &env) == nil && env.Event.Type != "" {
			f.Event, f.HasEvent = env.Event.Type, true
		}
		err := d.frame(f)
		if errors.Is(err, errStopped) {
			return false, nil
		}
		if _, failed := errors.AsType[*BridgeError](err); failed && d.format == "legacy" {
			return true, nil // the run failed: its status event was yielded
		}
		if err != nil {
			return false, err
		}
	}
	switch {
	case d.format == "canonical" && d.terminal != nil:
		yield(*d.terminal)
		return true, nil
	case d.format == "legacy" && d.cancelledSeen:
		return true, nil
	case d.format == "legacy" && d.completed:
		for _, p := range d.held {
			if err := d.emit(p.frameID, p.events); err != nil {
				return false, nil
			}
		}
		res := Event{Type: EventResult, FinalText: d.text, FinishReason: d.finishReason, ModelRequests: d.requests,
			ProviderModels: d.models, Status: StatusCompleted, RunID: ref.RunID, SessionID: ref.SessionID, ExecutionID: ref.ExecutionID}
		yield(res)
		return true, nil
	}
	return false, nil
}
