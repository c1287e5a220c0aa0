package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// activitySchema keeps what a retained session did, beyond its turns'
// rows (which expire with their runs): how many turns completed, when it
// was last used, and its latest run.
const activitySchema = `
CREATE TABLE IF NOT EXISTS session_activity (
	session_id TEXT PRIMARY KEY,
	completed_turns INTEGER NOT NULL DEFAULT 0,
	last_run_id TEXT NOT NULL DEFAULT '',
	updated_at INTEGER NOT NULL
);
`

// Activity is what a retained session did: CompletedTurns counts its turns
// whose run ended done, LastRunID is the run of its latest admitted turn
// ("" before the first) and UpdatedAt is the last admission or run end
// (zero before the first turn).
type Activity struct {
	CompletedTurns int64
	LastRunID      string
	UpdatedAt      time.Time
}

// SessionActivity returns a session's activity; a session with no turn
// yet has the zero Activity.
func (s *Store) SessionActivity(ctx context.Context, id string) (Activity, error) {
	var a Activity
	var updated int64
	err := s.r.QueryRowContext(ctx, `SELECT completed_turns, last_run_id, updated_at FROM session_activity WHERE session_id = ?`,
		id).Scan(&a.CompletedTurns, &a.LastRunID, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return Activity{}, nil
	}
	if err != nil {
		return Activity{}, fmt.Errorf("activity of session %s: %w", id, err)
	}
	a.UpdatedAt = fromMS(updated)
	return a, nil
}

// noteAdmission records a turn's run as its session's latest.
func (s *Store) noteAdmission(ctx context.Context, tx *sql.Tx, t Turn) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO session_activity (session_id, last_run_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET last_run_id = excluded.last_run_id, updated_at = excluded.updated_at`,
		t.SessionID, t.RunID, ms(s.opts.Now()))
	return err
}

// noteFinish records the end of run id in its session's activity, if it
// is a retained turn: one more completed turn when it ended done.
func (s *Store) noteFinish(ctx context.Context, tx *sql.Tx, id, status string) error {
	done := 0
	if status == StatusDone {
		done = 1
	}
	_, err := tx.ExecContext(ctx, `UPDATE session_activity SET completed_turns = completed_turns + ?, updated_at = ?
		WHERE session_id = (SELECT session_id FROM retained_turns WHERE run_id = ?)`, done, ms(s.opts.Now()), id)
	return err
}
