package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// harnessSchema holds how each run's harness process came to serve it
// (wire.HarnessStart), by run; its rows go with their run.
const harnessSchema = `
CREATE TABLE IF NOT EXISTS run_harness (
	run_id TEXT PRIMARY KEY,
	process TEXT NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	changed TEXT NOT NULL DEFAULT ''
);
`

// RunProcess is a run's harness process as the store records it.
type RunProcess struct {
	PGID int
	// Marker is the environment entry the processes carry when an
	// earlier run or no run started them (a retained session's
	// long-lived harness, a spare): recovery finds them by it. "" keeps
	// the run's own.
	Marker string
	// Start says how the process came to serve the run (nil: not said).
	Start *wire.HarnessStart
}

// SetRunProcess records a run's harness process, in one transaction.
func (s *Store) SetRunProcess(ctx context.Context, id string, p RunProcess) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		q, args := `UPDATE runs SET pgid = ? WHERE id = ?`, []any{p.PGID, id}
		if p.Marker != "" {
			q, args = `UPDATE runs SET pgid = ?, marker = ? WHERE id = ?`, []any{p.PGID, p.Marker, id}
		}
		n, err := execCount(ctx, tx, q, args...)
		switch {
		case err != nil:
			return err
		case n == 0:
			return ErrNotFound // no row of the run's to go with
		case p.Start == nil:
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO run_harness (run_id, process, reason, changed) VALUES (?, ?, ?, ?)`,
			id, p.Start.Process, p.Start.Reason, strings.Join(p.Start.Changed, ","))
		return err
	})
	if err != nil {
		return fmt.Errorf("set process %s: %w", id, err)
	}
	return nil
}

// RunHarness returns how a run's harness process came to serve it, or
// nil when nothing is recorded.
func (s *Store) RunHarness(ctx context.Context, id string) (*wire.HarnessStart, error) {
	var h wire.HarnessStart
	var changed string
	err := s.r.QueryRowContext(ctx, `SELECT process, reason, changed FROM run_harness WHERE run_id = ?`, id).
		Scan(&h.Process, &h.Reason, &changed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run harness %s: %w", id, err)
	}
	if changed != "" {
		h.Changed = strings.Split(changed, ",")
	}
	return &h, nil
}
