package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrConflict is returned when an id is already bound to something else:
// a retained session created by a different request, or a turn id bound
// to a different turn.
var ErrConflict = errors.New("id is bound to a different request")

// ErrSessionClosed is returned when admitting a turn to a closed session.
var ErrSessionClosed = errors.New("session is closed")

// retainedSchema holds retained native sessions, their turns, the
// interactions their runs raised and the stored answers to interaction
// operations.
const retainedSchema = `
CREATE TABLE IF NOT EXISTS retained_sessions (
	id TEXT PRIMARY KEY,
	harness TEXT NOT NULL,
	model TEXT NOT NULL,
	digest TEXT NOT NULL,
	request BLOB NOT NULL,
	policy TEXT NOT NULL,
	closed_at INTEGER NOT NULL DEFAULT 0,
	boundary BLOB NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS retained_turns (
	session_id TEXT NOT NULL,
	turn_id TEXT NOT NULL,
	digest TEXT NOT NULL,
	run_id TEXT NOT NULL UNIQUE,
	idx INTEGER NOT NULL,
	offset_seq INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (session_id, turn_id)
);
CREATE INDEX IF NOT EXISTS retained_turns_idx ON retained_turns(session_id, idx);
`

// RetainedSession is a stored retained native session.
type RetainedSession struct {
	ID, Harness, Model string
	// Digest is the digest of the create request; Request its body.
	Digest  string
	Request []byte
	// Policy is the session's interaction policy.
	Policy   string
	ClosedAt time.Time
	// Boundary is the JSON of the context boundary proof after the last
	// admitted turn; nil before the first.
	Boundary  []byte
	CreatedAt time.Time
}

// Turn is one admitted turn of a retained session.
type Turn struct {
	SessionID, TurnID string
	// Digest is the digest of the turn request; RunID the run it started.
	Digest, RunID string
	// Index numbers the session's turns from 0.
	Index int64
	// Offset is the session-wide sequence number just before the run's
	// first event: the run's event n is the session's event Offset+n.
	Offset    int64
	CreatedAt time.Time
}

const sessionColumns = `id, harness, model, digest, request, policy, closed_at, boundary, created_at`

func scanSession(sc scanner) (RetainedSession, error) {
	var s RetainedSession
	var closed, created int64
	if err := sc.Scan(&s.ID, &s.Harness, &s.Model, &s.Digest, &s.Request, &s.Policy, &closed, &s.Boundary, &created); err != nil {
		return RetainedSession{}, err
	}
	if len(s.Boundary) == 0 {
		s.Boundary = nil
	}
	s.ClosedAt, s.CreatedAt = fromMS(closed), fromMS(created)
	return s, nil
}

const turnColumns = `session_id, turn_id, digest, run_id, idx, offset_seq, created_at`

func scanTurn(sc scanner) (Turn, error) {
	var t Turn
	var created int64
	if err := sc.Scan(&t.SessionID, &t.TurnID, &t.Digest, &t.RunID, &t.Index, &t.Offset, &created); err != nil {
		return Turn{}, err
	}
	t.CreatedAt = fromMS(created)
	return t, nil
}

// CreateSession stores a new retained session. An existing session with
// the same id is returned with created false when its digest is the same,
// and with ErrConflict when it differs.
func (s *Store) CreateSession(ctx context.Context, rs RetainedSession) (_ RetainedSession, created bool, err error) {
	if rs.CreatedAt.IsZero() {
		rs.CreatedAt = s.opts.Now()
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		got, err := scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM retained_sessions WHERE id = ?`, rs.ID))
		if err == nil {
			conflict := got.Digest != rs.Digest
			rs = got
			if conflict {
				return ErrConflict
			}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		created = true
		_, err = tx.ExecContext(ctx, `INSERT INTO retained_sessions (id, harness, model, digest, request, policy, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, rs.ID, rs.Harness, rs.Model, rs.Digest, rs.Request, rs.Policy, ms(rs.CreatedAt))
		return err
	})
	if err != nil {
		return rs, false, fmt.Errorf("create session %s: %w", rs.ID, err)
	}
	return rs, created, nil
}

// GetSession returns a retained session, or ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (RetainedSession, error) {
	rs, err := scanSession(s.r.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM retained_sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return RetainedSession{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return RetainedSession{}, fmt.Errorf("get session %s: %w", id, err)
	}
	return rs, nil
}

