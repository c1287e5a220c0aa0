package sandbox_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// TestReplica_LiveShipping: a box's bridge ships each run's events to
// the broker's replica as they are stored: after a turn the replica holds
// every event of the run, byte for byte as the bridge replays them, and
// its end; once the box is gone they are all still there.
func TestReplica_LiveShipping(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := f.Provider(t, nil)
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	_, evs, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Ship this turn."})
	if err != nil {
		t.Fatal(err)
	}
	runID := evs[0].RunID
	s, err := env.Run(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(t.Context())
	if err != nil || !st.Terminal || st.Snapshot.LastSeq < 3 {
		t.Fatalf("the run's status %+v, %v", st, err)
	}
	box := env.Box().ID()
	polltest.Until(t, 30*time.Second, "the replica to hold the run's end", func() bool {
		runs, err := f.Replica.Runs(t.Context(), box)
		return err == nil && len(runs) == 1 && runs[0].ID == runID && runs[0].LastSeq == st.Snapshot.LastSeq && runs[0].Status != "running"
	})
	held, err := f.Replica.Events(t.Context(), box, runID, 0, 10000)
	if err != nil || int64(len(held)) != st.Snapshot.LastSeq {
		t.Fatalf("the replica holds %d events (%v), the bridge %d", len(held), err, st.Snapshot.LastSeq)
	}
	var replayed [][]byte
	for ev, err := range s.Events(t.Context(), "0") {
		if err != nil {
			t.Fatal(err)
		}
		replayed = append(replayed, ev.Raw)
	}
	for i, e := range held {
		if e.Seq != int64(i+1) {
			t.Fatalf("replica event %d has sequence %d", i, e.Seq)
		}
		if i < len(replayed) && !bytes.Contains(replayed[i], bytes.TrimSpace(e.Data)[:min(len(e.Data), 40)]) {
			t.Errorf("event %d: replica %.80s, bridge %.80s", e.Seq, e.Data, replayed[i])
		}
	}
	if err := env.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	after, err := f.Replica.Events(t.Context(), box, runID, 0, 10000)
	if err != nil || len(after) != len(held) {
		t.Errorf("after the box is gone the replica holds %d events (%v), want %d", len(after), err, len(held))
	}
}
