package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// rows lists what the store holds, one "table:key" string per row (a
// run's events as "events:<run>"), sorted.
func rows(t *testing.T, s *Store) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, q := range []struct{ prefix, sql string }{
		{"run", `SELECT id FROM runs`},
		{"events", `SELECT DISTINCT run_id FROM segments`},
		{"interaction", `SELECT run_id || '/' || id FROM interactions`},
		{"op", `SELECT operation_id FROM interaction_ops`},
		{"cancel", `SELECT operation_id FROM cancellations`},
		{"continuation", `SELECT operation_id FROM continuations`},
		{"native", `SELECT id FROM sessions`},
		{"session", `SELECT id || CASE WHEN closed_at > 0 THEN ' closed' ELSE '' END FROM retained_sessions`},
		{"turn", `SELECT session_id || '/' || turn_id FROM retained_turns`},
		{"harness", `SELECT run_id || ' ' || process || ' ' || reason || ' ' || changed FROM run_harness`},
	} {
		r, err := s.r.QueryContext(ctx, q.sql)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var v string
			if err := r.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, q.prefix+":"+v)
		}
		r.Close()
	}
	slices.Sort(out)
	return out
}

// retentionFixture fills a store at the clock's instant 0 (hours below
// are offsets from it):
//   - plain: a plain run ended at 0, with an interaction, its operation,
//     a cancellation answer and a native session record (chat-s);
//   - closed: a retained session with turn t1 (run rc1, ended at 0, with
//     an interaction) and t2 (rc2, admitted by continuation op-cont,
//     ended at 1 h), closed at 2 h;
//   - open: turns o1 (ro1, ended at 0) and o2 (ro2, ended at 1 h), and a
//     rejected continuation op-rej at 0;
//   - live: turn l1 whose run rl1 never ends;
//   - idle: a session without turns.
func retentionFixture(t *testing.T, s *Store, clk *clock, t0 time.Time) {
	t.Helper()
	ctx := context.Background()
	at := func(d time.Duration) { clk.mu.Lock(); clk.t = t0.Add(d); clk.mu.Unlock() }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	boundary := func(Turn) []byte { return []byte(`{}`) }
	at(0)
	_, _, err := s.CreateRun(ctx, Run{ID: "plain", Digest: "d", Harness: "claude-code", Model: "m", SessionID: "chat-s"})
	must(err)
	must(s.PutInteraction(ctx, Interaction{RunID: "plain", ID: "i1", NativeID: "n", Request: []byte(`{}`)}))
	_, _, err = s.PutInteractionOp(ctx, InteractionOp{OperationID: "op-plain", RunID: "plain", InteractionID: "i1", HTTPStatus: 200, Body: []byte(`{}`)},
		&Resolution{ResponseDigest: "r", Outcome: "allow"})
	must(err)
	_, _, err = s.PutCancellation(ctx, Cancellation{OperationID: "cancel-plain", Digest: "d", HTTPStatus: 200, Body: []byte(`{}`)})
	must(err)
	must(s.PutNativeSession(ctx, "chat-s", "claude-code", "native-chat"))
	must(s.SetRunProcess(ctx, "plain", RunProcess{PGID: 7, Start: &wire.HarnessStart{Process: wire.HarnessStarted,
		Reason: wire.StartSettingsChanged, Changed: []string{"model", "env"}}}))
	_, err = s.Finish(ctx, "plain", Finish{Status: StatusDone}, events(2, "plain"))
	must(err)

	for _, id := range []string{"closed", "open", "live", "idle"} {
		_, _, err := s.CreateSession(ctx, RetainedSession{ID: id, Harness: "claude-code", Model: "claude-code/sonnet", Digest: "d",
			Request: []byte(`{}`), Policy: "interactive"})
		must(err)
	}
	admit := func(session, turn, run string) {
		t.Helper()
		_, _, _, err := s.AdmitTurn(ctx, Turn{SessionID: session, TurnID: turn, Digest: "d-" + turn},
			Run{ID: run, Digest: "d-" + turn, Harness: "claude-code", SessionID: session}, boundary)
		must(err)
		_, err = s.Append(ctx, run, events(3, run))
		must(err)
	}
	admit("closed", "t1", "rc1")
	must(s.PutInteraction(ctx, Interaction{RunID: "rc1", ID: "i1", NativeID: "n", Request: []byte(`{}`)}))
	must(s.PutNativeSession(ctx, "closed", "claude-code", "native-closed"))
	_, err = s.Finish(ctx, "rc1", Finish{Status: StatusDone}, nil)
	must(err)
	admit("open", "o1", "ro1")
	must(s.PutNativeSession(ctx, "open", "claude-code", "native-open"))
	_, err = s.Finish(ctx, "ro1", Finish{Status: StatusDone}, nil)
	must(err)
	_, _, _, err = s.AdmitContinuation(ctx, Continuation{OperationID: "op-rej", SessionID: "open", RequestDigest: "x"},
		func(RetainedSession) *Rejection { return &Rejection{HTTPStatus: 409, Body: []byte(`{}`), Final: true} },
		Turn{}, Run{}, boundary)
	if !errors.Is(err, ErrContinuationRejected) {
		t.Fatalf("AdmitContinuation(rejected) = %v", err)
	}
	admit("live", "l1", "rl1")

	at(time.Hour)
	_, _, _, err = s.AdmitContinuation(ctx, Continuation{OperationID: "op-cont", SessionID: "closed", RequestDigest: "x"},
		func(RetainedSession) *Rejection { return nil },
		Turn{SessionID: "closed", TurnID: "t2", Digest: "d-t2"}, Run{ID: "rc2", Digest: "d-t2", Harness: "claude-code", SessionID: "closed"}, boundary)
	must(err)
	_, err = s.Finish(ctx, "rc2", Finish{Status: StatusDone}, events(1, "rc2"))
	must(err)
	must(s.SetRunProcess(ctx, "rc2", RunProcess{PGID: 8, Marker: "M=s", Start: &wire.HarnessStart{Process: wire.HarnessKept}}))
	admit("open", "o2", "ro2")
	must(s.SetRunProcess(ctx, "ro2", RunProcess{PGID: 9, Start: &wire.HarnessStart{Process: wire.HarnessSpare}}))
	_, err = s.Finish(ctx, "ro2", Finish{Status: StatusDone}, nil)
	must(err)

	at(2 * time.Hour)
	must(s.CloseSession(ctx, "closed"))
}

