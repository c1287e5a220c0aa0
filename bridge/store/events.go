package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Event is one stored event of a run.
type Event struct {
	Seq  int64
	Data []byte
}

// Events are stored in segments: one row holds up to segmentEvents
// consecutive events of a run, each as a uvarint length and its bytes. A
// row per event made SQLite's per-row cost (B-tree insert on write, step
// and copy on read) most of the bridge's work on a busy turn; a segment
// pays it once per batch. A segment never holds an event retention
// dropped: trimming the oldest segment rewrites it.
const (
	segmentEvents = 256
	segmentBytes  = 256 << 10
)

// The statements of Append and Events (Store.prepare).
const (
	appendRunSQL = `SELECT status, last_seq, first_seq, retained_events, retained_bytes
		FROM runs WHERE id = ?`
	appendSegmentSQL = `INSERT INTO segments (run_id, first_seq, last_seq, data) VALUES (?, ?, ?, ?)`
	appendUpdateSQL  = `UPDATE runs SET last_seq = ?, first_seq = ?, retained_events = ?, retained_bytes = ?
		WHERE id = ?`
	readEventsSQL = `SELECT first_seq, data FROM segments WHERE run_id = ? AND last_seq > ?
		ORDER BY last_seq`
)

// Append commits events to a running run, numbering them after its last
// event, and applies the per-run retention limits. It returns the last
// sequence number. Appending no events is a no-op.
func (s *Store) Append(ctx context.Context, id string, events [][]byte) (int64, error) {
	var last int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		last, err = s.appendTx(ctx, tx, id, events)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("append to run %s: %w", id, err)
	}
	s.stats.events.Add(int64(len(events)))
	s.changed(id)
	return last, nil
}

// changed tells Options.OnChange of a committed change of run id.
func (s *Store) changed(id string) {
	if s.opts.OnChange != nil {
		s.opts.OnChange(id)
	}
}

func (s *Store) appendTx(ctx context.Context, tx *sql.Tx, id string, events [][]byte) (int64, error) {
	var status string
	var last, first, count, size int64
	err := tx.StmtContext(ctx, s.appendRun).QueryRowContext(ctx, id).Scan(&status, &last, &first, &count, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	if status != StatusRunning {
		return 0, ErrTerminal
	}
	if len(events) == 0 {
		return last, nil
	}
	for len(events) > 0 {
		n, data := encodeSegment(events)
		if _, err := tx.StmtContext(ctx, s.appendSegment).ExecContext(ctx, id, last+1, last+int64(n), data); err != nil {
			return 0, err
		}
		for _, e := range events[:n] {
			size += int64(len(e))
		}
		count += int64(n)
		last += int64(n)
		events = events[n:]
	}
	if count > s.opts.MaxEvents || size > s.opts.MaxBytes {
		if first, count, size, err = s.trim(ctx, tx, id, first, last, count, size); err != nil {
			return 0, err
		}
	}
	_, err = tx.StmtContext(ctx, s.appendUpdate).ExecContext(ctx, last, first, count, size, id)
	return last, err
}

// encodeSegment encodes the first n events that fit in one segment (at
// least one).
func encodeSegment(events [][]byte) (n int, data []byte) {
	total := 0
	for n < len(events) && n < segmentEvents && (n == 0 || total+len(events[n]) <= segmentBytes) {
		total += len(events[n]) + binary.MaxVarintLen32
		n++
	}
	data = make([]byte, 0, total)
	for _, e := range events[:n] {
		data = binary.AppendUvarint(data, uint64(len(e)))
		data = append(data, e...)
	}
	return n, data
}

// decodeSegment calls fn with each event of a segment whose first event is
// first, until fn returns false.
func decodeSegment(first int64, data []byte, fn func(seq int64, e []byte) bool) error {
	for seq := first; len(data) > 0; seq++ {
		l, k := binary.Uvarint(data)
		if k <= 0 || l > uint64(len(data)-k) {
			return fmt.Errorf("corrupt event segment at event %d", seq)
		}
		e := data[k : k+int(l) : k+int(l)]
		data = data[k+int(l):]
		if !fn(seq, e) {
			return nil
		}
	}
	return nil
}

// trim drops a run's oldest events until both retention limits hold,
// always keeping the newest one, and returns the new first sequence
// number, count and size.
func (s *Store) trim(ctx context.Context, tx *sql.Tx, id string, first, last, count, size int64) (int64, int64, int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT first_seq, last_seq, data FROM segments WHERE run_id = ? ORDER BY last_seq`, id)
	if err != nil {
		return 0, 0, 0, err
	}
	cut := first - 1 // drop seq <= cut
	var partFirst, partLast int64
	var part []byte // the segment holding cut, when cut is not its last event
	for rows.Next() {
		var sf, sl int64
		var data []byte
		if err := rows.Scan(&sf, &sl, &data); err != nil {
			rows.Close()
			return 0, 0, 0, err
		}
		stopped := false
		err := decodeSegment(sf, data, func(seq int64, e []byte) bool {
			if seq == last || (count <= s.opts.MaxEvents && size <= s.opts.MaxBytes) {
				stopped = true
				return false
			}
			cut, count, size = seq, count-1, size-int64(len(e))
			return true
		})
		if err != nil {
			rows.Close()
			return 0, 0, 0, err
		}
		if stopped {
			if cut >= sf { // cut is inside this segment, before its last event
				partFirst, partLast, part = sf, sl, data
			}
			break
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, 0, 0, err
	}
	if cut < first {
		return first, count, size, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM segments WHERE run_id = ? AND last_seq <= ?`, id, cut); err != nil {
		return 0, 0, 0, err
	}
	if part != nil {
		var keep [][]byte
		decodeSegment(partFirst, part, func(seq int64, e []byte) bool {
			if seq > cut {
				keep = append(keep, e)
			}
			return true
		})
		_, data := encodeSegment(keep) // keep fits: it is a part of one segment
		if _, err := tx.ExecContext(ctx, `UPDATE segments SET first_seq = ?, data = ? WHERE run_id = ? AND last_seq = ?`,
			cut+1, data, id, partLast); err != nil {
			return 0, 0, 0, err
		}
	}
	return cut + 1, count, size, nil
}

