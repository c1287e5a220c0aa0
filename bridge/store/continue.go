package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// continueSchema holds native continuation requests by operation id: the
// run each admitted one started and, once known, the outcome it answered.
const continueSchema = `
CREATE TABLE IF NOT EXISTS continuations (
	operation_id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL,
	request_digest TEXT NOT NULL,
	run_id TEXT NOT NULL DEFAULT '',
	http_status INTEGER NOT NULL DEFAULT 0,
	body BLOB NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS continuations_run ON continuations(run_id);
CREATE INDEX IF NOT EXISTS continuations_session ON continuations(session_id);
`

// ErrContinuationExists is returned by AdmitContinuation when the
// operation id is already recorded; the recorded continuation comes with
// it.
var ErrContinuationExists = errors.New("continuation operation already recorded")

// ErrContinuationRejected is returned by AdmitContinuation when the check
// rejected the request.
var ErrContinuationRejected = errors.New("continuation rejected")

// Continuation is a recorded native continuation request.
type Continuation struct {
	OperationID, SessionID, RequestDigest string
	// RunID is the run the admitted request started ("" for a rejected
	// one).
	RunID string
	// HTTPStatus and Body are the stored outcome; Body is nil while the
	// outcome of an admitted request is not yet known.
	HTTPStatus int
	Body       []byte
	CreatedAt  time.Time
}

// Rejection is a check's verdict against a continuation. A Final
// rejection is recorded as the operation's outcome, so that the operation
// repeated gets it again; any other is not recorded.
type Rejection struct {
	HTTPStatus int
	Body       []byte
	Final      bool
}

const continuationColumns = `operation_id, session_id, request_digest, run_id, http_status, body, created_at`

func scanContinuation(sc scanner) (Continuation, error) {
	var c Continuation
	var created int64
	if err := sc.Scan(&c.OperationID, &c.SessionID, &c.RequestDigest, &c.RunID, &c.HTTPStatus, &c.Body, &created); err != nil {
		return Continuation{}, err
	}
	if len(c.Body) == 0 {
		c.Body = nil
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// GetContinuation returns the continuation recorded under an operation
// id, or ErrNotFound.
func (s *Store) GetContinuation(ctx context.Context, operationID string) (Continuation, error) {
	c, err := scanContinuation(s.r.QueryRowContext(ctx, `SELECT `+continuationColumns+` FROM continuations
		WHERE operation_id = ?`, operationID))
	if errors.Is(err, sql.ErrNoRows) {
		return Continuation{}, fmt.Errorf("continuation %s: %w", operationID, ErrNotFound)
	}
	if err != nil {
		return Continuation{}, fmt.Errorf("get continuation %s: %w", operationID, err)
	}
	return c, nil
}

// AdmitContinuation decides and records a native continuation in one
// transaction: the session of t is read, check decides on it, and the
// turn and its run are admitted (as AdmitTurn does) together with the
// record of c. Nothing can change the session between the check and the
// admission. It returns:
//   - ErrContinuationExists with the recorded continuation when c's
//     operation id is already recorded (whatever its digest);
//   - ErrNotFound when the session does not exist;
//   - ErrContinuationRejected with the rejection's outcome when check
//     rejected it (recorded when Final);
//   - ErrConflict when the turn id or run id is bound to something else.
func (s *Store) AdmitContinuation(ctx context.Context, c Continuation, check func(RetainedSession) *Rejection,
	t Turn, r Run, boundary func(Turn) []byte) (Continuation, Turn, Run, error) {
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.opts.Now()
	}
	rejected := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		got, err := scanContinuation(tx.QueryRowContext(ctx, `SELECT `+continuationColumns+` FROM continuations
			WHERE operation_id = ?`, c.OperationID))
		if err == nil {
			c = got
			return ErrContinuationExists
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		rs, err := scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM retained_sessions WHERE id = ?`, c.SessionID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if rej := check(rs); rej != nil {
			c.HTTPStatus, c.Body = rej.HTTPStatus, rej.Body
			if !rej.Final {
				return ErrContinuationRejected
			}
			rejected = true // recorded: the transaction commits
			return insertContinuation(ctx, tx, c)
		}
		var created bool
		if t, r, created, err = s.admitTurnTx(ctx, tx, t, r, boundary); err != nil {
			return err
		}
		if !created {
			return fmt.Errorf("turn %s: %w", t.TurnID, ErrConflict)
		}
		c.RunID = r.ID
		return insertContinuation(ctx, tx, c)
	})
	switch {
	case err == nil && rejected:
		return c, t, r, ErrContinuationRejected
	case errors.Is(err, ErrContinuationExists), errors.Is(err, ErrContinuationRejected):
		return c, t, r, err
	case err != nil:
		return c, t, r, fmt.Errorf("admit continuation %s of session %s: %w", c.OperationID, c.SessionID, err)
	}
	return c, t, r, nil
}

func insertContinuation(ctx context.Context, tx *sql.Tx, c Continuation) error {
	body := c.Body
	if body == nil {
		body = []byte{}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO continuations (`+continuationColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.OperationID, c.SessionID, c.RequestDigest, c.RunID, c.HTTPStatus, body, ms(c.CreatedAt))
	return err
}

// SetContinuationOutcome records the outcome of an admitted continuation
// once its run ended. The first outcome recorded wins and is returned.
func (s *Store) SetContinuationOutcome(ctx context.Context, operationID string, httpStatus int, body []byte) (Continuation, error) {
	var c Continuation
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE continuations SET http_status = ?, body = ? WHERE operation_id = ? AND length(body) = 0`,
			httpStatus, body, operationID); err != nil {
			return err
		}
		var err error
		c, err = scanContinuation(tx.QueryRowContext(ctx, `SELECT `+continuationColumns+` FROM continuations
			WHERE operation_id = ?`, operationID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return Continuation{}, fmt.Errorf("record outcome of continuation %s: %w", operationID, err)
	}
	return c, nil
}
