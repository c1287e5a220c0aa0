package sandbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
)

// The sandbox flow also runs on Daytona's emulator: each test gets an
// emulator of its own whose sandboxes are the box image on the test bed's
// engine, on the boxes' network (where the model endpoint listens).

// daytonaDescribe returns what the emulator shows of a box: the control
// plane's sandbox, the toolbox's sessions (their commands' text) and the
// engine's inspect data of the sandbox's container and its execs.

// TestProvider_DaytonaBoxVanishesMidTurn deletes a box behind the
// provider's back while a turn streams: the turn ends with the typed gone
// error within 5s.
func TestProvider_DaytonaBoxVanishesMidTurn(t *testing.T) {
	t.Parallel()
	f := setup(t)
	emu, v := sandboxtest.DaytonaEmulator(t, f, daytonaemu.Options{})
	p := f.On(t, target{Name: "daytona", Vendor: v, Image: "box"}, nil)
	env, err := p.Create(t.Context(), sandbox.CreateRequest{Profile: claude})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = env.Destroy(context.WithoutCancel(t.Context())) })

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	events, errc := make(chan provider.Event, 64), make(chan error, 1)
	go func() {
		_, evs, err := sandboxtest.Turn(ctx, env, provider.Turn{Prompt: promptStall})
		for _, ev := range evs {
			events <- ev
		}
		errc <- err
	}()
	polltest.Until(t, time.Minute, "the stalled turn to reach the model", func() bool { return f.SawPrompt(promptStall) })
	start := time.Now()
	if err := emu.Vanish(env.Box().ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		took := time.Since(start)
		if !errors.Is(err, vendors.ErrGone) {
			t.Fatalf("turn after the box vanished = %v, want vendors.ErrGone", err)
		}
		if took > 5*time.Second {
			t.Errorf("the gone error came %v after the box vanished, want within 5s", took)
		}
		t.Logf("turn ended %v after the box vanished: %v", took.Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the turn still runs 30s after its box vanished")
	}
}
