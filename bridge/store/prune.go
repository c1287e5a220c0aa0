package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// PruneStats counts what one Prune removed.
type PruneStats struct {
	// ReplayExpired is the number of ended runs whose events were dropped.
	ReplayExpired int
	// Runs is the number of runs forgotten; Turns, Interactions,
	// InteractionOps and Continuations count the rows that went with
	// them (and with the deleted sessions).
	Runs, Turns, Interactions, InteractionOps, Continuations int
	// Cancellations is the number of stored cancellation answers dropped.
	Cancellations int
	// Sessions is the number of retained sessions deleted.
	Sessions int
	// Forgotten are the sessions whose native session record was
	// deleted: deleted retained sessions, and sessions of plain runs not
	// resumed for IdentityTTL. Their harness state can go.
	Forgotten []SessionRef
}

// SessionRef names a harness session.
type SessionRef struct{ ID, Harness string }

// Empty reports whether nothing was pruned.
func (p PruneStats) Empty() bool {
	return p.ReplayExpired+p.Runs+p.Turns+p.Interactions+p.InteractionOps+p.Continuations+p.Cancellations+p.Sessions == 0 &&
		len(p.Forgotten) == 0
}

func (p *PruneStats) add(q PruneStats) {
	p.ReplayExpired += q.ReplayExpired
	p.Runs += q.Runs
	p.Turns += q.Turns
	p.Interactions += q.Interactions
	p.InteractionOps += q.InteractionOps
	p.Continuations += q.Continuations
	p.Cancellations += q.Cancellations
	p.Sessions += q.Sessions
	p.Forgotten = append(p.Forgotten, q.Forgotten...)
}

// pruneStep removes one batch of at most limit rows of one kind, as of
// now, inside tx, and reports how many it selected: fewer than limit
// means the kind is done.
type pruneStep func(ctx context.Context, tx *sql.Tx, now time.Time, limit int) (int, PruneStats, error)

// Prune applies the time-based retention, as of one instant:
//   - a run that ended more than ReplayTTL ago ends its full replay (the
//     run stays, marked replay-expired): it keeps its result, its newest
//     KeptResultEvents events and the older ones folded, unless
//     retention had already dropped its first events, when it loses them
//     all;
//   - a run whose identity expired (IdentityTTL after it ended) is
//     deleted with every row that only serves its identity: its
//     interactions, interaction operations, continuation and retained
//     turn. The run of a retained session's latest turn is the exception:
//     it stays while the session does, since the session's next turn
//     numbers its events after it;
//   - a retained session closed more than IdentityTTL ago whose runs are
//     all ended and past their identity is deleted with its turns, runs,
//     continuations and native session record;
//   - cancellation answers and rejected continuations older than
//     IdentityTTL, and native session records of plain runs not updated
//     for IdentityTTL, are deleted.
//
// Each kind goes in transactions of at most PruneBatch rows, so a prune
// never holds the write lock long. A running run, and a session with
// one, is never touched. Prune does not close idle sessions: see
// CloseIdleSessions.
func (s *Store) Prune(ctx context.Context) (PruneStats, error) {
	now := s.opts.Now()
	var total PruneStats
	for _, step := range []pruneStep{s.pruneReplay, s.pruneRuns, s.pruneSessions, s.pruneCancellations,
		s.pruneContinuations, s.pruneNativeSessions} {
		for {
			var n int
			var got PruneStats
			err := s.tx(ctx, func(tx *sql.Tx) error {
				var err error
				n, got, err = step(ctx, tx, now, s.opts.PruneBatch)
				return err
			})
			if err != nil {
				return total, fmt.Errorf("prune store: %w", err)
			}
			total.add(got)
			if n < s.opts.PruneBatch {
				break
			}
		}
	}
	return total, nil
}

