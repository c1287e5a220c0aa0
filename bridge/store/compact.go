package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// KeptResultEvents is how many of a run's newest events survive, verbatim,
// the end of its full replay (Options.ReplayTTL). The events before them
// are folded into the few that say what they said (see compact), so that
// a run read from its start still gives its whole text, its usage and how
// it ended for as long as its identity is kept. Cursors 0 and from
// LastSeq-KeptResultEvents on stay exact; the ones in between are
// expired.
const KeptResultEvents = 1024

// replayResultKept is the replay_expired value of a run whose full replay
// ended with its result kept; 1 is a run whose events were all dropped.
const replayResultKept = 2

// compactTx ends the full replay of terminal run id: it keeps the newest
// KeptResultEvents events and folds the older ones (compact). It reports
// false, and changes nothing, when the run's result cannot be kept whole:
// retention already dropped its first events, or its events are of no
// format it knows.
func (s *Store) compactTx(ctx context.Context, tx *sql.Tx, id string) (bool, error) {
	var first, last int64
	if err := tx.QueryRowContext(ctx, `SELECT first_seq, last_seq FROM runs WHERE id = ?`, id).Scan(&first, &last); err != nil {
		return false, err
	}
	if first != 1 || last == 0 {
		return false, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT first_seq, data FROM segments WHERE run_id = ? ORDER BY last_seq`, id)
	if err != nil {
		return false, err
	}
	var events []Event
	for rows.Next() {
		var sf int64
		var data []byte
		if err := rows.Scan(&sf, &data); err != nil {
			rows.Close()
			return false, err
		}
		if err := decodeSegment(sf, data, func(seq int64, e []byte) bool {
			events = append(events, Event{Seq: seq, Data: append([]byte(nil), e...)})
			return true
		}); err != nil {
			rows.Close()
			return false, err
		}
	}
	if err := rows.Close(); err != nil {
		return false, err
	}
	if int64(len(events)) != last {
		return false, nil
	}
	kept := events
	if len(events) > KeptResultEvents {
		// Fold the events before the kept ones.
		cut := len(events) - KeptResultEvents
		folded, ok := compact(events[:cut])
		if !ok {
			return false, nil
		}
		kept = append(folded, events[cut:]...)
	}
	if len(kept) == 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM segments WHERE run_id = ?`, id); err != nil {
		return false, err
	}
	var size int64
	for i := 0; i < len(kept); {
		batch := make([][]byte, 0, segmentEvents)
		for _, e := range kept[i:] {
			if len(batch) > 0 && e.Seq != kept[i].Seq+int64(len(batch)) {
				break // a segment holds consecutive events
			}
			batch = append(batch, e.Data)
		}
		n, data := encodeSegment(batch)
		if _, err := tx.ExecContext(ctx, `INSERT INTO segments (run_id, first_seq, last_seq, data) VALUES (?, ?, ?, ?)`,
			id, kept[i].Seq, kept[i+n-1].Seq, data); err != nil {
			return false, err
		}
		for _, e := range batch[:n] {
			size += int64(len(e))
		}
		i += n
	}
	_, err = tx.ExecContext(ctx, `UPDATE runs SET replay_expired = ?, first_seq = ?, retained_events = ?, retained_bytes = ?
		WHERE id = ?`, replayResultKept, kept[0].Seq, len(kept), size, id)
	return err == nil, err
}

// compact folds the first events of a run (from its first event on) into
// the few that say what they said, at the last sequence numbers of
// theirs, in order: a one-shot run's chat chunks into one chunk (at the last
// sequence number) with their whole content, reasoning, tool calls, usage
// and served models; a retained run's canonical events into the last
// update of each of their parts, whose delta is made the part's whole
// text so far, and their usage and status events. ok is false for events
// it cannot fold (an error frame, an unknown format).
func compact(events []Event) (_ []Event, ok bool) {
	var probe struct {
		RunID    string          `json:"runId"`
		Sequence int64           `json:"sequence"`
		Event    json.RawMessage `json:"event"`
	}
	if json.Unmarshal(events[0].Data, &probe) == nil && probe.RunID != "" && probe.Sequence > 0 && len(probe.Event) > 0 {
		return compactCanonical(events)
	}
	return compactChunks(events)
}

