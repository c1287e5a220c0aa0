package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

func appendEvent(t *testing.T, ev sandbox.Event) {
	t.Helper()
	s, err := boxstate.Open(boxstate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Events().Append(ev); err != nil {
		t.Fatal(err)
	}
}

func TestEvents(t *testing.T) {
	useState(t)
	out, _, err := run(t, "events")
	if err != nil || out != "" {
		t.Fatalf("events of an empty log = %q, %v; want nothing", out, err)
	}
	appendEvent(t, sandbox.Event{Type: sandbox.EventCreated, Vendor: "docker", BoxID: "b1"})
	appendEvent(t, sandbox.Event{Type: sandbox.EventDestroyed, Vendor: "docker", BoxID: "b1", Reason: sandbox.ReasonUser})
	out, _, err = run(t, "events")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("events printed %d lines, want 2:\n%s", len(lines), out)
	}
	var ev sandbox.Event
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil || ev.Type != sandbox.EventDestroyed || ev.Reason != sandbox.ReasonUser {
		t.Errorf("second line = %s (%v), want the destroyed event by the user", lines[1], err)
	}
}

func TestEvents_Follow(t *testing.T) {
	useState(t)
	var out syncBuffer
	cmd := newRootCmd(newApp(&out, &bytes.Buffer{}))
	cmd.SetArgs([]string{"events", "-f"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	appendEvent(t, sandbox.Event{Type: sandbox.EventReady, Vendor: "docker", BoxID: "b2"})
	polltest.UntilNil(t, 30*time.Second, "events -f to print the new event", func() error {
		if strings.Contains(out.String(), `"boxId":"b2"`) {
			return nil
		}
		return fmt.Errorf("printed %q", out.String())
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("events -f after an interrupt = %v, want nil", err)
	}
}