// pruneReplay ends the full replay of runs past their replay time: each
// keeps its result (compactTx) or, when it cannot be kept whole, loses
// its events.
func (s *Store) pruneReplay(ctx context.Context, tx *sql.Tx, now time.Time, limit int) (int, PruneStats, error) {
	due, err := queryStrings(ctx, tx, `SELECT id FROM runs WHERE replay_expired = 0 AND replay_expires_at > 0
		AND replay_expires_at <= ? AND status != 'running' LIMIT ?`, ms(now), limit)
	if err != nil || len(due) == 0 {
		return 0, PruneStats{}, err
	}
	var ids []string // whose events go
	for _, id := range due {
		kept, err := s.compactTx(ctx, tx, id)
		if err != nil {
			return 0, PruneStats{}, err
		}
		if !kept {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return len(due), PruneStats{ReplayExpired: len(due)}, nil
	}
	in, args := inList(ids)
	if _, err := tx.ExecContext(ctx, `DELETE FROM segments WHERE run_id IN (`+in+`)`, args...); err != nil {
		return 0, PruneStats{}, err
	}
	_, err = tx.ExecContext(ctx, `UPDATE runs SET replay_expired = 1, first_seq = last_seq + 1, retained_events = 0,
		retained_bytes = 0 WHERE id IN (`+in+`)`, args...)
	return len(due), PruneStats{ReplayExpired: len(due)}, err
}

// latestTurnRun is true of a run r that is the latest turn of a retained
// session that exists.
const latestTurnRun = `EXISTS (SELECT 1 FROM retained_turns t JOIN retained_sessions rs ON rs.id = t.session_id
	WHERE t.run_id = r.id AND t.idx = (SELECT MAX(idx) FROM retained_turns WHERE session_id = t.session_id))`

// pruneRuns deletes runs past their identity with their dependent rows.
func (s *Store) pruneRuns(ctx context.Context, tx *sql.Tx, now time.Time, limit int) (int, PruneStats, error) {
	ids, err := queryStrings(ctx, tx, `SELECT id FROM runs r WHERE identity_expires_at > 0 AND identity_expires_at <= ?
		AND status != 'running' AND NOT `+latestTurnRun+` LIMIT ?`, ms(now), limit)
	if err != nil || len(ids) == 0 {
		return 0, PruneStats{}, err
	}
	st, err := deleteRuns(ctx, tx, ids)
	return len(ids), st, err
}

// deleteRuns deletes runs and every row of theirs.
func deleteRuns(ctx context.Context, tx *sql.Tx, ids []string) (PruneStats, error) {
	var st PruneStats
	if len(ids) == 0 {
		return st, nil
	}
	in, args := inList(ids)
	for _, d := range []struct {
		q string
		n *int
	}{
		{`DELETE FROM segments WHERE run_id IN (` + in + `)`, nil},
		{`DELETE FROM interactions WHERE run_id IN (` + in + `)`, &st.Interactions},
		{`DELETE FROM interaction_ops WHERE run_id IN (` + in + `)`, &st.InteractionOps},
		{`DELETE FROM continuations WHERE run_id IN (` + in + `)`, &st.Continuations},
		{`DELETE FROM retained_turns WHERE run_id IN (` + in + `)`, &st.Turns},
		{`DELETE FROM run_harness WHERE run_id IN (` + in + `)`, nil},
		{`DELETE FROM runs WHERE id IN (` + in + `)`, &st.Runs},
	} {
		n, err := execCount(ctx, tx, d.q, args...)
		if err != nil {
			return st, err
		}
		if d.n != nil {
			*d.n += n
		}
	}
	return st, nil
}

// pruneSessions deletes closed retained sessions past their identity.
func (s *Store) pruneSessions(ctx context.Context, tx *sql.Tx, now time.Time, limit int) (int, PruneStats, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, harness FROM retained_sessions s WHERE closed_at > 0 AND closed_at <= ?
		AND NOT EXISTS (SELECT 1 FROM retained_turns t JOIN runs r ON r.id = t.run_id WHERE t.session_id = s.id
			AND (r.status = 'running' OR r.identity_expires_at > ?))
		LIMIT ?`, ms(now.Add(-s.opts.IdentityTTL)), ms(now), limit)
	if err != nil {
		return 0, PruneStats{}, err
	}
	var refs []SessionRef
	var ids []string
	for rows.Next() {
		var r SessionRef
		if err := rows.Scan(&r.ID, &r.Harness); err != nil {
			rows.Close()
			return 0, PruneStats{}, err
		}
		refs, ids = append(refs, r), append(ids, r.ID)
	}
	if err := rows.Close(); err != nil {
		return 0, PruneStats{}, err
	}
	if len(ids) == 0 {
		return 0, PruneStats{}, nil
	}
	in, args := inList(ids)
	// Once pruneRuns is done a prunable session has one run left, its
	// latest turn's; a session pruneRuns has not reached yet has more.
	runs, err := queryStrings(ctx, tx, `SELECT run_id FROM retained_turns WHERE session_id IN (`+in+`)`, args...)
	if err != nil {
		return 0, PruneStats{}, err
	}
	st, err := deleteRuns(ctx, tx, runs)
	if err != nil {
		return 0, st, err
	}
	for _, d := range []struct {
		q string
		n *int
	}{
		{`DELETE FROM retained_turns WHERE session_id IN (` + in + `)`, &st.Turns},
		{`DELETE FROM continuations WHERE session_id IN (` + in + `)`, &st.Continuations},
		{`DELETE FROM session_activity WHERE session_id IN (` + in + `)`, nil},
		{`DELETE FROM sessions WHERE (id, harness) IN (SELECT id, harness FROM retained_sessions WHERE id IN (` + in + `))`, nil},
		{`DELETE FROM retained_sessions WHERE id IN (` + in + `)`, &st.Sessions},
	} {
		n, err := execCount(ctx, tx, d.q, args...)
		if err != nil {
			return 0, st, err
		}
		if d.n != nil {
			*d.n += n
		}
	}
	st.Forgotten = refs
	return len(ids), st, nil
}

// pruneCancellations deletes cancellation answers past IdentityTTL.
func (s *Store) pruneCancellations(ctx context.Context, tx *sql.Tx, now time.Time, limit int) (int, PruneStats, error) {
	n, err := execCount(ctx, tx, `DELETE FROM cancellations WHERE rowid IN (SELECT rowid FROM cancellations
		WHERE created_at <= ? LIMIT ?)`, ms(now.Add(-s.opts.IdentityTTL)), limit)
	return n, PruneStats{Cancellations: n}, err
}

// pruneContinuations deletes the recorded rejections of continuations
// (those started no run) past IdentityTTL; an admitted continuation goes
// with its run.
func (s *Store) pruneContinuations(ctx context.Context, tx *sql.Tx, now time.Time, limit int) (int, PruneStats, error) {
	n, err := execCount(ctx, tx, `DELETE FROM continuations WHERE rowid IN (SELECT rowid FROM continuations
		WHERE run_id = '' AND created_at <= ? LIMIT ?)`, ms(now.Add(-s.opts.IdentityTTL)), limit)
	return n, PruneStats{Continuations: n}, err
}

// pruneNativeSessions deletes the native session records of plain runs'
// sessions not updated for IdentityTTL. A retained session's record
// stays as long as the session: its next turn resumes it.
func (s *Store) pruneNativeSessions(ctx context.Context, tx *sql.Tx, now time.Time, limit int) (int, PruneStats, error) {
	rows, err := tx.QueryContext(ctx, `SELECT rowid, id, harness FROM sessions n WHERE updated_at <= ?
		AND NOT EXISTS (SELECT 1 FROM retained_sessions rs WHERE rs.id = n.id AND rs.harness = n.harness) LIMIT ?`,
		ms(now.Add(-s.opts.IdentityTTL)), limit)
	if err != nil {
		return 0, PruneStats{}, err
	}
	var rowids []string
	var refs []SessionRef
	for rows.Next() {
		var rowid int64
		var r SessionRef
		if err := rows.Scan(&rowid, &r.ID, &r.Harness); err != nil {
			rows.Close()
			return 0, PruneStats{}, err
		}
		rowids, refs = append(rowids, fmt.Sprint(rowid)), append(refs, r)
	}
	if err := rows.Close(); err != nil || len(rowids) == 0 {
		return 0, PruneStats{}, err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE rowid IN (`+strings.Join(rowids, ",")+`)`)
	return len(rowids), PruneStats{Forgotten: refs}, err
}