// Events returns up to limit events of a run with a sequence number
// greater than after, in order.
func (s *Store) Events(ctx context.Context, id string, after int64, limit int) ([]Event, error) {
	defer s.stats.read.since(time.Now())
	rows, err := s.readEvents.QueryContext(ctx, id, after)
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", id, err)
	}
	defer rows.Close()
	var out []Event
	for len(out) < limit && rows.Next() {
		var first int64
		var data []byte
		if err := rows.Scan(&first, &data); err != nil {
			return nil, fmt.Errorf("events of run %s: %w", id, err)
		}
		err := decodeSegment(first, data, func(seq int64, e []byte) bool {
			if seq > after {
				out = append(out, Event{Seq: seq, Data: e})
			}
			return len(out) < limit
		})
		if err != nil {
			return nil, fmt.Errorf("events of run %s: %w", id, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of run %s: %w", id, err)
	}
	return out, nil
}

// EachEvent calls fn with each event of a run after after, in order,
// until fn returns false or the event data given it reached maxBytes (at
// least one event). The data is valid only during the call: the events are
// read from the database's buffers, not copied.
func (s *Store) EachEvent(ctx context.Context, id string, after int64, maxBytes int, fn func(seq int64, data []byte) bool) error {
	defer s.stats.read.since(time.Now())
	rows, err := s.readEvents.QueryContext(ctx, id, after)
	if err != nil {
		return fmt.Errorf("events of run %s: %w", id, err)
	}
	defer rows.Close()
	total, more := 0, true
	for more && rows.Next() {
		var first int64
		var data sql.RawBytes
		if err := rows.Scan(&first, &data); err != nil {
			return fmt.Errorf("events of run %s: %w", id, err)
		}
		err := decodeSegment(first, data, func(seq int64, e []byte) bool {
			if seq <= after {
				return true
			}
			total += len(e)
			more = fn(seq, e) && total < maxBytes
			return more
		})
		if err != nil {
			return fmt.Errorf("events of run %s: %w", id, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("events of run %s: %w", id, err)
	}
	return nil
}
