package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func events(from, n int) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for i := range out {
		out[i] = json.RawMessage(fmt.Sprintf(`{"seq":%d}`, from+i))
	}
	return out
}

// TestAppend: batches are idempotent by sequence number (a resent batch,
// an overlapping one), a gap is refused with where to resume, each box
// sees its own runs only, and what is held outlives a reopen.
func TestAppend(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(t.Context(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		b        wire.ReplicaBatch
		wantLast int64
		gap      bool
	}{
		{"first", wire.ReplicaBatch{SessionID: "s1", Status: "running", First: 1, Events: events(1, 3)}, 3, false},
		{"resent", wire.ReplicaBatch{Status: "running", First: 1, Events: events(1, 3)}, 3, false},
		{"overlapping", wire.ReplicaBatch{Status: "running", First: 2, Events: events(2, 4)}, 5, false},
		{"a gap", wire.ReplicaBatch{Status: "running", First: 9, Events: events(9, 1)}, 5, true},
		{"the end, no events", wire.ReplicaBatch{Status: "done", First: 6, Events: nil}, 5, false},
	} {
		r, err := s.Append(t.Context(), "box-a", "run-1", c.b)
		if _, gap := errors.AsType[*GapError](err); gap != c.gap || (!c.gap && err != nil) {
			t.Fatalf("%s: %v, gap %v", c.name, err, c.gap)
		}
		if r.LastSeq != c.wantLast {
			t.Errorf("%s: last %d, want %d", c.name, r.LastSeq, c.wantLast)
		}
	}
	if _, err := s.Append(t.Context(), "box-b", "run-2", wire.ReplicaBatch{Status: "running", First: 1, Events: events(1, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(t.Context(), dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.Runs(t.Context(), "box-a")
	if err != nil || len(runs) != 1 || runs[0].ID != "run-1" || runs[0].Status != "done" || runs[0].SessionID != "s1" || runs[0].LastSeq != 5 {
		t.Fatalf("runs of box-a after a reopen = %+v, %v", runs, err)
	}
	evs, err := s.Events(t.Context(), "box-a", "run-1", 2, 100)
	if err != nil || len(evs) != 3 || evs[0].Seq != 3 || string(evs[2].Data) != `{"seq":5}` {
		t.Errorf("events after 2 = %+v, %v", evs, err)
	}
	if _, err := s.Events(t.Context(), "box-a", "run-2", 0, 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("box-a reading box-b's run: %v, want ErrNotFound", err)
	}
	for name, b := range map[string]wire.ReplicaBatch{"no first": {Events: events(1, 1)}} {
		if _, err := s.Append(t.Context(), "box-a", "run-3", b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestBounds: a run past MaxRunBytes keeps its newest events, a box past
// MaxBoxBytes loses its oldest runs first, and Prune drops runs past the
// retention.
func TestBounds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, err := Open(t.Context(), t.TempDir(), Options{MaxRunBytes: 100, MaxBoxBytes: 350, MaxTotalBytes: 1 << 20, Retention: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big := func(n int) []json.RawMessage {
		out := make([]json.RawMessage, n)
		for i := range out {
			out[i] = json.RawMessage(`"` + strings.Repeat("x", 18) + `"`) // 20 bytes
		}
		return out
	}
	if _, err := s.Append(t.Context(), "b", "r1", wire.ReplicaBatch{Status: "running", First: 1, Events: big(8)}); err != nil {
		t.Fatal(err)
	}
	evs, _ := s.Events(t.Context(), "b", "r1", 0, 100)
	if len(evs) != 1 || evs[0].Seq != 8 {
		t.Fatalf("a run of 8 events of 84 bytes under a bound of 100 keeps %+v, want the newest one", evs)
	}
	for i, r := range []string{"r2", "r3"} {
		now = now.Add(time.Duration(i+1) * time.Minute)
		if _, err := s.Append(t.Context(), "b", r, wire.ReplicaBatch{Status: "done", First: 1, Events: big(1)}); err != nil {
			t.Fatal(err)
		}
	}
	runs, _ := s.Runs(t.Context(), "b")
	if len(runs) != 2 || runs[0].ID != "r2" || runs[1].ID != "r3" {
		t.Errorf("a box over its bound holds %+v, want its newest runs r2 and r3", runs)
	}
	now = now.Add(2 * time.Hour)
	if n, err := s.Prune(t.Context()); err != nil || n != 2 {
		t.Errorf("Prune = %d, %v; want both runs", n, err)
	}
}

// TestAppend_refusals: a box cannot grow the replica past its bounds with
// what is not counted: too many events in a batch, a long session id, a
// made-up status; runs without events count too, per box and in total.
func TestAppend_refusals(t *testing.T) {
	s, err := Open(t.Context(), t.TempDir(), Options{MaxBoxRuns: 3, MaxTotalBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, b := range map[string]wire.ReplicaBatch{
		"too many events":   {Status: "running", First: 1, Events: events(1, MaxBatchEvents+1)},
		"a long session id": {Status: "running", First: 1, SessionID: strings.Repeat("s", 129)},
		"a made-up status":  {Status: "pwned", First: 1},
	} {
		if _, err := s.Append(t.Context(), "b", "r", b); !errorsAs[*BatchError](err) {
			t.Errorf("%s: %v, want a *BatchError", name, err)
		}
	}
	for i := range 10 {
		if _, err := s.Append(t.Context(), "b", fmt.Sprintf("r%d", i), wire.ReplicaBatch{Status: "running", First: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if runs, _ := s.Runs(t.Context(), "b"); len(runs) != 3 || runs[2].ID != "r9" {
		t.Errorf("a box of 10 empty runs under a bound of 3 holds %+v", runs)
	}
	for i := range 20 {
		if _, err := s.Append(t.Context(), fmt.Sprintf("box%d", i), "r", wire.ReplicaBatch{Status: "running", First: 1, Events: events(1, 2)}); err != nil {
			t.Fatal(err)
		}
	}
	var all int
	for i := range 20 {
		runs, _ := s.Runs(t.Context(), fmt.Sprintf("box%d", i))
		all += len(runs)
	}
	if all >= 20 {
		t.Errorf("20 boxes of about 150 bytes under a total bound of 1000 hold %d runs", all)
	}
}

func errorsAs[T error](err error) bool {
	_, ok := errors.AsType[T](err)
	return ok
}

// TestTurns: a box's turns in the order they started, the first record
// of a run standing; a box that continued another's sessions lists them
// with the box that ran them; the bounds and refusals hold, and the
// records outlive a reopen and go with the retention.
func TestTurns(t *testing.T) {
	dir := t.TempDir()
	now := time.UnixMilli(1_000_000)
	clock := func() time.Time { return now }
	s, err := Open(t.Context(), dir, Options{MaxBoxRuns: 3, Retention: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range []Turn{
		{Run: "run-1", SessionID: "s1", TurnID: "t1", Prompt: "first", At: 10},
		{Run: "run-2", SessionID: "s1", TurnID: "t2", Prompt: "second", At: 20},
		{Run: "run-1", SessionID: "s1", TurnID: "t1", Prompt: "again", At: 30}, // a retry: the first record stands
	} {
		if err := s.NoteTurn(t.Context(), "box-a", tr); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
	}
	if err := s.NoteTurn(t.Context(), "box-b", Turn{Run: "run-1", RunBox: "box-a", SessionID: "s1", Prompt: "first", At: 10}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Turns(t.Context(), "box-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Prompt != "first" || got[1].Prompt != "second" || got[0].RunBox != "box-a" {
		t.Fatalf("box-a's turns: %+v", got)
	}
	if got, _ := s.Turns(t.Context(), "box-b"); len(got) != 1 || got[0].RunBox != "box-a" {
		t.Fatalf("box-b's turns: %+v", got)
	}
	for _, bad := range []Turn{
		{Run: "", SessionID: "s"},
		{Run: "r", SessionID: ""},
		{Run: "r", SessionID: strings.Repeat("s", 129)},
		{Run: "r", SessionID: "s", Prompt: strings.Repeat("p", MaxPromptBytes+1)},
	} {
		if err := s.NoteTurn(t.Context(), "box-a", bad); !errors.As(err, new(*BatchError)) {
			t.Errorf("%.40v: %v, want a *BatchError", bad, err)
		}
	}
	// A retry at the cap evicts nothing.
	if err := s.NoteTurn(t.Context(), "box-c", Turn{Run: "c1", SessionID: "s", At: 1}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"c2", "c3", "c2", "c3"} {
		if err := s.NoteTurn(t.Context(), "box-c", Turn{Run: r, SessionID: "s", At: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := s.Turns(t.Context(), "box-c"); len(got) != 3 || got[0].Run != "c1" {
		t.Fatalf("turns after retries at the cap: %+v", got)
	}
	// Past MaxBoxRuns the oldest turn goes.
	for i := range 3 {
		if err := s.NoteTurn(t.Context(), "box-a", Turn{Run: fmt.Sprintf("run-%d", 3+i), SessionID: "s1", Prompt: "p", At: int64(40 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := s.Turns(t.Context(), "box-a"); len(got) != 3 || got[0].Run != "run-3" {
		t.Fatalf("bounded turns: %+v", got)
	}
	s.Close()
	if s, err = Open(t.Context(), dir, Options{Retention: time.Hour, Now: clock}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _ := s.Turns(t.Context(), "box-b"); len(got) != 1 {
		t.Fatalf("after a reopen: %+v", got)
	}
	now = now.Add(2 * time.Hour)
	if _, err := s.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Turns(t.Context(), "box-a"); len(got) != 0 {
		t.Fatalf("after the retention: %+v", got)
	}
}
