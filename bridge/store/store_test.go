package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func events(n int, prefix string) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func seqs(evs []Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func TestStore_AppendEventsFinish(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{})
	r, created, err := s.CreateRun(ctx, Run{ID: "r1", Digest: "sha256:a", Harness: "claude-code", Model: "sonnet"})
	if err != nil || !created || r.Status != StatusRunning {
		t.Fatalf("CreateRun = %+v, %v, %v, want a new running run", r, created, err)
	}
	again, created, err := s.CreateRun(ctx, Run{ID: "r1", Digest: "sha256:b"})
	if err != nil || created || again.Digest != "sha256:a" {
		t.Fatalf("CreateRun(existing) = %+v, %v, %v, want the stored run", again, created, err)
	}
	if last, err := s.Append(ctx, "r1", events(3, "a")); err != nil || last != 3 {
		t.Fatalf("Append = %d, %v, want 3", last, err)
	}
	if last, err := s.Append(ctx, "r1", events(2, "b")); err != nil || last != 5 {
		t.Fatalf("Append = %d, %v, want 5", last, err)
	}
	got, err := s.Events(ctx, "r1", 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{3, 4, 5}, seqs(got)); diff != "" {
		t.Errorf("Events(after 2) seqs (-want +got):\n%s", diff)
	}
	if string(got[0].Data) != "a-2" || string(got[2].Data) != "b-1" {
		t.Errorf("Events data = %q..%q, want a-2..b-1", got[0].Data, got[2].Data)
	}
	fin, err := s.Finish(ctx, "r1", Finish{Status: StatusError, ErrType: "x", ErrMessage: "boom"}, events(1, "z"))
	if err != nil {
		t.Fatal(err)
	}
	if fin.LastSeq != 6 || !fin.Terminal() || fin.EndedAt.IsZero() || fin.ReplayExpiresAt.IsZero() {
		t.Errorf("Finish = %+v, want terminal with last seq 6 and expiry", fin)
	}
	if _, err := s.Append(ctx, "r1", events(1, "late")); !errors.Is(err, ErrTerminal) {
		t.Errorf("Append after Finish = %v, want ErrTerminal", err)
	}
	if _, err := s.Finish(ctx, "r1", Finish{Status: StatusDone}, nil); !errors.Is(err, ErrTerminal) {
		t.Errorf("Finish twice = %v, want ErrTerminal", err)
	}
	if _, err := s.Append(ctx, "nope", events(1, "x")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Append(unknown run) = %v, want ErrNotFound", err)
	}
	if _, err := s.GetRun(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun(unknown) = %v, want ErrNotFound", err)
	}
}

func TestStore_Retention(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		appends   []int // batch sizes, each event 10 bytes ("e-0000000x" style)
		wantFirst int64
		wantCount int64
	}{
		{"under limits", Options{MaxEvents: 10, MaxBytes: 1000}, []int{5}, 1, 5},
		{"count in one batch", Options{MaxEvents: 4, MaxBytes: 1000}, []int{10}, 7, 4},
		{"count across batches", Options{MaxEvents: 4, MaxBytes: 1000}, []int{3, 3}, 3, 4},
		{"bytes", Options{MaxEvents: 100, MaxBytes: 35}, []int{2, 2, 2}, 4, 3},
		{"one event over bytes is kept", Options{MaxEvents: 100, MaxBytes: 5}, []int{3}, 3, 1},
		{"count across segments", Options{MaxEvents: 300, MaxBytes: 1 << 20}, []int{600}, 301, 300},
		{"count at a segment edge", Options{MaxEvents: 344, MaxBytes: 1 << 20}, []int{600}, 257, 344},
		{"bytes across segments", Options{MaxEvents: 10000, MaxBytes: 3000}, []int{100, 500, 7}, 308, 300},
		{"many small batches", Options{MaxEvents: 50, MaxBytes: 1 << 20}, []int{7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, 21, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t, t.TempDir(), tt.opts)
			if _, _, err := s.CreateRun(ctx, Run{ID: "r", Digest: "d", Harness: "h", Model: "m"}); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, b := range tt.appends {
				batch := make([][]byte, b)
				for i := range batch {
					batch[i] = []byte(fmt.Sprintf("ev-%07d", n))
					n++
				}
				if _, err := s.Append(ctx, "r", batch); err != nil {
					t.Fatal(err)
				}
			}
			r, err := s.GetRun(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if r.FirstSeq != tt.wantFirst || r.RetainedEvents != tt.wantCount || r.LastSeq != int64(n) {
				t.Errorf("run = first %d count %d last %d, want first %d count %d last %d",
					r.FirstSeq, r.RetainedEvents, r.LastSeq, tt.wantFirst, tt.wantCount, n)
			}
			evs, _ := s.Events(ctx, "r", 0, 1000)
			if int64(len(evs)) != tt.wantCount || evs[0].Seq != tt.wantFirst {
				t.Errorf("Events = %v, want %d events from %d", seqs(evs), tt.wantCount, tt.wantFirst)
			}
			for i, ev := range evs {
				if want := fmt.Sprintf("ev-%07d", ev.Seq-1); ev.Seq != tt.wantFirst+int64(i) || string(ev.Data) != want {
					t.Fatalf("event %d = %d %q, want %d %q", i, ev.Seq, ev.Data, tt.wantFirst+int64(i), want)
				}
			}
			// Paging from every cursor gives the same events.
			for _, after := range []int64{0, tt.wantFirst, tt.wantFirst + tt.wantCount/2, int64(n) - 1, int64(n)} {
				page, err := s.Events(ctx, "r", after, 7)
				want := min(7, max(0, int64(n)-max(after, tt.wantFirst-1)))
				if err != nil || int64(len(page)) != want || (len(page) > 0 && page[0].Seq != max(after, tt.wantFirst-1)+1) {
					t.Errorf("Events(after %d, 7) = %v, %v, want %d events", after, seqs(page), err, want)
				}
			}
			if r.RetainedBytes != tt.wantCount*10 {
				t.Errorf("RetainedBytes = %d, want %d", r.RetainedBytes, tt.wantCount*10)
			}
		})
	}
}

