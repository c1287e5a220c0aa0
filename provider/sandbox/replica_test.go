package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
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

// TestReplica_LiveBoxLost: the box's container is removed from under a
// streaming turn (no destroy of boxctl's): the stream reads the rest of
// the run from the replica (every event the bridge stored before the
// loss, none twice) and ends on a terminal status that says the box was
// lost; the loss is a lifecycle event of its own, the box's token is
// retired, and the next turn is a *sandbox.LostError.
func TestReplica_LiveBoxLost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var mu sync.Mutex
	var lost []sandbox.Event
	p := f.Provider(t, func(o *sandbox.Options) {
		o.OnEvent = func(ev sandbox.Event) {
			if ev.Type == sandbox.EventLost || ev.Type == sandbox.EventTurnEnded {
				mu.Lock()
				lost = append(lost, ev)
				mu.Unlock()
			}
		}
	})
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var (
		seen     []provider.Event
		terminal *provider.Event
		parts    int
	)
	for ev, err := range env.Stream(t.Context(), provider.Turn{Prompt: sandboxtest.PromptPaced}) {
		if err != nil {
			t.Fatalf("the stream failed: %v (after %d events)", err, len(seen))
		}
		seen = append(seen, ev)
		if ev.Type == provider.EventMessagePart {
			if parts++; parts == 3 {
				if err := cli.ContainerRemove(t.Context(), env.Box().ID(), container.RemoveOptions{Force: true}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if ev.Type == provider.EventStatus && ev.Status != "" && ev.Status != "running" {
			terminal = &seen[len(seen)-1]
		}
	}
	if terminal == nil || terminal.Status != provider.StatusFailed || !strings.HasPrefix(terminal.Detail, sandbox.DetailBoxLost) {
		t.Fatalf("the stream ended on %+v, want a failed status saying the box was lost", terminal)
	}
	seqs := map[string]bool{}
	frames := map[int64]bool{}
	var last int64
	for _, ev := range seen {
		if ev.ID == "" {
			continue
		}
		n := ev.Frame()
		if seqs[ev.ID] || n < last {
			t.Errorf("event %s came twice or out of order", ev.ID)
		}
		seqs[ev.ID], frames[n], last = true, true, n
	}
	held, err := f.Replica.Events(t.Context(), env.Box().ID(), terminal.RunID, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range held {
		if !frames[h.Seq] {
			t.Errorf("the replica's event %d never reached the reader", h.Seq)
		}
	}
	for n := int64(1); n <= last; n++ {
		if !frames[n] {
			t.Errorf("the reader missed stored event %d of %d", n, last)
		}
	}
	if int64(len(held)) > last {
		t.Errorf("the reader saw events up to %d, the replica holds %d", last, len(held))
	}
	t.Logf("%d events read, %d of them stored before the loss; %d text parts streamed live", len(seen), len(held), parts)
	mu.Lock()
	var kinds []string
	for _, ev := range lost {
		kinds = append(kinds, string(ev.Type)+":"+ev.Reason)
	}
	mu.Unlock()
	if len(kinds) != 2 || kinds[0] != "lost:the vendor no longer has the box" || kinds[1] != "turn.ended:lost" {
		t.Errorf("lifecycle events %q, want lost (with the vendor's reason), then the turn's end", kinds)
	}
	if _, _, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "after the loss"}); !errorsAs[*sandbox.LostError](err) {
		t.Errorf("a turn after the loss: %v, want a *sandbox.LostError", err)
	}
}

func errorsAs[T error](err error) bool {
	_, ok := errors.AsType[T](err)
	return ok
}

// TestReplica_LiveRunEventsAfterLoss: a dispatched turn nobody reads; its
// box's container is removed once the replica holds part of the run: a
// reader of the run gets every event the replica holds, in order, then a
// failed status saying the box was lost.
func TestReplica_LiveRunEventsAfterLoss(t *testing.T) {
	t.Parallel()
	f := setup(t)
	env := create(t, f.Provider(t, nil), sandbox.CreateRequest{Profile: claude})
	ref, err := env.Dispatch(t.Context(), provider.Turn{Prompt: sandboxtest.PromptPaced})
	if err != nil {
		t.Fatal(err)
	}
	runID := ref.ControlRef.RunID
	polltest.Until(t, 30*time.Second, "the replica to hold part of the run", func() bool {
		evs, err := f.Replica.Events(t.Context(), env.Box().ID(), runID, 0, 100)
		return err == nil && len(evs) >= 4
	})
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := cli.ContainerRemove(t.Context(), env.Box().ID(), container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	held, err := f.Replica.Events(t.Context(), env.Box().ID(), runID, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var got []provider.Event
	for ev, err := range env.RunEvents(t.Context(), runID, 0) {
		if err != nil {
			t.Fatalf("reading the lost box's run: %v (after %d events)", err, len(got))
		}
		got = append(got, ev)
	}
	if len(got) == 0 {
		t.Fatal("no event read")
	}
	end := got[len(got)-1]
	if end.Type != provider.EventStatus || end.Status != provider.StatusFailed || !strings.HasPrefix(end.Detail, sandbox.DetailBoxLost) {
		t.Errorf("the read ended on %+v, want the box's loss", end)
	}
	frames := map[int64]bool{}
	for _, ev := range got[:len(got)-1] {
		frames[ev.Frame()] = true
	}
	for _, h := range held {
		if !frames[h.Seq] {
			t.Errorf("the replica's event %d was not read", h.Seq)
		}
	}
	t.Logf("%d events read of the %d the replica held at the loss", len(got)-1, len(held))
}

// TestReplica_LiveReplace: a box with two sessions is removed from under
// a turn of one; Replace continues both on a new box. The model endpoint
// gets each session's history (its own only) with the session's next
// turn, the interrupted turn is offered and runs again under its own ids
// once however often it is sent, a later turn goes without the
// transcript (the harness holds the session now), a process that
// connects to the new box rebuilds the history from the replica, and the
// lost box's runs stay readable from the new environment at their
// cursors. A box that is not lost is not replaced.
func TestReplica_LiveReplace(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var mu sync.Mutex
	var replaced []sandbox.Event
	p := f.Provider(t, func(o *sandbox.Options) {
		o.OnEvent = func(ev sandbox.Event) {
			if ev.Type == sandbox.EventReplaced {
				mu.Lock()
				replaced = append(replaced, ev)
				mu.Unlock()
			}
		}
	})
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	if _, _, err := env.Replace(t.Context(), sandbox.ReplaceOptions{}); !errors.Is(err, sandbox.ErrNotLost) {
		t.Fatalf("Replace of a live box: %v, want ErrNotLost", err)
	}
	markA, markB, sessA, sessB := "marker-a-"+sandboxtest.RandText(), "marker-b-"+sandboxtest.RandText(), "sess-a-"+sandboxtest.RandText(), "sess-b-"+sandboxtest.RandText()
	_, evsA, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Remember " + markA, SessionID: sessA})
	if err != nil {
		t.Fatal(err)
	}
	firstRun := evsA[0].RunID
	_, evsB, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Remember " + markB, SessionID: sessB})
	if err != nil {
		t.Fatal(err)
	}
	replicated(t, f, env.Box().ID(), firstRun, evsB[0].RunID)
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	parts := 0
	var cut string
	for ev, err := range env.Stream(t.Context(), provider.Turn{Prompt: sandboxtest.PromptPaced, SessionID: sessA}) {
		if err != nil {
			t.Fatalf("the cut turn's stream: %v", err)
		}
		cut = ev.RunID
		if ev.Type == provider.EventMessagePart {
			if parts++; parts == 2 {
				if err := cli.ContainerRemove(t.Context(), env.Box().ID(), container.RemoveOptions{Force: true}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	next, rep, err := env.Replace(t.Context(), sandbox.ReplaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := next.Destroy(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("destroy the new box: %v", err)
		}
	})
	want := []sandbox.ContinuedSession{{ID: sessA, Turns: 1, Method: sandbox.ContinuedByTranscript}, {ID: sessB, Turns: 1, Method: sandbox.ContinuedByTranscript}}
	slices.SortFunc(want, func(a, b sandbox.ContinuedSession) int { return strings.Compare(a.ID, b.ID) })
	if rep.From != env.Box().ID() || rep.To != next.Box().ID() || !slices.Equal(rep.Sessions, want) {
		t.Fatalf("replacement %+v, want sessions %+v", rep, want)
	}
	if len(rep.Interrupted) != 1 || rep.Interrupted[0].RunID != cut || rep.Interrupted[0].Prompt != sandboxtest.PromptPaced {
		t.Fatalf("interrupted %+v, want run %s", rep.Interrupted, cut)
	}
	mu.Lock()
	if len(replaced) != 1 || replaced[0].BoxID != rep.To || !strings.Contains(replaced[0].Detail, rep.From) {
		t.Errorf("replaced events %+v", replaced)
	}
	mu.Unlock()

	// The interrupted turn, twice: one run, which got session A's history.
	again := rep.Interrupted[0].Turn()
	for i := range 2 {
		_, evs, err := sandboxtest.Turn(t.Context(), next, again)
		if err != nil {
			t.Fatalf("the interrupted turn, run %d: %v", i+1, err)
		}
		if evs[0].RunID != cut {
			t.Errorf("the interrupted turn ran as %s, want its own run %s", evs[0].RunID, cut)
		}
	}
	if n := f.PromptsWith([]string{markA, "assistant: " + sandboxtest.ReplyText, sandboxtest.PromptPaced}, markB); n != 1 {
		t.Errorf("the model got %d requests of the interrupted turn with session A's history (and not B's), want 1", n)
	}
	// A later turn of session A goes without the transcript.
	markA2 := "marker-a2-" + sandboxtest.RandText()
	if _, _, err := sandboxtest.Turn(t.Context(), next, provider.Turn{Prompt: "And " + markA2, SessionID: sessA}); err != nil {
		t.Fatal(err)
	}
	if f.PromptsWith([]string{markA2}, markA) != 1 {
		t.Errorf("a later turn carried the transcript again")
	}
	// Another process connects to the new box: session B's history comes
	// from the replica.
	other, err := f.Provider(t, nil).Connect(t.Context(), next.Reference())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.WithoutCancel(t.Context()))
	markB2 := "marker-b2-" + sandboxtest.RandText()
	if _, _, err := sandboxtest.Turn(t.Context(), other, provider.Turn{Prompt: "And " + markB2, SessionID: sessB}); err != nil {
		t.Fatal(err)
	}
	if n := f.PromptsWith([]string{markB, markB2}, markA); n != 1 {
		t.Errorf("the connected process's turn of session B: %d requests with B's history, want 1", n)
	}
	// The lost box's first run, from the new environment, after a cursor.
	var read []provider.Event
	for ev, err := range next.RunEvents(t.Context(), firstRun, 2) {
		if err != nil {
			t.Fatalf("the lost box's run from the new box: %v", err)
		}
		read = append(read, ev)
	}
	if len(read) == 0 {
		t.Fatal("nothing read of the lost box's run after event 2")
	}
	if read[0].Frame() != 3 || read[len(read)-1].Type != provider.EventResult && read[len(read)-1].Status != provider.StatusCompleted {
		t.Errorf("the lost box's run after event 2: %d events, first %+v, last %+v", len(read), read[0], read[len(read)-1])
	}
}

// TestReplica_LiveAutoReplace: with Options.AutoReplace, the turn after
// a box's loss runs on a new box that continues its session (the model
// gets the history), the environment drives that box from then on, and
// its Destroy reaches it. Without the option the turn is a LostError.
func TestReplica_LiveAutoReplace(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, auto := range []bool{false, true} {
		p := f.Provider(t, func(o *sandbox.Options) { o.AutoReplace = auto })
		env := create(t, p, sandbox.CreateRequest{Profile: claude})
		mark, sess := "auto-marker-"+sandboxtest.RandText(), "sess-"+sandboxtest.RandText()
		_, evs, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Remember " + mark, SessionID: sess})
		if err != nil {
			t.Fatal(err)
		}
		replicated(t, f, env.Box().ID(), evs[0].RunID)
		if err := cli.ContainerRemove(t.Context(), env.Box().ID(), container.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		ask := "which marker " + sandboxtest.RandText()
		_, _, err = sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: ask, SessionID: sess})
		if !auto {
			if !errorsAs[*sandbox.LostError](err) || env.Successor() != nil {
				t.Fatalf("without AutoReplace: %v, successor %v; want a LostError and none", err, env.Successor())
			}
			continue
		}
		if err != nil {
			t.Fatalf("the turn after the loss: %v", err)
		}
		next := env.Successor()
		if next == nil || next.Box().ID() == env.Box().ID() {
			t.Fatal("no successor after the replacement")
		}
		if n := f.PromptsWith([]string{mark, "assistant: " + sandboxtest.ReplyText, ask}); n != 1 {
			t.Errorf("the model got %d requests with the turn and its history, want 1", n)
		}
		if err := env.Destroy(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.ContainerInspect(t.Context(), next.Box().ID()); err == nil {
			t.Errorf("the successor's box outlived the environment's Destroy")
		}
	}
}

// replicated waits until the replica holds the end of each of box's runs.
func replicated(t *testing.T, f *sandboxtest.Fixture, box string, runs ...string) {
	t.Helper()
	polltest.Until(t, time.Minute, "the replica to hold the runs' ends", func() bool {
		held, err := f.Replica.Runs(t.Context(), box)
		if err != nil {
			return false
		}
		ended := 0
		for _, r := range held {
			if slices.Contains(runs, r.ID) && r.Status != "running" {
				ended++
			}
		}
		return ended == len(runs)
	})
}
