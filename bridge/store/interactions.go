package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

const interactionSchema = `
CREATE TABLE IF NOT EXISTS interactions (
	run_id TEXT NOT NULL,
	id TEXT NOT NULL,
	native_id TEXT NOT NULL,
	request BLOB NOT NULL,
	status TEXT NOT NULL,
	response_digest TEXT NOT NULL DEFAULT '',
	outcome TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	resolved_at INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, id)
);
CREATE TABLE IF NOT EXISTS interaction_ops (
	operation_id TEXT PRIMARY KEY,
	run_id TEXT NOT NULL,
	interaction_id TEXT NOT NULL,
	http_status INTEGER NOT NULL,
	body BLOB NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS interaction_ops_run ON interaction_ops(run_id);
`

// Interaction statuses. An interaction closed without an answer is
// cancelled when its run ended (or was cancelled) and expired when the
// bridge restarted while it was open.
const (
	InteractionOpen      = "open"
	InteractionResolved  = "resolved"
	InteractionCancelled = "cancelled"
	InteractionExpired   = "expired"
)

// Interaction is a question a run's harness asked, such as a permission
// prompt, and how it was answered.
type Interaction struct {
	RunID, ID string
	// NativeID is the harness's own id of the request.
	NativeID string
	// Request is the JSON of the interaction request as the event
	// carried it.
	Request []byte
	// Status is InteractionOpen, InteractionResolved,
	// InteractionCancelled or InteractionExpired.
	Status string
	// ResponseDigest and Outcome describe the answer of a resolved
	// interaction.
	ResponseDigest, Outcome string
	CreatedAt, ResolvedAt   time.Time
}

// InteractionOp is the stored acknowledgement of one interaction
// operation.
type InteractionOp struct {
	OperationID, RunID, InteractionID string
	HTTPStatus                        int
	Body                              []byte
}

const interactionColumns = `run_id, id, native_id, request, status, response_digest, outcome, created_at, resolved_at`

func scanInteraction(sc scanner) (Interaction, error) {
	var it Interaction
	var created, resolved int64
	if err := sc.Scan(&it.RunID, &it.ID, &it.NativeID, &it.Request, &it.Status, &it.ResponseDigest, &it.Outcome,
		&created, &resolved); err != nil {
		return Interaction{}, err
	}
	it.CreatedAt, it.ResolvedAt = fromMS(created), fromMS(resolved)
	return it, nil
}

// PutInteraction stores a new open interaction.
func (s *Store) PutInteraction(ctx context.Context, it Interaction) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO interactions (run_id, id, native_id, request, status, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, it.RunID, it.ID, it.NativeID, it.Request, InteractionOpen, ms(s.opts.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("put interaction %s of run %s: %w", it.ID, it.RunID, err)
	}
	return nil
}

// GetInteraction returns an interaction, or ErrNotFound.
func (s *Store) GetInteraction(ctx context.Context, runID, id string) (Interaction, error) {
	it, err := scanInteraction(s.r.QueryRowContext(ctx, `SELECT `+interactionColumns+` FROM interactions
		WHERE run_id = ? AND id = ?`, runID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Interaction{}, fmt.Errorf("interaction %s of run %s: %w", id, runID, ErrNotFound)
	}
	if err != nil {
		return Interaction{}, fmt.Errorf("get interaction %s of run %s: %w", id, runID, err)
	}
	return it, nil
}

// OpenInteractions returns a run's open interactions, oldest first.
func (s *Store) OpenInteractions(ctx context.Context, runID string) ([]Interaction, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+interactionColumns+` FROM interactions WHERE run_id = ? AND status = ?
		ORDER BY created_at, id`, runID, InteractionOpen)
	if err != nil {
		return nil, fmt.Errorf("open interactions of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Interaction
	for rows.Next() {
		it, err := scanInteraction(rows)
		if err != nil {
			return nil, fmt.Errorf("open interactions of run %s: %w", runID, err)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// CancelInteractions marks every open interaction of a run cancelled and
// returns them.
func (s *Store) CancelInteractions(ctx context.Context, runID string) ([]Interaction, error) {
	return s.closeInteractions(ctx, runID, InteractionCancelled)
}

// ExpireInteractions marks every open interaction of a run expired, as
// the restart that ended the run leaves them, and returns them.
func (s *Store) ExpireInteractions(ctx context.Context, runID string) ([]Interaction, error) {
	return s.closeInteractions(ctx, runID, InteractionExpired)
}

// closeInteractions gives every open interaction of a run status and
// returns them.
func (s *Store) closeInteractions(ctx context.Context, runID, status string) ([]Interaction, error) {
	open, err := s.OpenInteractions(ctx, runID)
	if err != nil || len(open) == 0 {
		return nil, err
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE interactions SET status = ?, resolved_at = ? WHERE run_id = ? AND status = ?`,
			status, ms(s.opts.Now()), runID, InteractionOpen)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("close interactions of run %s as %s: %w", runID, status, err)
	}
	return open, nil
}

// GetInteractionOp returns the stored acknowledgement of an operation, or
// ErrNotFound.
func (s *Store) GetInteractionOp(ctx context.Context, operationID string) (InteractionOp, error) {
	var op InteractionOp
	err := s.r.QueryRowContext(ctx, `SELECT operation_id, run_id, interaction_id, http_status, body FROM interaction_ops
		WHERE operation_id = ?`, operationID).Scan(&op.OperationID, &op.RunID, &op.InteractionID, &op.HTTPStatus, &op.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return InteractionOp{}, fmt.Errorf("interaction operation %s: %w", operationID, ErrNotFound)
	}
	if err != nil {
		return InteractionOp{}, fmt.Errorf("get interaction operation %s: %w", operationID, err)
	}
	return op, nil
}

// Resolution is the answer that resolves an open interaction.
type Resolution struct {
	ResponseDigest, Outcome string
}

// PutInteractionOp stores an operation's acknowledgement unless one is
// stored; with res it also resolves the operation's interaction, in the
// same transaction and only if it is still open. It returns the stored
// acknowledgement, with created telling whether it is op.
func (s *Store) PutInteractionOp(ctx context.Context, op InteractionOp, res *Resolution) (_ InteractionOp, created bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var got InteractionOp
		err := tx.QueryRowContext(ctx, `SELECT operation_id, run_id, interaction_id, http_status, body FROM interaction_ops
			WHERE operation_id = ?`, op.OperationID).Scan(&got.OperationID, &got.RunID, &got.InteractionID, &got.HTTPStatus, &got.Body)
		if err == nil {
			op = got
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if res != nil {
			r, err := tx.ExecContext(ctx, `UPDATE interactions SET status = ?, response_digest = ?, outcome = ?, resolved_at = ?
				WHERE run_id = ? AND id = ? AND status = ?`, InteractionResolved, res.ResponseDigest, res.Outcome, ms(s.opts.Now()),
				op.RunID, op.InteractionID, InteractionOpen)
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n != 1 {
				return fmt.Errorf("interaction %s is not open: %w", op.InteractionID, ErrConflict)
			}
		}
		created = true
		_, err = tx.ExecContext(ctx, `INSERT INTO interaction_ops (operation_id, run_id, interaction_id, http_status, body, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, op.OperationID, op.RunID, op.InteractionID, op.HTTPStatus, op.Body, ms(s.opts.Now()))
		return err
	})
	if err != nil {
		return InteractionOp{}, false, fmt.Errorf("put interaction operation %s: %w", op.OperationID, err)
	}
	return op, created, nil
}