// ListSessions returns every retained session, oldest first.
func (s *Store) ListSessions(ctx context.Context) ([]RetainedSession, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+sessionColumns+` FROM retained_sessions ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []RetainedSession
	for rows.Next() {
		rs, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, rs)
	}
	return out, rows.Err()
}

// CloseSession marks a session closed (the first close wins).
func (s *Store) CloseSession(ctx context.Context, id string) error {
	return s.update(ctx, "close session", id,
		`UPDATE retained_sessions SET closed_at = ? WHERE id = ? AND closed_at = 0`, ms(s.opts.Now()), id)
}

// AdmitTurn stores a turn and creates its run in one transaction, and
// sets the session's context boundary. A turn id already bound to the same
// digest returns the stored turn and run with created false; bound to a
// different digest it is ErrConflict. A session that does not exist is
// ErrNotFound, a closed one ErrSessionClosed. The caller guarantees that the
// session's previous run is terminal, so its event count is final.
func (s *Store) AdmitTurn(ctx context.Context, t Turn, r Run, boundary func(Turn) []byte) (_ Turn, _ Run, created bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		t, r, created, err = s.admitTurnTx(ctx, tx, t, r, boundary)
		return err
	})
	if err != nil {
		return t, r, false, fmt.Errorf("admit turn %s of session %s: %w", t.TurnID, t.SessionID, err)
	}
	return t, r, created, nil
}

// admitTurnTx is AdmitTurn inside the caller's transaction.
func (s *Store) admitTurnTx(ctx context.Context, tx *sql.Tx, t Turn, r Run, boundary func(Turn) []byte) (_ Turn, _ Run, created bool, err error) {
	if r.StartedAt.IsZero() {
		r.StartedAt = s.opts.Now()
	}
	t.RunID = r.ID
	r.Status, r.LastSeq, r.FirstSeq = StatusRunning, 0, 1
	err = func() error {
		got, err := scanTurn(tx.QueryRowContext(ctx, `SELECT `+turnColumns+` FROM retained_turns
			WHERE session_id = ? AND turn_id = ?`, t.SessionID, t.TurnID))
		if err == nil {
			conflict := got.Digest != t.Digest
			t = got
			if conflict {
				return ErrConflict
			}
			r, err = scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, got.RunID))
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// The session may have closed, or been pruned, since the caller
		// looked at it.
		var closed int64
		err = tx.QueryRowContext(ctx, `SELECT closed_at FROM retained_sessions WHERE id = ?`, t.SessionID).Scan(&closed)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ErrNotFound
		case err != nil:
			return err
		case closed != 0:
			return ErrSessionClosed
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE id = ?`, r.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("run id %s: %w", r.ID, ErrConflict)
		}
		// The session-wide offset follows the previous turn's run.
		t.Index, t.Offset = 0, 0
		var prevIdx, prevOffset, prevLast int64
		err = tx.QueryRowContext(ctx, `SELECT t.idx, t.offset_seq, r.last_seq FROM retained_turns t JOIN runs r ON r.id = t.run_id
			WHERE t.session_id = ? ORDER BY t.idx DESC LIMIT 1`, t.SessionID).Scan(&prevIdx, &prevOffset, &prevLast)
		switch {
		case err == nil:
			t.Index, t.Offset = prevIdx+1, prevOffset+prevLast
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if t.CreatedAt.IsZero() {
			t.CreatedAt = s.opts.Now()
		}
		created = true
		if _, err := tx.ExecContext(ctx, `INSERT INTO retained_turns (`+turnColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			t.SessionID, t.TurnID, t.Digest, t.RunID, t.Index, t.Offset, ms(t.CreatedAt)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs (id, digest, harness, model, provider, environment_id,
			session_id, execution_id, status, started_at, lifetime_expires_at, marker)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Digest, r.Harness, r.Model, r.Provider, r.EnvironmentID, r.SessionID, r.ExecutionID,
			r.Status, ms(r.StartedAt), ms(r.LifetimeExpiresAt), r.Marker); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, `UPDATE retained_sessions SET boundary = ? WHERE id = ?`, boundary(t), t.SessionID); err != nil {
			return err
		}
		return s.noteAdmission(ctx, tx, t)
	}()
	return t, r, created, err
}

// Turns returns a session's turns in admission order, from index from on.
func (s *Store) Turns(ctx context.Context, sessionID string, from int64) ([]Turn, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+turnColumns+` FROM retained_turns WHERE session_id = ? AND idx >= ?
		ORDER BY idx`, sessionID, from)
	if err != nil {
		return nil, fmt.Errorf("turns of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, fmt.Errorf("turns of session %s: %w", sessionID, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TurnOfRun returns the retained turn that started run id, or ErrNotFound
// for a run that is not a retained turn.
func (s *Store) TurnOfRun(ctx context.Context, runID string) (Turn, error) {
	t, err := scanTurn(s.r.QueryRowContext(ctx, `SELECT `+turnColumns+` FROM retained_turns WHERE run_id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Turn{}, fmt.Errorf("turn of run %s: %w", runID, ErrNotFound)
	}
	if err != nil {
		return Turn{}, fmt.Errorf("turn of run %s: %w", runID, err)
	}
	return t, nil
}

// GetTurn returns a session's turn, or ErrNotFound.
func (s *Store) GetTurn(ctx context.Context, sessionID, turnID string) (Turn, error) {
	t, err := scanTurn(s.r.QueryRowContext(ctx, `SELECT `+turnColumns+` FROM retained_turns WHERE session_id = ? AND turn_id = ?`,
		sessionID, turnID))
	if errors.Is(err, sql.ErrNoRows) {
		return Turn{}, fmt.Errorf("turn %s of session %s: %w", turnID, sessionID, ErrNotFound)
	}
	if err != nil {
		return Turn{}, fmt.Errorf("get turn %s of session %s: %w", turnID, sessionID, err)
	}
	return t, nil
}
