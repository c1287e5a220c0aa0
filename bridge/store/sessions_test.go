package store

import (
	"context"
	"errors"
	"testing"
)

func TestStore_retainedSessionsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := RetainedSession{ID: "s1", Harness: "claude-code", Model: "claude-code/sonnet", Digest: "sha256:a", Request: []byte(`{}`), Policy: "interactive"}
	if _, created, err := s.CreateSession(ctx, rs); err != nil || !created {
		t.Fatalf("CreateSession = %v, %v", created, err)
	}
	if _, created, err := s.CreateSession(ctx, rs); err != nil || created {
		t.Errorf("CreateSession again = %v, %v, want existing", created, err)
	}
	other := rs
	other.Digest = "sha256:b"
	if _, _, err := s.CreateSession(ctx, other); !errors.Is(err, ErrConflict) {
		t.Errorf("CreateSession with another digest = %v, want ErrConflict", err)
	}
	boundary := func(t Turn) []byte { return []byte(`{"turn":` + string(rune('0'+t.Index)) + `}`) }
	t1, r1, created, err := s.AdmitTurn(ctx, Turn{SessionID: "s1", TurnID: "t1", Digest: "sha256:t1"}, Run{ID: "r1", Digest: "sha256:t1", SessionID: "s1"}, boundary)
	if err != nil || !created || t1.Index != 0 || t1.Offset != 0 || r1.ID != "r1" {
		t.Fatalf("AdmitTurn t1 = %+v, %+v, %v, %v", t1, r1, created, err)
	}
	if _, err := s.Finish(ctx, "r1", Finish{Status: StatusDone}, [][]byte{[]byte("a"), []byte("b"), []byte("c")}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		turn    Turn
		run     string
		created bool
		err     error
	}{
		{"repeat", Turn{SessionID: "s1", TurnID: "t1", Digest: "sha256:t1"}, "r-other", false, nil},
		{"different turn", Turn{SessionID: "s1", TurnID: "t1", Digest: "sha256:x"}, "r-other", false, ErrConflict},
		{"run id taken", Turn{SessionID: "s1", TurnID: "t2", Digest: "sha256:t2"}, "r1", false, ErrConflict},
		{"second", Turn{SessionID: "s1", TurnID: "t2", Digest: "sha256:t2"}, "r2", true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, run, created, err := s.AdmitTurn(ctx, tt.turn, Run{ID: tt.run, Digest: tt.turn.Digest, SessionID: "s1"}, boundary)
			if created != tt.created || !errors.Is(err, tt.err) {
				t.Fatalf("AdmitTurn = %v, %v, want %v, %v", created, err, tt.created, tt.err)
			}
			if tt.name == "repeat" && run.ID != "r1" {
				t.Errorf("repeated turn run = %s, want r1", run.ID)
			}
			if tt.name == "second" && (got.Index != 1 || got.Offset != 3) {
				t.Errorf("second turn = %+v, want index 1 offset 3", got)
			}
		})
	}
	s.Close()

	s, err = Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	turns, err := s.Turns(ctx, "s1", 0)
	if err != nil || len(turns) != 2 || turns[1].RunID != "r2" {
		t.Fatalf("Turns after reopen = %+v, %v", turns, err)
	}
	got, err := s.GetSession(ctx, "s1")
	if err != nil || string(got.Boundary) != `{"turn":1}` {
		t.Errorf("GetSession after reopen = %+v, %v", got, err)
	}
}
