package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// branchSchema holds workspace checkpoints and forks by idempotency key,
// the cleanup operations by operation id, and context transfers by
// operation id. A deleted checkpoint or fork keeps its row (its key stays
// bound to its request) with deleted_at set.
const branchSchema = `
CREATE TABLE IF NOT EXISTS workspace_resources (
	kind TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	request_digest TEXT NOT NULL,
	id TEXT NOT NULL,
	parent_id TEXT NOT NULL DEFAULT '',
	provider TEXT NOT NULL,
	path TEXT NOT NULL,
	ref BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	deleted_at INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (kind, idempotency_key)
);
CREATE UNIQUE INDEX IF NOT EXISTS workspace_resources_id ON workspace_resources(kind, id);
CREATE INDEX IF NOT EXISTS workspace_resources_parent ON workspace_resources(parent_id);
CREATE TABLE IF NOT EXISTS workspace_cleanups (
	operation_id TEXT PRIMARY KEY,
	kind TEXT NOT NULL,
	request_digest TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS context_transfers (
	operation_id TEXT PRIMARY KEY,
	request_digest TEXT NOT NULL,
	receipt BLOB NOT NULL,
	created_at INTEGER NOT NULL
);
`

// Workspace resource kinds.
const (
	KindCheckpoint = "checkpoint"
	KindFork       = "fork"
)

// ErrResourceExists is returned by AddResource when the key is already
// bound; the stored resource comes with it.
var ErrResourceExists = errors.New("workspace resource key already bound")

// Resource is a workspace checkpoint or fork: Path is its copy of the
// workspace, ParentID the checkpoint a fork was made from, Ref the JSON
// the routes answer.
type Resource struct {
	Kind, IdempotencyKey, RequestDigest, ID, ParentID, Provider, Path string
	Ref                                                               []byte
	CreatedAt, DeletedAt                                              time.Time
}

const resourceColumns = `kind, idempotency_key, request_digest, id, parent_id, provider, path, ref, created_at, deleted_at`

func scanResource(sc scanner) (Resource, error) {
	var r Resource
	var created, deleted int64
	if err := sc.Scan(&r.Kind, &r.IdempotencyKey, &r.RequestDigest, &r.ID, &r.ParentID, &r.Provider, &r.Path, &r.Ref,
		&created, &deleted); err != nil {
		return Resource{}, err
	}
	r.CreatedAt, r.DeletedAt = fromMS(created), fromMS(deleted)
	return r, nil
}

// AddResource records a resource under its key. A key already bound
// returns the stored resource and ErrResourceExists; a fork whose
// checkpoint is absent or deleted returns ErrNotFound.
func (s *Store) AddResource(ctx context.Context, r Resource) (Resource, error) {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		got, err := scanResource(tx.QueryRowContext(ctx, `SELECT `+resourceColumns+` FROM workspace_resources
			WHERE kind = ? AND idempotency_key = ?`, r.Kind, r.IdempotencyKey))
		if err == nil {
			r = got
			return ErrResourceExists
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if r.ParentID != "" {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM workspace_resources WHERE kind = ? AND id = ? AND deleted_at = 0`,
				KindCheckpoint, r.ParentID).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return ErrNotFound
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO workspace_resources (`+resourceColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`,
			r.Kind, r.IdempotencyKey, r.RequestDigest, r.ID, r.ParentID, r.Provider, r.Path, r.Ref, ms(r.CreatedAt))
		return err
	})
	if err != nil && !errors.Is(err, ErrResourceExists) && !errors.Is(err, ErrNotFound) {
		return r, fmt.Errorf("add %s %s: %w", r.Kind, r.IdempotencyKey, err)
	}
	return r, err
}

// ResourceByKey returns the resource bound to a key, deleted or not.
func (s *Store) ResourceByKey(ctx context.Context, kind, key string) (Resource, error) {
	return s.resource(ctx, `kind = ? AND idempotency_key = ?`, kind, key)
}

// ResourceByID returns a resource by its id, deleted or not.
func (s *Store) ResourceByID(ctx context.Context, kind, id string) (Resource, error) {
	return s.resource(ctx, `kind = ? AND id = ?`, kind, id)
}

func (s *Store) resource(ctx context.Context, where string, args ...any) (Resource, error) {
	r, err := scanResource(s.r.QueryRowContext(ctx, `SELECT `+resourceColumns+` FROM workspace_resources WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// LiveChildren returns the ids of the live forks made from a checkpoint.
func (s *Store) LiveChildren(ctx context.Context, checkpointID string) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM workspace_resources WHERE kind = ? AND parent_id = ? AND deleted_at = 0
		ORDER BY created_at, id`, KindFork, checkpointID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// ErrCleanupConflict is returned by BindCleanup when the operation id is
// bound to a different digest; that digest comes with it.
var ErrCleanupConflict = errors.New("cleanup operation bound to a different request")

// BindCleanup binds a cleanup operation id to its kind and digest, or
// checks the binding it has. On a conflict it returns the bound digest.
func (s *Store) BindCleanup(ctx context.Context, operationID, kind, digest string) (string, error) {
	bound := digest
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var k, d string
		err := tx.QueryRowContext(ctx, `SELECT kind, request_digest FROM workspace_cleanups WHERE operation_id = ?`, operationID).Scan(&k, &d)
		if err == nil {
			if k != kind || d != digest {
				bound = d
				return ErrCleanupConflict
			}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO workspace_cleanups (operation_id, kind, request_digest, created_at) VALUES (?, ?, ?, ?)`,
			operationID, kind, digest, ms(s.opts.Now()))
		return err
	})
	if err != nil && !errors.Is(err, ErrCleanupConflict) {
		return bound, fmt.Errorf("bind cleanup %s: %w", operationID, err)
	}
	return bound, err
}

