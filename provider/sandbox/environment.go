package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/vendors"
)

// Reference is what a process needs to drive a box again (Provider.Connect).
// Bearer is a secret: String and LogValue redact it; only the JSON form
// carries it.
type Reference struct {
	Vendor   string `json:"vendor"`
	BoxID    string `json:"boxId"`
	Endpoint string `json:"endpoint"`
	Bearer   string `json:"bearer"`
	Harness  string `json:"harness"`
	// EnvironmentKey fixes the provider environment's id across
	// processes.
	EnvironmentKey string            `json:"environmentKey"`
	Profile        provider.Profile  `json:"profile"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]any    `json:"metadata,omitempty"`
	RunTag         string            `json:"runTag"`
	Deadline       time.Time         `json:"deadline"`
}

// String describes the reference without its bearer.
func (r Reference) String() string {
	return fmt.Sprintf("box %s on %s (%s, %s, until %s)", r.BoxID, r.Vendor, r.Harness, r.Endpoint, r.Deadline.Format(time.RFC3339))
}

// LogValue logs the reference without its bearer.
func (r Reference) LogValue() slog.Value {
	return slog.GroupValue(slog.String("vendor", r.Vendor), slog.String("box", r.BoxID), slog.String("endpoint", r.Endpoint),
		slog.String("harness", r.Harness), slog.Time("deadline", r.Deadline))
}

// GoString keeps %#v from printing the bearer.
func (r Reference) GoString() string { return "sandbox.Reference{" + r.String() + "}" }

// Format keeps every fmt verb from printing the bearer.
func (r Reference) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, r.String()) }

// Environment is a provider environment in a box: every provider
// operation, plus the box. It is safe for concurrent use.
type Environment struct {
	*provider.Environment
	p   *Provider
	pv  *provider.Provider
	box vendors.Box
	ref Reference

	mu   sync.Mutex
	busy bool
	last *provider.Reference // the latest dispatched run
}

// Box returns the box the environment runs in.
func (e *Environment) Box() vendors.Box { return e.box }

// Reference returns what Provider.Connect needs to drive this box from
// another process.
func (e *Environment) Reference() Reference { return e.ref }

func (e *Environment) acquire(ctx context.Context, op string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.busy {
		return busy(op)
	}
	if e.last != nil {
		s, err := e.Session(e.last.ID, provider.SessionOptions{ControlRef: &e.last.ControlRef})
		if err == nil {
			st, err := s.Status(ctx)
			if err == nil && !st.Terminal {
				return busy(op)
			}
		}
		e.last = nil
	}
	e.busy = true
	return nil
}

func (e *Environment) release() {
	e.mu.Lock()
	e.busy = false
	e.mu.Unlock()
}

func busy(op string) error {
	return &provider.ConflictError{Op: op, Type: wire.TypeSessionBusy, Message: "the environment's box is running another turn"}
}

// Stream starts a turn and yields its events until the run ends; see
// provider.Environment.Stream. A turn while another is live is refused
// with a *provider.ConflictError.
func (e *Environment) Stream(ctx context.Context, turn provider.Turn) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) {
		if err := e.acquire(ctx, "environment.Stream"); err != nil {
			yield(provider.Event{}, err)
			return
		}
		defer e.release()
		started := false
		for ev, err := range e.Environment.Stream(ctx, turn) {
			if err == nil && !started {
				started = true
				open := provider.Event{Type: provider.EventExecutionStarted, RunID: ev.RunID, SessionID: ev.SessionID,
					ExecutionID: ev.ExecutionID, Model: e.Model()}
				if turn.Model != "" {
					open.Model = turn.Model
				}
				if !yield(open, nil) {
					return
				}
			}
			if ev.Usage != nil && ev.Usage.Cost != nil {
				u := *ev.Usage
				u.Cost = nil // the bridge's dollar figure is an estimate
				ev.Usage = &u
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// Dispatch starts a turn and returns once the bridge admitted it; see
// provider.Environment.Dispatch. A turn while another is live is refused
// with a *provider.ConflictError.
func (e *Environment) Dispatch(ctx context.Context, turn provider.Turn) (provider.Reference, error) {
	if err := e.acquire(ctx, "environment.Dispatch"); err != nil {
		return provider.Reference{}, err
	}
	ref, err := e.Environment.Dispatch(ctx, turn)
	e.mu.Lock()
	e.busy = false
	if err == nil {
		e.last = &ref
	}
	e.mu.Unlock()
	return ref, err
}

// Destroy cancels the environment's live runs, then destroys the box, even
// when a cancel fails; a failed box destroy returns a *vendors.CleanupError
// naming the box.
func (e *Environment) Destroy(ctx context.Context) error {
	cancelErr := e.Environment.Destroy(ctx)
	_ = e.pv.Close(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultDestroyTimeout)
	defer cancel()
	if err := e.box.Destroy(cctx); err != nil {
		return &vendors.CleanupError{Vendor: e.ref.Vendor, BoxID: e.box.ID(), Err: errors.Join(cancelErr, fmt.Errorf("destroy box: %w", err))}
	}
	if cancelErr != nil {
		return fmt.Errorf("destroy: box removed; %w", cancelErr)
	}
	return nil
}

// Close releases the environment's connections and leaves the box
// running (reconnect with Provider.Connect).
func (e *Environment) Close(ctx context.Context) error { return e.pv.Close(ctx) }

// BridgeLog returns what the bridge process printed so far.
func (e *Environment) BridgeLog(ctx context.Context) (stdout, stderr []byte, err error) {
	proc, err := e.box.Process(ctx, BridgeProcess)
	if err != nil {
		return nil, nil, err
	}
	return proc.Logs(ctx)
}

// FollowBridgeLog follows the bridge process's output from its start until
// it ends or ctx ends; the caller closes the readers.
func (e *Environment) FollowBridgeLog(ctx context.Context) (stdout, stderr io.ReadCloser, err error) {
	proc, err := e.box.Process(ctx, BridgeProcess)
	if err != nil {
		return nil, nil, err
	}
	return proc.Output(ctx)
}