func TestStore_PruneAndReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := &clock{t: time.UnixMilli(1_700_000_000_000)}
	s, err := Open(ctx, dir, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"done", "live"} {
		if _, _, err := s.CreateRun(ctx, Run{ID: id, Digest: "d", Harness: "h", Model: "m", PGID: 42, Marker: "M=1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, id, events(3, id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetRunProcess(ctx, "live", RunProcess{PGID: 4242}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, "done", Finish{Status: StatusDone}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen: everything committed is there.
	s = open(t, dir, Options{Now: clk.Now})
	live, err := s.LiveRuns(ctx)
	if err != nil || len(live) != 1 || live[0].ID != "live" || live[0].PGID != 4242 || live[0].Marker != "M=1" {
		t.Fatalf("LiveRuns after reopen = %+v, %v, want run live with pgid 4242", live, err)
	}
	if evs, _ := s.Events(ctx, "live", 0, 10); len(evs) != 3 {
		t.Errorf("Events(live) after reopen = %d events, want 3", len(evs))
	}

	clk.Add(DefaultReplayTTL + time.Second)
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := s.GetRun(ctx, "done")
	if !r.ReplayExpired || !r.ResultKept || r.FirstSeq != 1 || r.RetainedEvents != 3 {
		t.Errorf("after replay TTL: %+v, want replay expired with its result (all 3 events) kept", r)
	}
	if evs, _ := s.Events(ctx, "done", 0, 10); len(evs) != 3 {
		t.Errorf("Events(done) after replay TTL = %d, want its 3 result events", len(evs))
	}
	if evs, _ := s.Events(ctx, "live", 0, 10); len(evs) != 3 {
		t.Errorf("Events(live) after prune = %d, want 3 (live runs keep events)", len(evs))
	}
	clk.Add(DefaultIdentityTTL)
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx, "done"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun after identity TTL = %v, want ErrNotFound", err)
	}
}

func TestStore_FileMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := open(t, dir, Options{})
	if _, _, err := s.CreateRun(context.Background(), Run{ID: "r", Digest: "d", Harness: "h", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{FileName, FileName + "-wal"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", name, fi.Mode().Perm())
		}
	}
	fi, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode = %v, want 0700", fi.Mode().Perm())
	}
}

