package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrNotFound is returned for a run, cancellation or session the store
// does not hold.
var ErrNotFound = errors.New("not found")

// ErrTerminal is returned when appending to a run that already ended.
var ErrTerminal = errors.New("run is terminal")

// Defaults of Options.
const (
	DefaultMaxEvents   = 10000
	DefaultMaxBytes    = 32 << 20
	DefaultReplayTTL   = time.Hour
	DefaultIdentityTTL = 24 * time.Hour
	DefaultSessionIdle = 24 * time.Hour
	DefaultPruneBatch  = 500
)

// Options tune retention. The zero value means every default.
type Options struct {
	// MaxEvents is the most events kept per run (default 10,000).
	MaxEvents int64
	// MaxBytes is the most event bytes kept per run (default 32 MiB).
	MaxBytes int64
	// ReplayTTL is how long all of a run's events stay replayable after
	// it ends (default 1 h: the store is durable, and a client reads a
	// result or reconnects minutes later). After it the run keeps its
	// result until its identity expires (see KeptResultEvents).
	ReplayTTL time.Duration
	// IdentityTTL is how long a run id stays bound to its request
	// (default 24 h).
	IdentityTTL time.Duration
	// SessionIdle is how long an open retained session may go without a
	// turn before CloseIdleSessions closes it (default 24 h; negative:
	// never).
	SessionIdle time.Duration
	// PruneBatch is the most rows one Prune statement selects, so that
	// no prune transaction holds the write lock long (default 500).
	PruneBatch int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnChange, when set, is told the id of a run whose events or status
	// changed, once the change is committed (a replica's shipper). It
	// must not block.
	OnChange func(runID string)
}

func (o Options) withDefaults() Options {
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.ReplayTTL <= 0 {
		o.ReplayTTL = DefaultReplayTTL
	}
	if o.IdentityTTL <= 0 {
		o.IdentityTTL = DefaultIdentityTTL
	}
	if o.SessionIdle == 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	if o.PruneBatch <= 0 {
		o.PruneBatch = DefaultPruneBatch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Store is the durable event log. It is safe for concurrent use.
type Store struct {
	opts Options
	mu   sync.Mutex // serialises writes on w
	w    *sql.DB    // one connection: the writer
	r    *sql.DB    // readers

	// Statements of the hot paths, prepared once (parsing one costs about
	// as much as running it): an append's run lookup, segment insert and
	// run update on w, the event read on r.
	appendRun, appendSegment, appendUpdate, readEvents *sql.Stmt

	// A finished run's checkpoint runs beside the run's delivery, not in
	// it: Finish asks (ckpt, one pending ask at most) and the
	// checkpointer goroutine does it; Close stops it (quit) and waits
	// for it (ckptDone).
	ckpt, quit, ckptDone chan struct{}
	closeOnce            sync.Once

	stats stats
}

// FileName is the database file's name inside the data directory.
const FileName = "bridge.db"

// Open opens (creating if needed) the store in dir, with the directory
// mode 0700 and the database files mode 0600.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	f.Close()
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	// Readers map the file and keep a larger page cache: a replay reads
	// a run's segments, which span overflow pages, without copying each
	// page through SQLite's read calls.
	r, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)&_pragma=mmap_size(268435456)&_pragma=cache_size(-16384)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	r.SetMaxOpenConns(8)
	s := &Store{opts: opts.withDefaults(), w: w, r: r,
		ckpt: make(chan struct{}, 1), quit: make(chan struct{}), ckptDone: make(chan struct{})}
	go s.checkpointer()
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.Close()
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	return s, nil
}

// prepare prepares the statements of the hot paths.
func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		db   *sql.DB
		stmt **sql.Stmt
		sql  string
	}{
		{s.w, &s.appendRun, appendRunSQL},
		{s.w, &s.appendSegment, appendSegmentSQL},
		{s.w, &s.appendUpdate, appendUpdateSQL},
		{s.r, &s.readEvents, readEventsSQL},
	} {
		st, err := p.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return err
		}
		*p.stmt = st
	}
	return nil
}

