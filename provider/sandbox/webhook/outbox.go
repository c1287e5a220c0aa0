package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// The states of a delivery in the outbox.
const (
	statePending   = 0
	stateDelivered = 1
	stateAbandoned = 2
)

const schema = `
CREATE TABLE IF NOT EXISTS delivery (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	event_id  TEXT    NOT NULL,
	url       TEXT    NOT NULL,
	body      BLOB    NOT NULL,
	created   INTEGER NOT NULL,           -- unix ns: when the event was recorded
	next_at   INTEGER NOT NULL,           -- unix ns: no attempt before
	lease     INTEGER NOT NULL DEFAULT 0, -- unix ns: an attempt holds it until
	attempts  INTEGER NOT NULL DEFAULT 0,
	state     INTEGER NOT NULL DEFAULT 0, -- 0 pending, 1 delivered, 2 abandoned
	done_at   INTEGER NOT NULL DEFAULT 0,
	last_status INTEGER NOT NULL DEFAULT 0,
	last_error  TEXT    NOT NULL DEFAULT '',
	UNIQUE (event_id, url)
);
CREATE INDEX IF NOT EXISTS delivery_due ON delivery (state, next_at);
`

// outbox is the SQLite file of deliveries.
type outbox struct {
	db *sql.DB
}

// delivery is one pending delivery an attempt holds.
type delivery struct {
	seq      int64
	id, url  string
	body     []byte
	attempts int
	created  time.Time
}

// openOutbox opens (creating) the outbox at path, mode 0600.
func openOutbox(ctx context.Context, path string) (*outbox, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("webhook outbox: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("webhook outbox: %w", err)
	}
	f.Close()
	// synchronous(NORMAL) for what may be lost to a power cut at the cost
	// of a duplicate (an attempt's outcome, a lease); add commits with
	// FULL, so that a recorded event survives one.
	db, err := sql.Open("sqlite", "file:"+path+
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("webhook outbox: %w", err)
	}
	// One connection: this process's writers queue here, not on SQLite's
	// busy handler; other processes wait on that (busy_timeout).
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("webhook outbox: %w", err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			db.Close()
			return nil, fmt.Errorf("webhook outbox: %w", err)
		}
	}
	return &outbox{db: db}, nil
}

func (o *outbox) close() error { return o.db.Close() }

func ns(t time.Time) int64 { return t.UnixNano() }

