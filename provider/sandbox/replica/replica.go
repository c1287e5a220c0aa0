// Package replica keeps boxes' events outside the boxes: each box's
// bridge ships its runs' events as they are stored (wire.ReplicaBatch),
// and the replica keeps them in a SQLite file beside the broker, past the
// box's loss and a restart of the process that holds it. A batch is
// idempotent by sequence number: events the replica holds are skipped,
// and one that would leave a gap is refused with where to resume.
//
// Bounds are explicit: Options.MaxRunBytes per run (a run past it keeps
// its newest events), Options.MaxBoxBytes per box (its oldest runs go
// first) and Options.Retention after a run's last batch.
//
// Beside the box's events, the replica keeps the turns the caller started
// in the box (Turn, recorded by the caller, never the box): each turn's
// prompt and session, which with the run's events is a session's history
// when it continues on another box. A box keeps at most MaxBoxRuns turns
// of at most MaxPromptBytes each, for the retention.
package replica

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Defaults of Options.
const (
	DefaultMaxRunBytes   = 32 << 20
	DefaultMaxBoxBytes   = 256 << 20
	DefaultMaxTotalBytes = 1 << 30
	DefaultMaxBoxRuns    = 10000
	DefaultRetention     = 7 * 24 * time.Hour
	// MaxBatchEvents bounds the events of one batch.
	MaxBatchEvents = 10000
	// eventOverhead is what an event costs beside its data (its row and
	// keys), counted against the bounds: one-byte events fill them too.
	eventOverhead = 64
)

// Statuses a batch may name: the bridge's run statuses.
var statuses = map[string]bool{"running": true, "done": true, "error": true, "cancelled": true}

// maxSessionID bounds a batch's session id.
const maxSessionID = 128

// Options bound what a Store keeps: a run past MaxRunBytes keeps its
// newest events; a box past MaxBoxBytes or MaxBoxRuns, and the replica
// past MaxTotalBytes, lose their oldest runs first. Each event counts its
// data and a fixed overhead.
type Options struct {
	MaxRunBytes, MaxBoxBytes, MaxTotalBytes int64
	MaxBoxRuns                              int
	Retention                               time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Observe, when set, is told each batch committed: the box, the run
	// and the last event the replica now holds of it (a lag's measure).
	Observe func(box, run string, last int64)
}

// Event is a run's event as the replica holds it.
type Event struct {
	Seq  int64
	Data json.RawMessage
}

// GapError is a batch that starts past the last event held of its run.
type GapError struct {
	Run  string
	Last int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("replica: run %s: a batch past its last event %d", e.Run, e.Last)
}

// ErrNotFound is a run the replica does not hold.
var ErrNotFound = errors.New("replica: no such run")

// Store is a replica file. It is safe for concurrent use.
type Store struct {
	o  Options
	db *sql.DB
	mu sync.Mutex // serialises writes
}

// FileName is the replica's file in its directory.
const FileName = "replica.db"

const schema = `
CREATE TABLE IF NOT EXISTS runs (box TEXT NOT NULL, run TEXT NOT NULL, session TEXT NOT NULL, status TEXT NOT NULL,
	last_seq INTEGER NOT NULL, first_seq INTEGER NOT NULL, bytes INTEGER NOT NULL, updated INTEGER NOT NULL,
	PRIMARY KEY (box, run)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_updated ON runs (updated);
CREATE TABLE IF NOT EXISTS events (box TEXT NOT NULL, run TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
	PRIMARY KEY (box, run, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turns (box TEXT NOT NULL, run TEXT NOT NULL, run_box TEXT NOT NULL, session TEXT NOT NULL,
	turn TEXT NOT NULL, execution TEXT NOT NULL, prompt TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (box, run)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS turns_at ON turns (at);`