// Checkpoint copies the committed pages of the write-ahead log into the
// database file, as far as no reader holds them back (a passive
// checkpoint, which waits for nobody), so that the log a start after a
// crash must read stays short. SQLite does the same on its own only once
// the log holds about 4 MB.
func (s *Store) Checkpoint(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return fmt.Errorf("checkpoint store: %w", err)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.quit) })
	<-s.ckptDone
	var errs []error
	for _, st := range []*sql.Stmt{s.appendRun, s.appendSegment, s.appendUpdate, s.readEvents} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(append(errs, s.r.Close(), s.w.Close())...)
}

// Options returns the store's effective options.
func (s *Store) Options() Options { return s.opts }

const schema = `
CREATE TABLE IF NOT EXISTS runs (
	id TEXT PRIMARY KEY,
	digest TEXT NOT NULL,
	harness TEXT NOT NULL,
	model TEXT NOT NULL,
	provider TEXT NOT NULL DEFAULT '',
	environment_id TEXT NOT NULL DEFAULT '',
	session_id TEXT NOT NULL DEFAULT '',
	execution_id TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL,
	err_type TEXT NOT NULL DEFAULT '',
	err_message TEXT NOT NULL DEFAULT '',
	started_at INTEGER NOT NULL,
	ended_at INTEGER NOT NULL DEFAULT 0,
	cancel_requested_at INTEGER NOT NULL DEFAULT 0,
	lifetime_expires_at INTEGER NOT NULL DEFAULT 0,
	last_seq INTEGER NOT NULL DEFAULT 0,
	first_seq INTEGER NOT NULL DEFAULT 1,
	retained_events INTEGER NOT NULL DEFAULT 0,
	retained_bytes INTEGER NOT NULL DEFAULT 0,
	replay_expires_at INTEGER NOT NULL DEFAULT 0,
	replay_expired INTEGER NOT NULL DEFAULT 0,
	identity_expires_at INTEGER NOT NULL DEFAULT 0,
	pgid INTEGER NOT NULL DEFAULT 0,
	marker TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status);
CREATE INDEX IF NOT EXISTS runs_replay ON runs(replay_expired, replay_expires_at);
CREATE INDEX IF NOT EXISTS runs_identity ON runs(identity_expires_at);
CREATE TABLE IF NOT EXISTS segments (
	run_id TEXT NOT NULL,
	first_seq INTEGER NOT NULL,
	last_seq INTEGER NOT NULL,
	data BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS segments_run ON segments(run_id, last_seq);
CREATE TABLE IF NOT EXISTS cancellations (
	operation_id TEXT PRIMARY KEY,
	digest TEXT NOT NULL,
	http_status INTEGER NOT NULL,
	body BLOB NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
	id TEXT NOT NULL,
	harness TEXT NOT NULL,
	native_id TEXT NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (id, harness)
);
CREATE INDEX IF NOT EXISTS cancellations_created ON cancellations(created_at);
`

// allSchema is every table and index of the store.
const allSchema = schema + retainedSchema + interactionSchema + continueSchema + activitySchema + branchSchema + exactSchema + harnessSchema

// schemaVersion stamps a database whose schema is allSchema (its
// user_version): a checksum of the schema's text, so that a changed
// schema is applied without anyone numbering versions.
var schemaVersion = int64(crc32.ChecksumIEEE([]byte(allSchema))&0x7fffffff) | 1

// migrate applies allSchema (every statement of which is idempotent)
// unless the database is stamped with it already: parsing it is most of
// an open's work.
func (s *Store) migrate(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var have int64
	if err := s.w.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&have); err != nil {
		return fmt.Errorf("migrate store: %w", err)
	}
	if have == schemaVersion {
		return nil
	}
	if _, err := s.w.ExecContext(ctx, allSchema+fmt.Sprintf("PRAGMA user_version = %d;", schemaVersion)); err != nil {
		return fmt.Errorf("migrate store: %w", err)
	}
	return nil
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// tx runs fn in a write transaction under the writer lock.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	defer s.stats.write.since(time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Now is the store's clock (Options.Now): the time its records are
// stamped with, which the engine stamps runs with too.
func (s *Store) Now() time.Time { return s.opts.Now() }