func TestStore_CancellationsAndSessions(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{})
	c, created, err := s.PutCancellation(ctx, Cancellation{OperationID: "op", Digest: "d1", HTTPStatus: 200, Body: []byte("{}")})
	if err != nil || !created {
		t.Fatalf("PutCancellation = %+v, %v, %v", c, created, err)
	}
	c, created, err = s.PutCancellation(ctx, Cancellation{OperationID: "op", Digest: "d2", HTTPStatus: 202, Body: []byte("x")})
	if err != nil || created || c.Digest != "d1" || c.HTTPStatus != 200 {
		t.Errorf("PutCancellation(again) = %+v, %v, %v, want the first answer", c, created, err)
	}
	if _, err := s.GetCancellation(ctx, "other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetCancellation(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.PutNativeSession(ctx, "s", "claude-code", "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNativeSession(ctx, "s", "claude-code", "n2"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.NativeSession(ctx, "s", "claude-code"); err != nil || got != "n2" {
		t.Errorf("NativeSession = %q, %v, want n2", got, err)
	}
	if _, err := s.NativeSession(ctx, "s", "codex"); !errors.Is(err, ErrNotFound) {
		t.Errorf("NativeSession(other harness) = %v, want ErrNotFound", err)
	}
}

// TestStore_MigrateOnce: an open stamps the database with the schema's
// version and a later open of a stamped database leaves it alone, while a
// database stamped otherwise (an older schema) gets the schema again.
func TestStore_MigrateOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	reopen := func() *Store { return open(t, dir, Options{}) }
	version := func(s *Store) int64 {
		t.Helper()
		var v int64
		if err := s.w.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	s := reopen()
	if v := version(s); v != schemaVersion {
		t.Fatalf("user_version = %d, want %d", v, schemaVersion)
	}
	// A stamped database is not migrated: the dropped table stays gone.
	if _, err := s.w.ExecContext(ctx, `DROP TABLE cancellations`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = reopen()
	var n int
	if err := s.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE name = 'cancellations'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("cancellations tables after reopening a stamped database = %d (%v), want 0", n, err)
	}
	// Another stamp is another schema: it is applied.
	if _, err := s.w.ExecContext(ctx, `PRAGMA user_version = 7`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = reopen()
	if _, err := s.GetCancellation(ctx, "op"); !errors.Is(err, ErrNotFound) {
		t.Errorf("cancellation lookup after the migration = %v, want ErrNotFound from a recreated table", err)
	}
	if v := version(s); v != schemaVersion {
		t.Errorf("user_version after the migration = %d, want %d", v, schemaVersion)
	}
}

// TestStore_Checkpoint: a checkpoint moves the committed events from the
// write-ahead log into the database file.
func TestStore_Checkpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if _, _, err := s.CreateRun(ctx, Run{ID: "r", Digest: "d", Harness: "h", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "r", [][]byte{bytes.Repeat([]byte("x"), 256<<10)}); err != nil {
		t.Fatal(err)
	}
	size := func() int64 { return dbSize(t, dir) }
	before := size()
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if after := size(); after < before+256<<10 {
		t.Errorf("database file = %d bytes after the checkpoint (%d before), want the 256 KiB event in it", after, before)
	}
}

// TestStore_FinishCheckpoints: a finished run's events reach the database
// file on their own, by the checkpoint Finish asks for beside its return.
func TestStore_FinishCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if _, _, err := s.CreateRun(ctx, Run{ID: "r", Digest: "d", Harness: "h", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	size := func() int64 { return dbSize(t, dir) }
	before := size()
	if _, err := s.Finish(ctx, "r", Finish{Status: StatusDone}, [][]byte{bytes.Repeat([]byte("x"), 256<<10)}); err != nil {
		t.Fatal(err)
	}
	polltest.UntilNil(t, 10*time.Second, "the 256 KiB event in the database file after the run finished", func() error {
		if n := size(); n < before+256<<10 {
			return fmt.Errorf("database file = %d bytes (%d before)", n, before)
		}
		return nil
	})
}

// dbSize is the size of the database file of the store in dir.
func dbSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestStore_RunProcess: a run's process and how it came to serve it are
// read back as recorded; a run without a record has none; a record of a
// run the store does not hold is refused.
func TestStore_RunProcess(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{})
	if _, _, err := s.CreateRun(ctx, Run{ID: "r1", Digest: "d", Harness: "h"}); err != nil {
		t.Fatal(err)
	}
	if h, err := s.RunHarness(ctx, "r1"); err != nil || h != nil {
		t.Fatalf("RunHarness before any record = %+v, %v; want none", h, err)
	}
	want := wire.HarnessStart{Process: wire.HarnessStarted, Reason: wire.StartSettingsChanged, Changed: []string{"model", "cwd"}}
	if err := s.SetRunProcess(ctx, "r1", RunProcess{PGID: 77, Marker: "M=spare-1", Start: &want}); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetRun(ctx, "r1")
	if err != nil || r.PGID != 77 || r.Marker != "M=spare-1" {
		t.Errorf("run = pgid %d marker %q, %v", r.PGID, r.Marker, err)
	}
	if h, err := s.RunHarness(ctx, "r1"); err != nil || h == nil || !cmp.Equal(*h, want) {
		t.Errorf("RunHarness = %+v, %v; want %+v", h, err, want)
	}
	if err := s.SetRunProcess(ctx, "nope", RunProcess{PGID: 1, Start: &want}); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetRunProcess of an unknown run = %v, want ErrNotFound", err)
	}
	if h, _ := s.RunHarness(ctx, "nope"); h != nil {
		t.Errorf("an unknown run has a harness record: %+v", h)
	}
}
