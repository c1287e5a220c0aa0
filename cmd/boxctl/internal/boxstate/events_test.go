package boxstate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tangle-network/boxctl/provider/sandbox"
)

func eventLog(t *testing.T) *EventLog {
	t.Helper()
	s, err := Open(Options{Path: filepath.Join(t.TempDir(), "state", "boxes.json")})
	if err != nil {
		t.Fatal(err)
	}
	return s.Events()
}

func readAll(t *testing.T, l *EventLog) []sandbox.Event {
	t.Helper()
	var got []sandbox.Event
	if err := l.Read(t.Context(), false, func(ev sandbox.Event) error { got = append(got, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestEventLog_AppendRead(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []sandbox.Event{
		{Time: at, Type: sandbox.EventCreated, Vendor: "docker", BoxID: "b1", RunTag: "run-x"},
		{Time: at, Type: sandbox.EventReady, Vendor: "docker", BoxID: "b1", RunTag: "run-x"},
		{Time: at, Type: sandbox.EventDestroyed, Vendor: "docker", BoxID: "b1", Reason: sandbox.ReasonUser},
	}
	tests := []struct {
		name string
		n    int
	}{{"empty log", 0}, {"one", 1}, {"all", len(evs)}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := eventLog(t)
			for _, ev := range evs[:tc.n] {
				if err := l.Append(ev); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(evs[:tc.n], readAll(t, l), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
			if tc.n > 0 {
				fi, err := os.Stat(l.Path())
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("event log mode = %v, %v, want 0600", fi.Mode(), err)
				}
			}
		})
	}
}

func TestEventLog_ConcurrentAppendsAndPartialLine(t *testing.T) {
	l := eventLog(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := l.Append(sandbox.Event{Type: sandbox.EventTurnStarted, BoxID: fmt.Sprint("b", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	evs := readAll(t, l)
	if len(evs) != 20 {
		t.Fatalf("read %d events, want 20", len(evs))
	}
	if evs[0].Time.IsZero() {
		t.Error("Append left an event without a time")
	}
	// A line a writer has not finished is not read yet.
	f, err := os.OpenFile(l.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"type":"turn.ended","boxId":"half`); err != nil {
		t.Fatal(err)
	}
	if got := len(readAll(t, l)); got != 20 {
		t.Errorf("read %d events with a half line, want 20", got)
	}
	if _, err := f.WriteString("\"}\n"); err != nil {
		t.Fatal(err)
	}
	if evs := readAll(t, l); len(evs) != 21 || evs[20].BoxID != "half" {
		t.Errorf("after the line ended: %d events, last %+v", len(evs), evs[len(evs)-1])
	}
}

func TestEventLog_Follow(t *testing.T) {
	l := eventLog(t) // the file does not exist yet
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	seen := make(chan sandbox.Event, 10)
	done := make(chan error, 1)
	go func() { done <- l.Read(ctx, true, func(ev sandbox.Event) error { seen <- ev; return nil }) }()
	deadline := time.After(30 * time.Second)
	for _, id := range []string{"b1", "b2"} {
		if err := l.Append(sandbox.Event{Type: sandbox.EventCreated, BoxID: id}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-seen:
			if ev.BoxID != id {
				t.Errorf("followed event of %s, want %s", ev.BoxID, id)
			}
		case <-deadline:
			t.Fatalf("the follower did not see the event of %s", id)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel = %v, want context.Canceled", err)
	}
}
