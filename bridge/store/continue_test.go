package store

import (
	"context"
	"errors"
	"testing"
)

func TestStore_AdmitContinuation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateSession(ctx, RetainedSession{ID: "s1", Harness: "pi", Model: "pi/a/b", Digest: "sha256:a",
		Request: []byte(`{}`), Policy: "interactive"}); err != nil {
		t.Fatal(err)
	}
	boundary := func(t Turn) []byte { return []byte(`{"rev":` + string(rune('1'+t.Index)) + `}`) }
	admit := func(op, digest string, check func(RetainedSession) *Rejection) (Continuation, Run, error) {
		c, _, r, err := s.AdmitContinuation(ctx, Continuation{OperationID: op, SessionID: "s1", RequestDigest: digest}, check,
			Turn{SessionID: "s1", TurnID: op, Digest: digest}, Run{ID: op, Digest: digest, SessionID: "s1"}, boundary)
		return c, r, err
	}
	accept := func(RetainedSession) *Rejection { return nil }

	var seen []byte
	c, r, err := admit("op-1", "sha256:1", func(rs RetainedSession) *Rejection { seen = rs.Boundary; return nil })
	if err != nil || c.RunID != "op-1" || r.ID != "op-1" || c.Body != nil || seen != nil {
		t.Fatalf("first continuation = %+v, %+v, %v (saw boundary %s)", c, r, err, seen)
	}
	if rs, _ := s.GetSession(ctx, "s1"); string(rs.Boundary) != `{"rev":1}` {
		t.Errorf("boundary after admission = %s", rs.Boundary)
	}
	if c, _, err := admit("op-1", "sha256:other", accept); !errors.Is(err, ErrContinuationExists) || c.RequestDigest != "sha256:1" {
		t.Errorf("operation repeated = %+v, %v, want the recorded one", c, err)
	}
	if _, err := s.Finish(ctx, "op-1", Finish{Status: StatusDone}, nil); err != nil {
		t.Fatal(err)
	}

	// A final rejection is recorded; any other is not.
	rejected := func(final bool) func(RetainedSession) *Rejection {
		return func(RetainedSession) *Rejection {
			return &Rejection{HTTPStatus: 409, Body: []byte(`{"no":1}`), Final: final}
		}
	}
	if c, _, err := admit("op-2", "sha256:2", rejected(true)); !errors.Is(err, ErrContinuationRejected) || string(c.Body) != `{"no":1}` {
		t.Errorf("final rejection = %+v, %v", c, err)
	}
	if c, err := s.GetContinuation(ctx, "op-2"); err != nil || c.HTTPStatus != 409 || c.RunID != "" {
		t.Errorf("recorded rejection = %+v, %v", c, err)
	}
	if _, _, err := admit("op-3", "sha256:3", rejected(false)); !errors.Is(err, ErrContinuationRejected) {
		t.Errorf("passing rejection = %v", err)
	}
	if _, err := s.GetContinuation(ctx, "op-3"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a passing rejection was recorded: %v", err)
	}
	if turns, _ := s.Turns(ctx, "s1", 0); len(turns) != 1 {
		t.Errorf("turns = %d after rejections, want 1", len(turns))
	}
	if _, _, _, err := s.AdmitContinuation(ctx, Continuation{OperationID: "op-4", SessionID: "nope"}, accept,
		Turn{SessionID: "nope", TurnID: "op-4"}, Run{ID: "op-4"}, boundary); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown session = %v, want ErrNotFound", err)
	}

	// The first outcome recorded wins, and survives a reopen.
	if c, err := s.SetContinuationOutcome(ctx, "op-1", 200, []byte(`{"a":1}`)); err != nil || string(c.Body) != `{"a":1}` {
		t.Errorf("SetContinuationOutcome = %+v, %v", c, err)
	}
	if c, err := s.SetContinuationOutcome(ctx, "op-1", 200, []byte(`{"a":2}`)); err != nil || string(c.Body) != `{"a":1}` {
		t.Errorf("second SetContinuationOutcome = %+v, %v, want the first", c, err)
	}
	s.Close()
	s, err = Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, err := s.GetContinuation(ctx, "op-1"); err != nil || string(c.Body) != `{"a":1}` || c.RunID != "op-1" {
		t.Errorf("after reopen = %+v, %v", c, err)
	}
}