// DeleteResource marks a live resource deleted. It returns false when
// the resource was already deleted or is absent, and ErrInUse with the
// blocking fork ids when a checkpoint still has live forks.
func (s *Store) DeleteResource(ctx context.Context, kind, id string) (deleted bool, blocking []string, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if kind == KindCheckpoint {
			rows, err := tx.QueryContext(ctx, `SELECT id FROM workspace_resources WHERE kind = ? AND parent_id = ? AND deleted_at = 0
				ORDER BY created_at, id`, KindFork, id)
			if err != nil {
				return err
			}
			for rows.Next() {
				var f string
				if err := rows.Scan(&f); err != nil {
					rows.Close()
					return err
				}
				blocking = append(blocking, f)
			}
			rows.Close()
			if len(blocking) > 0 {
				return ErrInUse
			}
		}
		res, err := tx.ExecContext(ctx, `UPDATE workspace_resources SET deleted_at = ? WHERE kind = ? AND id = ? AND deleted_at = 0`,
			ms(s.opts.Now()), kind, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		deleted = n == 1
		return err
	})
	if err != nil && !errors.Is(err, ErrInUse) {
		return false, nil, fmt.Errorf("delete %s %s: %w", kind, id, err)
	}
	return deleted, blocking, err
}

// ErrInUse is returned by DeleteResource for a checkpoint with live forks.
var ErrInUse = errors.New("checkpoint has live forks")

// ContextTransfer is a recorded context transfer: the receipt it answered.
type ContextTransfer struct {
	OperationID, RequestDigest string
	Receipt                    []byte
}

// GetContextTransfer returns the transfer recorded under an operation id.
func (s *Store) GetContextTransfer(ctx context.Context, operationID string) (ContextTransfer, error) {
	c := ContextTransfer{OperationID: operationID}
	err := s.r.QueryRowContext(ctx, `SELECT request_digest, receipt FROM context_transfers WHERE operation_id = ?`, operationID).
		Scan(&c.RequestDigest, &c.Receipt)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	return c, err
}

// AddContextTransfer records a transfer's receipt. The first one recorded
// under an operation id wins and is returned.
func (s *Store) AddContextTransfer(ctx context.Context, c ContextTransfer) (ContextTransfer, error) {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO context_transfers (operation_id, request_digest, receipt, created_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (operation_id) DO NOTHING`, c.OperationID, c.RequestDigest, c.Receipt, ms(s.opts.Now())); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT request_digest, receipt FROM context_transfers WHERE operation_id = ?`, c.OperationID).
			Scan(&c.RequestDigest, &c.Receipt)
	})
	if err != nil {
		return c, fmt.Errorf("record context transfer %s: %w", c.OperationID, err)
	}
	return c, nil
}
