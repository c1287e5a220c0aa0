package sandbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// The sandbox flow runs on E2B too: the e2b client on the E2B emulator,
// whose sandboxes are containers on the test bed's engine and network
// (so they reach the fixture's model endpoint), with the box image
// published as a template through the emulator.

// TestProvider_E2BGoneMidTurn deletes a sandbox behind the client's back
// (another client's DELETE /sandboxes/{id}) while a turn streams: the turn
// fails with the typed gone error within 5s, not a hang.
func TestProvider_E2BGoneMidTurn(t *testing.T) {
	t.Parallel()
	f := setup(t)
	env := e2btest.Shared(t)
	tg := sandboxtest.E2BTarget(t, f)
	p := f.On(t, tg, nil)
	e, err := p.Create(t.Context(), sandbox.CreateRequest{Profile: claude})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Destroy(context.WithoutCancel(t.Context())) })
	marker := promptStall + " " + randText()
	errC := make(chan error, 1)
	go func() {
		_, _, err := sandboxtest.Turn(t.Context(), e, provider.Turn{Prompt: marker})
		errC <- err
	}()
	// Once the turn's model call is in flight, another client deletes the
	// sandbox.
	polltest.Until(t, 2*time.Minute, "the turn's model call", func() bool { return f.SawPrompt(marker) })
	other, err := env.Client(t).Connect(t.Context(), e.Box().ID())
	if err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	if err := other.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errC:
		took := time.Since(gone)
		if !errors.Is(err, vendors.ErrGone) {
			t.Errorf("Stream after the sandbox was deleted = %v, want an error matching vendors.ErrGone", err)
		}
		var ge *vendors.GoneError
		if errors.As(err, &ge) && ge.ID != e.Box().ID() {
			t.Errorf("gone error names box %s, want %s", ge.ID, e.Box().ID())
		}
		if took > 5*time.Second {
			t.Errorf("the gone error took %v, want within 5s", took)
		}
		t.Logf("gone error after %v: %v", took.Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("Stream still running 30s after the sandbox was deleted")
	}
	// Destroying it still works: the box is gone, and so is its run.
	if err := e.Destroy(context.WithoutCancel(t.Context())); err != nil && !errors.Is(err, vendors.ErrGone) {
		t.Errorf("Destroy of the deleted box = %v, want nil or the gone error", err)
	}
	if _, err := tg.Vendor.Connect(t.Context(), e.Box().ID()); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Connect(deleted box) = %v, want ErrNotFound", err)
	}
}