func TestStore_PruneRetention(t *testing.T) {
	all := []string{
		"cancel:cancel-plain",
		"continuation:op-cont", "continuation:op-rej",
		"events:plain", "events:rc1", "events:rc2", "events:rl1", "events:ro1", "events:ro2",
		"harness:plain started settings_changed model,env", "harness:rc2 kept  ", "harness:ro2 spare  ",
		"interaction:plain/i1", "interaction:rc1/i1",
		"native:chat-s", "native:closed", "native:open",
		"op:op-plain",
		"run:plain", "run:rc1", "run:rc2", "run:rl1", "run:ro1", "run:ro2",
		"session:closed closed", "session:idle", "session:live", "session:open",
		"turn:closed/t1", "turn:closed/t2", "turn:live/l1", "turn:open/o1", "turn:open/o2",
	}
	without := func(base []string, drop ...string) []string {
		var out []string
		for _, r := range base {
			if !slices.Contains(drop, r) {
				out = append(out, r)
			}
		}
		return out
	}
	replaced := func(base []string, from, to string) []string {
		return slices.Sorted(slices.Values(append(without(base, from), to)))
	}
	// Replay: 60 s after each run ended its full replay ends, and it keeps
	// its result (its few events) for as long as the run is kept.
	replay1 := all
	replay2 := all
	// Identity: 24 h after the end; the latest turns' runs stay with
	// their sessions.
	identity := without(replay2, "run:plain", "events:plain", "harness:plain started settings_changed model,env", "interaction:plain/i1", "op:op-plain", "cancel:cancel-plain",
		"continuation:op-rej", "native:chat-s", "run:rc1", "events:rc1", "interaction:rc1/i1", "turn:closed/t1", "run:ro1",
		"events:ro1", "turn:open/o1")
	idleClosed := replaced(identity, "session:idle", "session:idle closed")
	openClosed := replaced(idleClosed, "session:open", "session:open closed")
	// closed: closed at 2 h, deleted 24 h later with all of its own.
	closedGone := without(openClosed, "session:closed closed", "turn:closed/t2", "run:rc2", "harness:rc2 kept  ", "events:rc2", "continuation:op-cont", "native:closed")
	idleGone := without(closedGone, "session:idle closed")
	openGone := without(idleGone, "session:open closed", "turn:open/o2", "run:ro2", "harness:ro2 spare  ", "events:ro2", "native:open")

	steps := []struct {
		at            time.Duration
		closeIdle     bool
		wantClosed    []string
		want          []string
		wantForgotten []SessionRef
	}{
		{at: 2*time.Hour - 0, want: replay2},
		{at: 24*time.Hour - time.Millisecond, closeIdle: true, want: replay2},
		{at: 24 * time.Hour, want: identity, wantForgotten: []SessionRef{{"chat-s", "claude-code"}}},
		{at: 24 * time.Hour, closeIdle: true, wantClosed: []string{"idle"}, want: idleClosed},
		{at: 25*time.Hour - time.Millisecond, closeIdle: true, want: idleClosed},
		{at: 25 * time.Hour, closeIdle: true, wantClosed: []string{"open"}, want: openClosed},
		{at: 26*time.Hour - time.Millisecond, want: openClosed},
		{at: 26 * time.Hour, want: closedGone, wantForgotten: []SessionRef{{"closed", "claude-code"}}},
		{at: 48*time.Hour - time.Millisecond, want: closedGone},
		{at: 48 * time.Hour, want: idleGone, wantForgotten: []SessionRef{{"idle", "claude-code"}}},
		{at: 49*time.Hour - time.Millisecond, want: idleGone},
		{at: 49 * time.Hour, want: openGone, wantForgotten: []SessionRef{{"open", "claude-code"}}},
		{at: 1000 * time.Hour, closeIdle: true, want: openGone},
	}
	for _, batch := range []int{1, 2, DefaultPruneBatch} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			ctx := context.Background()
			t0 := time.UnixMilli(1_700_000_000_000)
			clk := &clock{t: t0}
			s := open(t, t.TempDir(), Options{Now: clk.Now, PruneBatch: batch, ReplayTTL: time.Minute})
			retentionFixture(t, s, clk, t0)
			// Before anything expired, and 1 ms before the first replay.
			for _, at := range []time.Duration{0, 60*time.Second - time.Millisecond} {
				clk.mu.Lock()
				clk.t = t0.Add(at)
				clk.mu.Unlock()
				if _, err := s.Prune(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(all, rows(t, s)); diff != "" {
				t.Fatalf("before any expiry (-want +got):\n%s", diff)
			}
			clk.mu.Lock()
			clk.t = t0.Add(60 * time.Second)
			clk.mu.Unlock()
			st, err := s.Prune(ctx)
			if err != nil || st.ReplayExpired != 3 {
				t.Fatalf("Prune at 60 s = %+v, %v, want 3 runs replay-expired", st, err)
			}
			if diff := cmp.Diff(replay1, rows(t, s)); diff != "" {
				t.Fatalf("at 60 s (-want +got):\n%s", diff)
			}
			for _, step := range steps {
				clk.mu.Lock()
				clk.t = t0.Add(step.at)
				clk.mu.Unlock()
				name := fmt.Sprintf("at %s", step.at)
				if step.closeIdle {
					closed, err := s.CloseIdleSessions(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(step.wantClosed, closed); diff != "" {
						t.Errorf("%s: CloseIdleSessions (-want +got):\n%s", name, diff)
					}
				}
				st, err := s.Prune(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(step.want, rows(t, s)); diff != "" {
					t.Errorf("%s: rows after Prune (-want +got):\n%s", name, diff)
				}
				if diff := cmp.Diff(step.wantForgotten, st.Forgotten, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: Forgotten (-want +got):\n%s", name, diff)
				}
			}
			// The live run is untouched, still readable and appendable.
			if _, err := s.Append(ctx, "rl1", events(1, "more")); err != nil {
				t.Errorf("Append to the live run after pruning = %v", err)
			}
		})
	}
}

// TestStore_PruneKeepsSessionOffsets shows that a session whose older
// turns were pruned numbers its next turn's events after its latest turn.
func TestStore_PruneKeepsSessionOffsets(t *testing.T) {
	ctx := context.Background()
	t0 := time.UnixMilli(1_700_000_000_000)
	clk := &clock{t: t0}
	s := open(t, t.TempDir(), Options{Now: clk.Now, SessionIdle: -1})
	if _, _, err := s.CreateSession(ctx, RetainedSession{ID: "s", Harness: "h", Model: "m", Digest: "d", Request: []byte(`{}`), Policy: "p"}); err != nil {
		t.Fatal(err)
	}
	boundary := func(Turn) []byte { return []byte(`{}`) }
	for i, n := range []int{3, 4} {
		id := fmt.Sprint("r", i)
		if _, _, _, err := s.AdmitTurn(ctx, Turn{SessionID: "s", TurnID: id, Digest: id}, Run{ID: id, Digest: id}, boundary); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finish(ctx, id, Finish{Status: StatusDone}, events(n, id)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(1000 * time.Hour)
	if closed, err := s.CloseIdleSessions(ctx); err != nil || len(closed) != 0 {
		t.Fatalf("CloseIdleSessions with SessionIdle < 0 = %v, %v, want none", closed, err)
	}
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	turns, err := s.Turns(ctx, "s", 0)
	if err != nil || len(turns) != 1 || turns[0].RunID != "r1" {
		t.Fatalf("Turns after prune = %+v, %v, want the latest only", turns, err)
	}
	got, _, _, err := s.AdmitTurn(ctx, Turn{SessionID: "s", TurnID: "r2", Digest: "r2"}, Run{ID: "r2", Digest: "r2"}, boundary)
	if err != nil || got.Index != 2 || got.Offset != 7 {
		t.Errorf("AdmitTurn after prune = %+v, %v, want index 2 offset 7", got, err)
	}
}

func TestStore_AdmitTurnToClosedOrMissingSession(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{})
	if _, _, err := s.CreateSession(ctx, RetainedSession{ID: "s", Harness: "h", Model: "m", Digest: "d", Request: []byte(`{}`), Policy: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		session string
		want    error
	}{{"s", ErrSessionClosed}, {"gone", ErrNotFound}} {
		_, _, _, err := s.AdmitTurn(ctx, Turn{SessionID: tt.session, TurnID: "t", Digest: "d"}, Run{ID: "r-" + tt.session, Digest: "d"},
			func(Turn) []byte { return nil })
		if !errors.Is(err, tt.want) {
			t.Errorf("AdmitTurn(session %s) = %v, want %v", tt.session, err, tt.want)
		}
		if _, err := s.GetRun(ctx, "r-"+tt.session); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetRun after a refused admission = %v, want ErrNotFound", err)
		}
	}
}
