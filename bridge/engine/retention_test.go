package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// TestEngine_RecoverRetainedTurn shows that a retained turn live at a
// restart ends in its own canonical format: an interaction.cancel for
// each open interaction, then a failed status naming the restart; an
// answer to one of them is acknowledged expired (what the agent
// interface's conformance expects of an interaction the restart left
// unanswerable), not cancelled (which is for a cancelled run).
func TestEngine_RecoverRetainedTurn(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	st, err := store.Open(ctx, data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.CreateSession(ctx, store.RetainedSession{ID: "s", Harness: "claude-code", Model: "claude-code/sonnet",
		Digest: "d", Request: []byte(`{}`), Policy: wire.PolicyInteractive}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := st.AdmitTurn(ctx, store.Turn{SessionID: "s", TurnID: "t1", Digest: "d1"},
		store.Run{ID: "r1", Digest: "d1", Harness: "claude-code", SessionID: "s"}, func(store.Turn) []byte { return []byte(`{}`) }); err != nil {
		t.Fatal(err)
	}
	c := newCanonical("r1", "s", "claude-code", 0)
	if _, err := st.Append(ctx, "r1", [][]byte{c.status("started", "")}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutInteraction(ctx, store.Interaction{RunID: "r1", ID: "r1:interaction:1", NativeID: "n", Request: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}

	e, err := New(ctx, st, Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	frames := readAll(t, e, "r1", 0)
	var got []map[string]any
	for i, f := range frames {
		var env wire.Envelope
		var ev map[string]any
		if err := json.Unmarshal([]byte(f), &env); err != nil || json.Unmarshal(env.Event, &ev) != nil || env.Sequence != int64(i+1) || env.RunID != "r1" {
			t.Fatalf("frame %d = %s, want a canonical envelope with sequence %d (%v)", i+1, f, i+1, err)
		}
		got = append(got, ev)
	}
	want := []map[string]any{
		{"type": "status", "status": "started"},
		{"type": "interaction.cancel", "id": "r1:interaction:1", "reason": wire.TypeBridgeRestarted},
		{"type": "status", "status": "failed", "detail": wire.TypeBridgeRestarted + ": " + RestartReason},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frames after restart (-want +got):\n%s", diff)
	}
	it, err := st.GetInteraction(ctx, "r1", "r1:interaction:1")
	if err != nil || it.Status != store.InteractionExpired {
		t.Errorf("interaction after restart = %+v, %v, want expired", it, err)
	}
	for _, op := range []string{"op-1", "op-1", "op-2"} { // a repeated operation gets its stored answer
		var got InteractionAnswer
		body, code, err := e.Respond(ctx, "r1", "r1:interaction:1", op, Decision{Outcome: wire.OutcomeAccepted, Allow: true}, "sha256:x",
			func(a InteractionAnswer) ([]byte, int) { got = a; return []byte(a.Status), 409 })
		if err != nil || string(body) != wire.InteractionExpired || code != 409 {
			t.Errorf("Respond(%s) after restart = %s %d, %v (answer %+v), want %s", op, body, code, err, got, wire.InteractionExpired)
		}
	}
}

// TestEngine_PruneRemovesSessionState shows that Prune removes the state
// directory of a session the store forgot, and keeps that of a session
// that is still known.
func TestEngine_PruneRemovesSessionState(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, err := store.Open(ctx, data, store.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := New(ctx, st, Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	for _, id := range []string{"old", "kept"} {
		if err := st.PutNativeSession(ctx, id, "claude-code", "native-"+id); err != nil {
			t.Fatal(err)
		}
		dir, err := e.sessionDir("claude-code", id)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "transcript"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		now = now.Add(time.Hour)
		mu.Unlock()
	}
	mu.Lock()
	now = now.Add(store.DefaultIdentityTTL - 90*time.Minute)
	mu.Unlock()
	if err := e.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"old": false, "kept": true} {
		_, err := os.Stat(e.sessionDirPath("claude-code", id))
		if exists := err == nil; exists != want || (err != nil && !errors.Is(err, os.ErrNotExist)) {
			t.Errorf("state of session %s exists = %v (%v), want %v", id, exists, err, want)
		}
	}
	left, _ := os.ReadDir(filepath.Join(data, "sessions", "claude-code"))
	if len(left) != 1 {
		t.Errorf("session state directories left = %d, want 1 (nothing renamed and left behind)", len(left))
	}
}