// add commits the deliveries of one event body to urls, due now, synced
// to the disk (synchronous FULL) before it returns.
func (o *outbox) add(ctx context.Context, id string, body []byte, urls []string, now time.Time) error {
	// The one connection, held so that no other statement runs under FULL
	// or this one under NORMAL.
	conn, err := o.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = FULL`); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = NORMAL`)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, u := range urls {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO delivery (event_id, url, body, created, next_at) VALUES (?, ?, ?, ?, ?)`,
			id, u, body, ns(now), ns(now)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// in is "(?, ?, ...)" for n values, and the values of urls.
func in(urls []string) (string, []any) {
	args := make([]any, len(urls))
	for i, u := range urls {
		args[i] = u
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", len(urls)), ", ") + ")", args
}

// claim leases up to n deliveries to urls that are due at now, until
// until.
func (o *outbox) claim(ctx context.Context, urls []string, now, until time.Time, n int) ([]delivery, error) {
	list, args := in(urls)
	rows, err := o.db.QueryContext(ctx, `UPDATE delivery SET lease = ? WHERE seq IN (
		SELECT seq FROM delivery WHERE state = 0 AND next_at <= ? AND lease <= ? AND url IN `+list+`
		ORDER BY next_at LIMIT ?) RETURNING seq, event_id, url, body, attempts, created`,
		append(append([]any{ns(until), ns(now), ns(now)}, args...), n)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []delivery
	for rows.Next() {
		var d delivery
		var created int64
		if err := rows.Scan(&d.seq, &d.id, &d.url, &d.body, &d.attempts, &created); err != nil {
			return nil, err
		}
		d.created = time.Unix(0, created)
		out = append(out, d)
	}
	return out, rows.Err()
}

// delivered marks a delivery done after its attempt at now. Its endpoint
// answered, so the deliveries to it that wait out a back-off of failed
// attempts become due now: an endpoint back from an outage gets what it
// missed at once, not at each delivery's next back-off step (up to the
// cap, a minute, later).
func (o *outbox) delivered(ctx context.Context, seq int64, status int, now time.Time) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE delivery SET state = 1, done_at = ?, lease = 0, attempts = attempts + 1,
		last_status = ?, last_error = '' WHERE seq = ?`, ns(now), status, seq); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE delivery SET next_at = ? WHERE state = 0 AND attempts > 0 AND next_at > ?
		AND url = (SELECT url FROM delivery WHERE seq = ?)`, ns(now), ns(now), seq); err != nil {
		return err
	}
	return tx.Commit()
}

// failed records a failed attempt: the next one at next, or none when
// abandon.
func (o *outbox) failed(ctx context.Context, seq int64, status int, why string, next time.Time, abandon bool) error {
	state, done := statePending, int64(0)
	if abandon {
		state, done = stateAbandoned, ns(next)
	}
	_, err := o.db.ExecContext(ctx, `UPDATE delivery SET state = ?, done_at = ?, next_at = ?, lease = 0,
		attempts = attempts + 1, last_status = ?, last_error = ? WHERE seq = ?`, state, done, ns(next), status, why, seq)
	return err
}

// release ends the lease of an attempt that was not made.
func (o *outbox) release(ctx context.Context, seq int64) error {
	_, err := o.db.ExecContext(ctx, `UPDATE delivery SET lease = 0 WHERE seq = ?`, seq)
	return err
}

// nextDue is when the next delivery to urls may be attempted (zero:
// none is pending).
func (o *outbox) nextDue(ctx context.Context, urls []string) (time.Time, error) {
	list, args := in(urls)
	var next sql.NullInt64
	err := o.db.QueryRowContext(ctx, `SELECT min(max(next_at, lease)) FROM delivery WHERE state = 0 AND url IN `+list, args...).Scan(&next)
	if err != nil || !next.Valid {
		return time.Time{}, err
	}
	return time.Unix(0, next.Int64), nil
}

// prune drops deliveries done before before.
func (o *outbox) prune(ctx context.Context, before time.Time) error {
	_, err := o.db.ExecContext(ctx, `DELETE FROM delivery WHERE state != 0 AND done_at < ?`, ns(before))
	return err
}

// EndpointState is what an outbox holds for one endpoint.
type EndpointState struct {
	// URL is the endpoint, as Redact names it.
	URL string `json:"url"`
	// Pending deliveries wait for an attempt; Delivered and Abandoned are
	// those kept (Options.Keep).
	Pending   int `json:"pending"`
	Delivered int `json:"delivered"`
	Abandoned int `json:"abandoned"`
	// Attempts is the attempts of the deliveries kept.
	Attempts int `json:"attempts"`
	// OldestPending is when the oldest pending event was recorded.
	OldestPending time.Time `json:"oldestPending,omitzero"`
	// LastError is the last failed attempt's of a pending delivery.
	LastError string `json:"lastError,omitempty"`
}

// states reads the outbox's state by endpoint; urls, when set, limit it.
func (o *outbox) states(ctx context.Context, urls []string) ([]EndpointState, error) {
	q := `SELECT url, sum(state = 0), sum(state = 1), sum(state = 2), sum(attempts),
		coalesce(min(CASE WHEN state = 0 THEN created END), 0),
		coalesce((SELECT last_error FROM delivery d2 WHERE d2.url = d.url AND d2.state = 0 AND d2.last_error != ''
			ORDER BY d2.done_at DESC, d2.seq DESC LIMIT 1), '')
		FROM delivery d`
	var args []any
	if len(urls) > 0 {
		var list string
		list, args = in(urls)
		q += ` WHERE url IN ` + list
	}
	rows, err := o.db.QueryContext(ctx, q+` GROUP BY url ORDER BY url`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []EndpointState
	for rows.Next() {
		var s EndpointState
		var oldest int64
		if err := rows.Scan(&s.URL, &s.Pending, &s.Delivered, &s.Abandoned, &s.Attempts, &oldest, &s.LastError); err != nil {
			return nil, err
		}
		s.URL = Redact(s.URL)
		if oldest != 0 {
			s.OldestPending = time.Unix(0, oldest).UTC()
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// ReadState reads the outbox file at path by endpoint, without sending
// (an outbox that does not exist holds nothing).
func ReadState(ctx context.Context, path string) ([]EndpointState, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	o, err := openOutbox(ctx, path)
	if err != nil {
		return nil, err
	}
	defer o.close()
	st, err := o.states(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("webhook outbox: %w", err)
	}
	return st, nil
}
