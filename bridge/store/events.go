package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Event is one stored event of a run.
type Event struct {
	Seq  int64
	Data []byte
}

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
	return last, nil
}

func (s *Store) appendTx(ctx context.Context, tx *sql.Tx, id string, events [][]byte) (int64, error) {
	var status string
	var last, first, count, size int64
	err := tx.QueryRowContext(ctx, `SELECT status, last_seq, first_seq, retained_events, retained_bytes
		FROM runs WHERE id = ?`, id).Scan(&status, &last, &first, &count, &size)
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
	if last, err = s.insertEvents(ctx, tx, id, last, events); err != nil {
		return 0, err
	}
	for _, data := range events {
		count++
		size += int64(len(data))
	}
	// Retention: drop the oldest events until both limits hold, always
	// keeping the newest one.
	if count > s.opts.MaxEvents || size > s.opts.MaxBytes {
		cut := first - 1 // drop seq <= cut
		if count > s.opts.MaxEvents {
			cut = last - s.opts.MaxEvents
		}
		var dropped, droppedBytes int64
		if cut >= first {
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(size), 0) FROM events
				WHERE run_id = ? AND seq <= ?`, id, cut).Scan(&dropped, &droppedBytes); err != nil {
				return 0, err
			}
		}
		if size-droppedBytes > s.opts.MaxBytes {
			rows, err := tx.QueryContext(ctx, `SELECT seq, size FROM events WHERE run_id = ? AND seq > ? AND seq < ?
				ORDER BY seq`, id, max(cut, first-1), last)
			if err != nil {
				return 0, err
			}
			for rows.Next() && size-droppedBytes > s.opts.MaxBytes {
				var seq, sz int64
				if err := rows.Scan(&seq, &sz); err != nil {
					rows.Close()
					return 0, err
				}
				cut, dropped, droppedBytes = seq, dropped+1, droppedBytes+sz
			}
			if err := rows.Close(); err != nil {
				return 0, err
			}
		}
		if cut >= first {
			if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE run_id = ? AND seq <= ?`, id, cut); err != nil {
				return 0, err
			}
			first, count, size = cut+1, count-dropped, size-droppedBytes
		}
	}
	_, err = tx.ExecContext(ctx, `UPDATE runs SET last_seq = ?, first_seq = ?, retained_events = ?, retained_bytes = ?
		WHERE id = ?`, last, first, count, size, id)
	return last, err
}

// insertRows is the most events inserted by one statement: one statement
// of many rows costs far less than as many one-row statements.
const insertRows = 64

// insertEvents inserts events numbered after last and returns the new last
// sequence number.
func (s *Store) insertEvents(ctx context.Context, tx *sql.Tx, id string, last int64, events [][]byte) (int64, error) {
	var full *sql.Stmt // s.insertFull bound to tx, on first use
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	args := make([]any, 0, 4*insertRows)
	for len(events) > 0 {
		n := min(len(events), insertRows)
		args = args[:0]
		for _, data := range events[:n] {
			last++
			args = append(args, id, last, len(data), data)
		}
		events = events[n:]
		if n == insertRows {
			if full == nil {
				full = tx.StmtContext(ctx, s.insertFull)
			}
			if _, err := full.ExecContext(ctx, args...); err != nil {
				return 0, err
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, insertSQL(n), args...); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// insertSQL is an INSERT of n event rows.
func insertSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO events (run_id, seq, size, data) VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?)")
	}
	return b.String()
}

// Events returns up to limit events of a run with a sequence number
// greater than after, in order.
func (s *Store) Events(ctx context.Context, id string, after int64, limit int) ([]Event, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT seq, data FROM events WHERE run_id = ? AND seq > ?
		ORDER BY seq LIMIT ?`, id, after, limit)
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", id, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.Seq, &e.Data); err != nil {
			return nil, fmt.Errorf("events of run %s: %w", id, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of run %s: %w", id, err)
	}
	return out, nil
}

// Prune applies the time-based retention: events of runs that ended more
// than ReplayTTL ago are dropped (the run stays, marked replay-expired),
// and runs, cancellations and sessions past IdentityTTL are forgotten.
func (s *Store) Prune(ctx context.Context) error {
	now := ms(s.opts.Now())
	identityCutoff := ms(s.opts.Now().Add(-s.opts.IdentityTTL))
	err := s.tx(ctx, func(tx *sql.Tx) error {
		stmts := []struct {
			q    string
			args []any
		}{
			{`DELETE FROM events WHERE run_id IN (SELECT id FROM runs WHERE status != 'running'
				AND replay_expires_at > 0 AND replay_expires_at <= ?)`, []any{now}},
			{`UPDATE runs SET replay_expired = 1, first_seq = last_seq + 1, retained_events = 0, retained_bytes = 0
				WHERE status != 'running' AND replay_expires_at > 0 AND replay_expires_at <= ? AND replay_expired = 0`, []any{now}},
			{`DELETE FROM runs WHERE status != 'running' AND identity_expires_at > 0 AND identity_expires_at <= ?`, []any{now}},
			{`DELETE FROM cancellations WHERE created_at <= ?`, []any{identityCutoff}},
			{`DELETE FROM sessions WHERE updated_at <= ?`, []any{identityCutoff}},
		}
		for _, st := range stmts {
			if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("prune store: %w", err)
	}
	return nil
}