// compactChunks folds chat chunks into one.
func compactChunks(events []Event) ([]Event, bool) {
	var out wire.Chunk
	var delta wire.Delta
	var finish *string
	for i, e := range events {
		var c struct {
			wire.Chunk
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(e.Data, &c) != nil || len(c.Error) > 0 || c.Object != wire.ChunkObject {
			return nil, false
		}
		if i == 0 {
			out.ID, out.Object, out.Created, out.Model = c.ID, c.Object, c.Created, c.Model
		}
		for _, ch := range c.Choices {
			if ch.Delta.Role != "" {
				delta.Role = ch.Delta.Role
			}
			delta.Content += ch.Delta.Content
			delta.Reasoning += ch.Delta.Reasoning
			delta.ToolCalls = wire.MergeToolCalls(delta.ToolCalls, ch.Delta.ToolCalls)
			delta.ToolResults = append(delta.ToolResults, ch.Delta.ToolResults...)
			if ch.FinishReason != nil {
				finish = ch.FinishReason
			}
		}
		if c.Usage != nil {
			out.Usage = c.Usage
		}
		for _, m := range c.ProviderModels {
			if !contains(out.ProviderModels, m) {
				out.ProviderModels = append(out.ProviderModels, m)
			}
		}
	}
	out.Choices = []wire.ChunkChoice{{Index: 0, Delta: delta, FinishReason: finish}}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, false
	}
	return []Event{{Seq: events[len(events)-1].Seq, Data: data}}, true
}

// compactCanonical keeps, of canonical events, the last update of each
// part (a text or reasoning part's delta made its whole text so far),
// usage and status events; the rest (warnings, interactions answered
// long ago) goes.
func compactCanonical(events []Event) ([]Event, bool) {
	type entry struct {
		env wire.Envelope
		ev  map[string]json.RawMessage
	}
	last := map[string]int{} // part id -> index in events of its last update
	var entries []entry
	for i, e := range events {
		var en entry
		if json.Unmarshal(e.Data, &en.env) != nil || json.Unmarshal(en.env.Event, &en.ev) != nil {
			return nil, false
		}
		entries = append(entries, en)
		var p struct {
			ID string `json:"id"`
		}
		if typeOf(en.ev) == wire.EventMessagePartUpdated && json.Unmarshal(en.ev["part"], &p) == nil && p.ID != "" {
			last[p.ID] = i
		}
	}
	var out []Event
	for i, en := range entries {
		switch typeOf(en.ev) {
		case wire.EventMessagePartUpdated:
			var p wire.Part
			if json.Unmarshal(en.ev["part"], &p) != nil || last[p.ID] != i {
				continue
			}
			if p.Type == "text" || p.Type == "reasoning" {
				en.ev["delta"] = mustMarshal(p.Text)
			}
		case wire.EventStatus, wire.EventRaw:
		default:
			continue
		}
		en.env.Event = mustMarshal(en.ev)
		out = append(out, Event{Data: mustMarshal(en.env)})
	}
	// The kept events take the last sequence numbers of the folded ones,
	// so that the run's events stay consecutive.
	base := events[len(events)-1].Seq - int64(len(out))
	for i := range out {
		var env wire.Envelope
		json.Unmarshal(out[i].Data, &env)
		seq := base + int64(i) + 1
		env.Sequence, env.EventID, env.Cursor = seq, env.RunID+":"+strconv.FormatInt(seq, 10), strconv.FormatInt(seq, 10)
		out[i] = Event{Seq: seq, Data: mustMarshal(env)}
	}
	return out, true
}

func typeOf(ev map[string]json.RawMessage) string {
	var t string
	json.Unmarshal(ev["type"], &t)
	return t
}

func contains(list []string, v string) bool {
	for _, e := range list {
		if e == v {
			return true
		}
	}
	return false
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("store: encode: " + err.Error()) // only decoded JSON is encoded
	}
	return b
}
