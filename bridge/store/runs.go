package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Run statuses as stored; they equal the wire statuses.
const (
	StatusRunning   = "running"
	StatusDone      = "done"
	StatusError     = "error"
	StatusCancelled = "cancelled"
)

// Run is the stored record of one run.
type Run struct {
	ID, Digest, Harness, Model                      string
	Provider, EnvironmentID, SessionID, ExecutionID string

	Status     string
	ErrType    string // why a run ended in error or was cancelled
	ErrMessage string

	StartedAt, EndedAt, CancelRequestedAt, LifetimeExpiresAt time.Time

	// LastSeq is the highest sequence number committed (0: none yet).
	LastSeq int64
	// FirstSeq is the lowest sequence number still retained; LastSeq+1
	// when none is.
	FirstSeq       int64
	RetainedEvents int64
	RetainedBytes  int64

	ReplayExpiresAt time.Time
	// ReplayExpired says the run's full replay ended; ResultKept that it
	// kept its result: its newest KeptResultEvents events, and the older
	// ones folded (see KeptResultEvents).
	ReplayExpired, ResultKept bool
	IdentityExpiresAt         time.Time

	// PGID is the process group of the run's harness, 0 before it started.
	PGID int
	// Marker is an environment entry (NAME=value) set on the harness and
	// inherited by its children, so a later incarnation of the bridge can
	// tell its processes from unrelated ones.
	Marker string
}

// Terminal reports whether the run has ended.
func (r Run) Terminal() bool { return r.Status != StatusRunning }

const runColumns = `id, digest, harness, model, provider, environment_id, session_id, execution_id,
	status, err_type, err_message, started_at, ended_at, cancel_requested_at, lifetime_expires_at,
	last_seq, first_seq, retained_events, retained_bytes, replay_expires_at, replay_expired,
	identity_expires_at, pgid, marker`

type scanner interface{ Scan(...any) error }

func scanRun(sc scanner) (Run, error) {
	var r Run
	var started, ended, cancelReq, lifetime, replayExp, identityExp int64
	var expired int
	err := sc.Scan(&r.ID, &r.Digest, &r.Harness, &r.Model, &r.Provider, &r.EnvironmentID, &r.SessionID,
		&r.ExecutionID, &r.Status, &r.ErrType, &r.ErrMessage, &started, &ended, &cancelReq, &lifetime,
		&r.LastSeq, &r.FirstSeq, &r.RetainedEvents, &r.RetainedBytes, &replayExp, &expired,
		&identityExp, &r.PGID, &r.Marker)
	if err != nil {
		return Run{}, err
	}
	r.StartedAt, r.EndedAt, r.CancelRequestedAt = fromMS(started), fromMS(ended), fromMS(cancelReq)
	r.LifetimeExpiresAt, r.ReplayExpiresAt, r.IdentityExpiresAt = fromMS(lifetime), fromMS(replayExp), fromMS(identityExp)
	r.ReplayExpired, r.ResultKept = expired != 0, expired == replayResultKept
	return r, nil
}

// CreateRun stores a new running run. If a run with that id exists it is
// returned with created false and nothing is written: the caller compares
// digests. StartedAt defaults to now.
func (s *Store) CreateRun(ctx context.Context, r Run) (_ Run, created bool, err error) {
	if r.StartedAt.IsZero() {
		r.StartedAt = s.opts.Now()
	}
	r.Status, r.LastSeq, r.FirstSeq = StatusRunning, 0, 1
	err = s.tx(ctx, func(tx *sql.Tx) error {
		existing, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, r.ID))
		if err == nil {
			r = existing
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		created = true
		_, err = tx.ExecContext(ctx, `INSERT INTO runs (id, digest, harness, model, provider, environment_id,
			session_id, execution_id, status, started_at, lifetime_expires_at, marker)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Digest, r.Harness, r.Model, r.Provider, r.EnvironmentID, r.SessionID, r.ExecutionID,
			r.Status, ms(r.StartedAt), ms(r.LifetimeExpiresAt), r.Marker)
		return err
	})
	if err != nil {
		return Run{}, false, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return r, created, nil
}

// GetRun returns a run, or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// LiveRuns returns every run still marked running.
func (s *Store) LiveRuns(ctx context.Context) ([]Run, error) {
	return s.queryRuns(ctx, "live runs", `SELECT `+runColumns+` FROM runs WHERE status = ?`, StatusRunning)
}

// RunsSince returns every live run and each run started at since or
// later.
func (s *Store) RunsSince(ctx context.Context, since time.Time) ([]Run, error) {
	return s.queryRuns(ctx, "runs since", `SELECT `+runColumns+` FROM runs WHERE status = ? OR started_at >= ? ORDER BY started_at`,
		StatusRunning, ms(since))
}

// queryRuns returns the runs q selects.
func (s *Store) queryRuns(ctx context.Context, op, q string, args ...any) ([]Run, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RequestCancel records the first cancel request of a run.
func (s *Store) RequestCancel(ctx context.Context, id string) error {
	return s.update(ctx, "request cancel", id,
		`UPDATE runs SET cancel_requested_at = ? WHERE id = ? AND cancel_requested_at = 0`, ms(s.opts.Now()), id)
}

func (s *Store) update(ctx context.Context, op, id, q string, args ...any) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, id, err)
	}
	return nil
}

// Finish is how a run ended.
type Finish struct {
	Status     string // StatusDone, StatusError or StatusCancelled
	ErrType    string
	ErrMessage string
}

// Finish appends a run's last events and marks it terminal, in one
// transaction. It returns ErrTerminal if the run had already ended.
func (s *Store) Finish(ctx context.Context, id string, f Finish, events [][]byte) (Run, error) {
	if f.Status == StatusRunning || f.Status == "" {
		return Run{}, fmt.Errorf("finish run %s: status %q is not terminal", id, f.Status)
	}
	var out Run
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.appendTx(ctx, tx, id, events); err != nil {
			return err
		}
		now := s.opts.Now()
		_, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, err_type = ?, err_message = ?, ended_at = ?,
			replay_expires_at = ?, identity_expires_at = ? WHERE id = ?`,
			f.Status, f.ErrType, f.ErrMessage, ms(now), ms(now.Add(s.opts.ReplayTTL)),
			ms(now.Add(s.opts.IdentityTTL)), id)
		if err != nil {
			return err
		}
		if err := s.noteFinish(ctx, tx, id, f.Status); err != nil {
			return err
		}
		out, err = scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
		return err
	})
	if err != nil {
		return Run{}, fmt.Errorf("finish run %s: %w", id, err)
	}
	s.stats.events.Add(int64(len(events)))
	s.changed(id)
	select {
	case s.ckpt <- struct{}{}:
	default: // one is asked for already; it covers this run too
	}
	return out, nil
}

// checkpointer moves what the WAL holds into the database file once a
// run ended, so that its replay reads the file's pages (mapped, on the
// readers) instead of looking each page up in the WAL. It runs beside
// the run's delivery: Finish returns (and the run's last events go out)
// without waiting for it. Each checkpoint is passive (it waits for no
// reader) and best effort: one that fails leaves the WAL to SQLite's own
// automatic checkpoints, and the run is committed anyway.
func (s *Store) checkpointer() {
	defer close(s.ckptDone)
	for {
		select {
		case <-s.quit:
			return
		case <-s.ckpt:
			_, _ = s.w.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}