// Open opens (creating) the replica in dir, of mode 0700, its file 0600.
func Open(ctx context.Context, dir string, o Options) (*Store, error) {
	if o.MaxRunBytes <= 0 {
		o.MaxRunBytes = DefaultMaxRunBytes
	}
	if o.MaxBoxBytes <= 0 {
		o.MaxBoxBytes = DefaultMaxBoxBytes
	}
	if o.MaxTotalBytes <= 0 {
		o.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if o.MaxBoxRuns <= 0 {
		o.MaxBoxRuns = DefaultMaxBoxRuns
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	f.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	db.SetMaxOpenConns(4)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("replica: %w", err)
	}
	return &Store{o: o, db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Append adds b's events of box's run, skipping those held; a batch that
// starts past the last event held is a *GapError. It returns what the
// replica holds of the run after it.
func (s *Store) Append(ctx context.Context, box, run string, b wire.ReplicaBatch) (wire.ReplicaRun, error) {
	if box == "" || run == "" || b.First < 1 {
		return wire.ReplicaRun{}, fmt.Errorf("replica: a batch needs a box, a run and a first sequence of 1 or more")
	}
	if len(b.Events) > MaxBatchEvents || len(b.SessionID) > maxSessionID || (b.Status != "" && !statuses[b.Status]) {
		return wire.ReplicaRun{}, &BatchError{Reason: fmt.Sprintf("at most %d events, a session id of at most %d bytes, a run status", MaxBatchEvents, maxSessionID)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return wire.ReplicaRun{}, fmt.Errorf("replica: %w", err)
	}
	defer tx.Rollback()
	r := wire.ReplicaRun{ID: run}
	var first, size int64
	err = tx.QueryRowContext(ctx, `SELECT session, status, last_seq, first_seq, bytes FROM runs WHERE box = ? AND run = ?`, box, run).
		Scan(&r.SessionID, &r.Status, &r.LastSeq, &first, &size)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		first = 1
	case err != nil:
		return wire.ReplicaRun{}, fmt.Errorf("replica: %w", err)
	}
	if b.First > r.LastSeq+1 {
		return r, &GapError{Run: run, Last: r.LastSeq}
	}
	for i, e := range b.Events {
		seq := b.First + int64(i)
		if seq <= r.LastSeq {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (box, run, seq, data) VALUES (?, ?, ?, ?)`, box, run, seq, []byte(e)); err != nil {
			return wire.ReplicaRun{}, fmt.Errorf("replica: %w", err)
		}
		r.LastSeq, size = seq, size+int64(len(e))+eventOverhead
	}
	if size > s.o.MaxRunBytes {
		// Keep the newest events that fit: one range delete of the rest.
		var keepFrom int64
		err := tx.QueryRowContext(ctx, `SELECT COALESCE(MIN(seq), 0) FROM (SELECT seq, SUM(length(data) + ?) OVER (ORDER BY seq DESC) AS total
			FROM events WHERE box = ? AND run = ?) WHERE total <= ?`, eventOverhead, box, run, s.o.MaxRunBytes).Scan(&keepFrom)
		if err != nil {
			return wire.ReplicaRun{}, fmt.Errorf("replica: %w", err)
		}
		if keepFrom == 0 {
			keepFrom = r.LastSeq
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE box = ? AND run = ? AND seq < ?`, box, run, keepFrom); err != nil {
			return wire.ReplicaRun{}, fmt.Errorf("replica: %w", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(length(data) + ?), 0) FROM events WHERE box = ? AND run = ?`, eventOverhead, box, run).Scan(&size); err != nil {
			return wire.ReplicaRun{}, fmt.Errorf("replica: %w", err)
		}
		first = keepFrom
	}
	if b.SessionID != "" {
		r.SessionID = b.SessionID
	}
	if b.Status != "" {
		r.Status = b.Status
	}
	r.Updated = s.o.Now().UnixMilli()
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs (box, run, session, status, last_seq, first_seq, bytes, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (box, run) DO UPDATE SET session = excluded.session, status = excluded.status, last_seq = excluded.last_seq,
		first_seq = excluded.first_seq, bytes = excluded.bytes, updated = excluded.updated`,
		box, run, r.SessionID, r.Status, r.LastSeq, first, size+int64(len(r.SessionID))+eventOverhead, r.Updated); err != nil {
		return wire.ReplicaRun{}, fmt.Errorf("replica: %w", err)
	}
	if err := s.boundBox(ctx, tx, box, run); err != nil {
		return wire.ReplicaRun{}, err
	}
	if err := tx.Commit(); err != nil {
		return wire.ReplicaRun{}, fmt.Errorf("replica: %w", err)
	}
	if s.o.Observe != nil {
		s.o.Observe(box, run, r.LastSeq)
	}
	return r, nil
}

// boundBox drops the oldest runs but box's run keep while box holds more
// than MaxBoxBytes or MaxBoxRuns, then the oldest runs of any box while
// the replica holds more than MaxTotalBytes.
func (s *Store) boundBox(ctx context.Context, tx *sql.Tx, box, keep string) error {
	var total, runs int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(bytes), 0), COUNT(*) FROM runs WHERE box = ?`, box).Scan(&total, &runs); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	for total > s.o.MaxBoxBytes || runs > int64(s.o.MaxBoxRuns) {
		var run string
		var n int64
		err := tx.QueryRowContext(ctx, `SELECT run, bytes FROM runs WHERE box = ? AND run != ? ORDER BY updated LIMIT 1`, box, keep).Scan(&run, &n)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return fmt.Errorf("replica: %w", err)
		}
		if err := deleteRun(ctx, tx, box, run); err != nil {
			return err
		}
		total, runs = total-n, runs-1
	}
	var all int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(bytes), 0) FROM runs`).Scan(&all); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	for all > s.o.MaxTotalBytes {
		var b, run string
		var n int64
		err := tx.QueryRowContext(ctx, `SELECT box, run, bytes FROM runs WHERE NOT (box = ? AND run = ?) ORDER BY updated LIMIT 1`, box, keep).Scan(&b, &run, &n)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("replica: %w", err)
		}
		if err := deleteRun(ctx, tx, b, run); err != nil {
			return err
		}
		all -= n
	}
	return nil
}

// BatchError is a batch the replica refuses as malformed.
type BatchError struct{ Reason string }

func (e *BatchError) Error() string { return "replica: a malformed batch: want " + e.Reason }

func deleteRun(ctx context.Context, tx *sql.Tx, box, run string) error {
	for _, q := range []string{`DELETE FROM events WHERE box = ? AND run = ?`, `DELETE FROM runs WHERE box = ? AND run = ?`} {
		if _, err := tx.ExecContext(ctx, q, box, run); err != nil {
			return fmt.Errorf("replica: %w", err)
		}
	}
	return nil
}

// Runs lists what the replica holds of box's runs, oldest first.
func (s *Store) Runs(ctx context.Context, box string) ([]wire.ReplicaRun, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run, session, status, last_seq, updated FROM runs WHERE box = ? ORDER BY updated, run LIMIT ?`, box, s.o.MaxBoxRuns)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	defer rows.Close()
	out := []wire.ReplicaRun{}
	for rows.Next() {
		var r wire.ReplicaRun
		if err := rows.Scan(&r.ID, &r.SessionID, &r.Status, &r.LastSeq, &r.Updated); err != nil {
			return nil, fmt.Errorf("replica: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Events returns up to limit events of box's run after seq after; a run
// the replica does not hold is ErrNotFound.
func (s *Store) Events(ctx context.Context, box, run string, after int64, limit int) ([]Event, error) {
	var last int64
	err := s.db.QueryRowContext(ctx, `SELECT last_seq FROM runs WHERE box = ? AND run = ?`, box, run).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, data FROM events WHERE box = ? AND run = ? AND seq > ? ORDER BY seq LIMIT ?`, box, run, after, limit)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		var data []byte
		if err := rows.Scan(&e.Seq, &data); err != nil {
			return nil, fmt.Errorf("replica: %w", err)
		}
		e.Data = data
		out = append(out, e)
	}
	return out, rows.Err()
}

