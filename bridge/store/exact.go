package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// exactSchema holds exact process environments by id and idempotency
// key, and their processes by environment and number. A destroyed
// environment keeps its row (its key stays bound to its request) with
// destroyed_at set; its processes' rows go with it.
const exactSchema = `
CREATE TABLE IF NOT EXISTS exact_environments (
	id TEXT PRIMARY KEY,
	idempotency_key TEXT NOT NULL UNIQUE,
	request_digest TEXT NOT NULL,
	view BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	destroyed_at INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS exact_processes (
	env_id TEXT NOT NULL,
	pid INTEGER NOT NULL,
	running INTEGER NOT NULL,
	pgid INTEGER NOT NULL DEFAULT 0,
	status BLOB NOT NULL,
	PRIMARY KEY (env_id, pid)
);
`

// ExactEnvironment is a recorded exact process environment: View is the
// JSON the routes answer.
type ExactEnvironment struct {
	ID, IdempotencyKey, RequestDigest string
	View                              []byte
	CreatedAt, ExpiresAt, DestroyedAt time.Time
}

// ExactProcess is a recorded process of an exact environment: Status is
// the JSON the routes answer, PGID the host process group while it runs.
type ExactProcess struct {
	EnvID   string
	PID     int64
	Running bool
	PGID    int
	Status  []byte
}

const exactEnvColumns = `id, idempotency_key, request_digest, view, created_at, expires_at, destroyed_at`

func scanExactEnv(sc scanner) (ExactEnvironment, error) {
	var e ExactEnvironment
	var created, expires, destroyed int64
	if err := sc.Scan(&e.ID, &e.IdempotencyKey, &e.RequestDigest, &e.View, &created, &expires, &destroyed); err != nil {
		return ExactEnvironment{}, err
	}
	e.CreatedAt, e.ExpiresAt, e.DestroyedAt = fromMS(created), fromMS(expires), fromMS(destroyed)
	return e, nil
}

// AddExactEnvironment records an environment under its key. A key
// already bound returns the stored environment (destroyed or not) and
// ErrResourceExists.
func (s *Store) AddExactEnvironment(ctx context.Context, e ExactEnvironment) (ExactEnvironment, error) {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		got, err := scanExactEnv(tx.QueryRowContext(ctx, `SELECT `+exactEnvColumns+` FROM exact_environments
			WHERE idempotency_key = ?`, e.IdempotencyKey))
		if err == nil {
			e = got
			return ErrResourceExists
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO exact_environments (`+exactEnvColumns+`) VALUES (?, ?, ?, ?, ?, ?, 0)`,
			e.ID, e.IdempotencyKey, e.RequestDigest, e.View, ms(e.CreatedAt), ms(e.ExpiresAt))
		return err
	})
	if err != nil && !errors.Is(err, ErrResourceExists) {
		return e, fmt.Errorf("add exact environment %s: %w", e.IdempotencyKey, err)
	}
	return e, err
}

// GetExactEnvironment returns an environment by id, destroyed or not.
func (s *Store) GetExactEnvironment(ctx context.Context, id string) (ExactEnvironment, error) {
	e, err := scanExactEnv(s.r.QueryRowContext(ctx, `SELECT `+exactEnvColumns+` FROM exact_environments WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrNotFound
	}
	return e, err
}

// LiveExactEnvironments returns the environments not destroyed, oldest
// first.
func (s *Store) LiveExactEnvironments(ctx context.Context) ([]ExactEnvironment, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+exactEnvColumns+` FROM exact_environments WHERE destroyed_at = 0
		ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list exact environments: %w", err)
	}
	defer rows.Close()
	var out []ExactEnvironment
	for rows.Next() {
		e, err := scanExactEnv(rows)
		if err != nil {
			return nil, fmt.Errorf("list exact environments: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// DestroyExactEnvironment marks a live environment destroyed and drops
// its processes' rows. It returns false when the environment was already
// destroyed or is absent.
func (s *Store) DestroyExactEnvironment(ctx context.Context, id string) (bool, error) {
	var destroyed bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE exact_environments SET destroyed_at = ? WHERE id = ? AND destroyed_at = 0`,
			ms(s.opts.Now()), id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		destroyed = n == 1
		_, err = tx.ExecContext(ctx, `DELETE FROM exact_processes WHERE env_id = ?`, id)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("destroy exact environment %s: %w", id, err)
	}
	return destroyed, nil
}

// ErrTooMany is returned by AddExactProcess when an environment already
// started its limit of processes.
var ErrTooMany = errors.New("too many processes")

// AddExactProcess numbers a new process of a live environment (one more
// than its last) and records it with the status status returns for that
// number. It returns ErrNotFound for an environment absent or destroyed
// and ErrTooMany past limit processes.
func (s *Store) AddExactProcess(ctx context.Context, envID string, limit int64, status func(pid int64) ([]byte, error)) (int64, error) {
	var pid int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM exact_environments WHERE id = ? AND destroyed_at = 0`, envID).
			Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return ErrNotFound
		}
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(pid), 0) + 1 FROM exact_processes WHERE env_id = ?`, envID).
			Scan(&pid); err != nil {
			return err
		}
		if pid > limit {
			return ErrTooMany
		}
		b, err := status(pid)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO exact_processes (env_id, pid, running, pgid, status) VALUES (?, ?, 1, 0, ?)`,
			envID, pid, b)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrTooMany) {
		return 0, fmt.Errorf("add exact process of %s: %w", envID, err)
	}
	return pid, err
}

// SetExactProcess records a process's status, whether it runs and its
// host process group.
func (s *Store) SetExactProcess(ctx context.Context, p ExactProcess) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE exact_processes SET running = ?, pgid = ?, status = ? WHERE env_id = ? AND pid = ?`,
			p.Running, p.PGID, p.Status, p.EnvID, p.PID)
		return err
	})
	if err != nil {
		return fmt.Errorf("set exact process %s/%d: %w", p.EnvID, p.PID, err)
	}
	return nil
}

// ExactProcesses returns the processes of an environment in order; with
// envID "" those of every environment that are recorded running.
func (s *Store) ExactProcesses(ctx context.Context, envID string) ([]ExactProcess, error) {
	q, args := `SELECT env_id, pid, running, pgid, status FROM exact_processes WHERE env_id = ? ORDER BY pid`, []any{envID}
	if envID == "" {
		q, args = `SELECT env_id, pid, running, pgid, status FROM exact_processes WHERE running = 1 ORDER BY env_id, pid`, nil
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list exact processes: %w", err)
	}
	defer rows.Close()
	var out []ExactProcess
	for rows.Next() {
		var p ExactProcess
		if err := rows.Scan(&p.EnvID, &p.PID, &p.Running, &p.PGID, &p.Status); err != nil {
			return nil, fmt.Errorf("list exact processes: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
