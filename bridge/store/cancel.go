package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Cancellation is the stored answer to one exact cancellation operation.
type Cancellation struct {
	OperationID string
	// Digest is the digest of the cancellation request that created it.
	Digest     string
	HTTPStatus int
	Body       []byte
}

// PutCancellation stores the answer to an operation unless one exists; it
// returns the stored answer either way, with created telling which.
func (s *Store) PutCancellation(ctx context.Context, c Cancellation) (_ Cancellation, created bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var got Cancellation
		err := tx.QueryRowContext(ctx, `SELECT operation_id, digest, http_status, body FROM cancellations
			WHERE operation_id = ?`, c.OperationID).Scan(&got.OperationID, &got.Digest, &got.HTTPStatus, &got.Body)
		if err == nil {
			c = got
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		created = true
		_, err = tx.ExecContext(ctx, `INSERT INTO cancellations (operation_id, digest, http_status, body, created_at)
			VALUES (?, ?, ?, ?, ?)`, c.OperationID, c.Digest, c.HTTPStatus, c.Body, ms(s.opts.Now()))
		return err
	})
	if err != nil {
		return Cancellation{}, false, fmt.Errorf("put cancellation %s: %w", c.OperationID, err)
	}
	return c, created, nil
}

// GetCancellation returns the stored answer to an operation, or ErrNotFound.
func (s *Store) GetCancellation(ctx context.Context, operationID string) (Cancellation, error) {
	var c Cancellation
	err := s.r.QueryRowContext(ctx, `SELECT operation_id, digest, http_status, body FROM cancellations
		WHERE operation_id = ?`, operationID).Scan(&c.OperationID, &c.Digest, &c.HTTPStatus, &c.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return Cancellation{}, fmt.Errorf("cancellation %s: %w", operationID, ErrNotFound)
	}
	if err != nil {
		return Cancellation{}, fmt.Errorf("get cancellation %s: %w", operationID, err)
	}
	return c, nil
}

// NativeSession returns the harness's own session id for a bridge session
// id, or ErrNotFound.
func (s *Store) NativeSession(ctx context.Context, id, harness string) (string, error) {
	var native string
	err := s.r.QueryRowContext(ctx, `SELECT native_id FROM sessions WHERE id = ? AND harness = ?`, id, harness).Scan(&native)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get session %s: %w", id, err)
	}
	return native, nil
}

// PutNativeSession records the harness's own session id for a bridge
// session id.
func (s *Store) PutNativeSession(ctx context.Context, id, harness, native string) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, harness, native_id, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (id, harness) DO UPDATE SET native_id = excluded.native_id, updated_at = excluded.updated_at`,
			id, harness, native, ms(s.opts.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("put session %s: %w", id, err)
	}
	return nil
}

// DeleteNativeSession deletes the harness session a chat session id maps
// to, for one harness or (harness "") every one, and reports whether
// there was one.
func (s *Store) DeleteNativeSession(ctx context.Context, id, harness string) (bool, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ? AND (? = '' OR harness = ?)`, id, harness, harness)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("delete session %s: %w", id, err)
	}
	return n > 0, nil
}