// Prune drops the runs whose last batch is older than the retention, and
// reports how many.
func (s *Store) Prune(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.o.Now().Add(-s.o.Retention).UnixMilli()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("replica: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT box, run FROM runs WHERE updated < ?`, before)
	if err != nil {
		return 0, fmt.Errorf("replica: %w", err)
	}
	var old [][2]string
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			rows.Close()
			return 0, fmt.Errorf("replica: %w", err)
		}
		old = append(old, k)
	}
	rows.Close()
	for _, k := range old {
		if err := deleteRun(ctx, tx, k[0], k[1]); err != nil {
			return 0, err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM turns WHERE at < ?`, before); err != nil {
		return 0, fmt.Errorf("replica: %w", err)
	}
	return len(old), tx.Commit()
}

// Turn is a turn of a box's sessions as the caller started it: the
// prompt the box's events do not hold, so that a session can continue on
// another box (its history: each turn's prompt and the answer its run's
// events hold). The caller records it, never the box. RunBox is the box
// whose replica holds the run's events: a box that continued a lost
// box's sessions also lists the turns that ran before, on theirs.
type Turn struct {
	Run         string `json:"run"`
	RunBox      string `json:"runBox,omitempty"`
	SessionID   string `json:"sessionId"`
	TurnID      string `json:"turnId,omitempty"`
	ExecutionID string `json:"executionId,omitempty"`
	Prompt      string `json:"prompt"`
	// At is when the turn started (unix ms).
	At int64 `json:"at"`
}

// MaxPromptBytes bounds a turn's prompt the replica keeps.
const MaxPromptBytes = 1 << 20

// NoteTurn records a turn of box (t.RunBox empty: box itself), once per
// run: the first record of a run stands.
func (s *Store) NoteTurn(ctx context.Context, box string, t Turn) error {
	if t.RunBox == "" {
		t.RunBox = box
	}
	if box == "" || t.Run == "" || t.SessionID == "" || len(t.SessionID) > maxSessionID || len(t.TurnID) > maxSessionID || len(t.ExecutionID) > maxSessionID || len(t.Prompt) > MaxPromptBytes {
		return &BatchError{Reason: fmt.Sprintf("a turn with a box, a run, a session id of at most %d bytes and a prompt of at most %d", maxSessionID, MaxPromptBytes)}
	}
	if t.At == 0 {
		t.At = s.o.Now().UnixMilli()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n, held int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(CASE WHEN run = ? THEN 1 END) FROM turns WHERE box = ?`, t.Run, box).Scan(&n, &held); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	if held > 0 {
		return nil // a retry of the turn: its first record stands
	}
	if n >= s.o.MaxBoxRuns {
		// The oldest turn goes, as the oldest run does.
		if _, err := s.db.ExecContext(ctx, `DELETE FROM turns WHERE box = ? AND run = (SELECT run FROM turns WHERE box = ? ORDER BY at, run LIMIT 1)`, box, box); err != nil {
			return fmt.Errorf("replica: %w", err)
		}
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO turns (box, run, run_box, session, turn, execution, prompt, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (box, run) DO NOTHING`, box, t.Run, t.RunBox, t.SessionID, t.TurnID, t.ExecutionID, t.Prompt, t.At); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	return nil
}

// Turns lists the turns recorded of box, oldest first.
func (s *Store) Turns(ctx context.Context, box string) ([]Turn, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run, run_box, session, turn, execution, prompt, at FROM
		(SELECT * FROM turns WHERE box = ? ORDER BY at DESC, run DESC LIMIT ?) ORDER BY at, run`, box, s.o.MaxBoxRuns)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	defer rows.Close()
	out := []Turn{}
	for rows.Next() {
		var t Turn
		if err := rows.Scan(&t.Run, &t.RunBox, &t.SessionID, &t.TurnID, &t.ExecutionID, &t.Prompt, &t.At); err != nil {
			return nil, fmt.Errorf("replica: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