// CloseIdleSessions closes every open retained session that has had no
// live run, and no turn started or ended, for SessionIdle (counted from
// its creation when it has no turn yet), and returns their ids. It does
// nothing when SessionIdle is negative. The check and the close happen in
// one transaction per batch, so a turn admitted meanwhile keeps its
// session open; the caller ends whatever still serves a closed session.
func (s *Store) CloseIdleSessions(ctx context.Context) ([]string, error) {
	if s.opts.SessionIdle < 0 {
		return nil, nil
	}
	now := s.opts.Now()
	cutoff := ms(now.Add(-s.opts.SessionIdle))
	var closed []string
	for {
		var ids []string
		err := s.tx(ctx, func(tx *sql.Tx) error {
			var err error
			ids, err = queryStrings(ctx, tx, `SELECT id FROM retained_sessions s WHERE closed_at = 0 AND created_at <= ?
				AND NOT EXISTS (SELECT 1 FROM retained_turns t JOIN runs r ON r.id = t.run_id WHERE t.session_id = s.id
					AND (r.status = 'running' OR t.created_at > ? OR r.started_at > ? OR r.ended_at > ?))
				LIMIT ?`, cutoff, cutoff, cutoff, cutoff, s.opts.PruneBatch)
			if err != nil || len(ids) == 0 {
				return err
			}
			in, args := inList(ids)
			_, err = tx.ExecContext(ctx, `UPDATE retained_sessions SET closed_at = ? WHERE id IN (`+in+`)`,
				append([]any{ms(now)}, args...)...)
			return err
		})
		if err != nil {
			return closed, fmt.Errorf("close idle sessions: %w", err)
		}
		closed = append(closed, ids...)
		if len(ids) < s.opts.PruneBatch {
			return closed, nil
		}
	}
}

// queryStrings returns the first column of a query's rows.
func queryStrings(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// execCount runs a statement and returns the rows it changed.
func execCount(ctx context.Context, tx *sql.Tx, q string, args ...any) (int, error) {
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// inList returns n placeholders and the values as arguments.
func inList(vals []string) (string, []any) {
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	return strings.TrimSuffix(strings.Repeat("?,", len(vals)), ","), args
}
