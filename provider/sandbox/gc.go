package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// GCOptions tunes GC: the reaper's options.
type GCOptions = reaper.Options

// Reaped is a box GC removed (or, with DryRun, would remove), with its
// reason (reaper.ReasonExpired, ...).
type Reaped = reaper.Reaped

// GC removes the vendor's boxes that are past their deadline, whose owning
// process is gone, or that their owner's state forgot: reaper.Reap, the
// one reaper of every box boxctl makes. SuspendIdle is the other half of
// `boxctl gc`.
func GC(ctx context.Context, v vendors.Vendor, o GCOptions) ([]Reaped, error) {
	return reaper.Reap(ctx, v, o)
}

// IdleOptions tunes SuspendIdle.
type IdleOptions struct {
	// Filter narrows the boxes considered to those with these labels
	// (e.g. one run tag). Default: every box the vendor made.
	Filter map[string]string
	// DryRun reports the boxes idle past their threshold and suspends
	// none.
	DryRun bool
	// OnEvent, when set, receives the suspended event (ReasonIdle) of
	// each box suspended.
	OnEvent func(Event)
	// Logger receives why a box was passed over. Default: discard.
	Logger *slog.Logger
}

// IdleSuspended is a box SuspendIdle suspended (with DryRun: would
// suspend).
type IdleSuspended struct {
	Box vendors.Info
	// Idle is how long its bridge had had no turn; After is the box's
	// threshold.
	Idle, After time.Duration
	// Suspended is what the suspend left (zero with DryRun, or when it
	// failed).
	Suspended vendors.SuspendInfo
	// Err is the failed suspend, if it failed.
	Err error
}

// SuspendIdle suspends each running box of v made with an idle threshold
// (Options.IdleSuspend, recorded as its boxmeta.LabelIdleSuspend) whose
// bridge has had no turn for that long: the idle clock's watch of the
// boxes no process watches, which `boxctl gc` runs. It checks and
// suspends as Environment.Suspend does: the bridge's /health (no bearer
// needed, and no clock moved by reading it), a box with a live run passed
// over, the bridge stopped so that its store closes, then the vendor's
// suspend. A box whose bridge does not answer is passed over (logged).
// The error is for the listing only.
func SuspendIdle(ctx context.Context, v vendors.Vendor, o IdleOptions) ([]IdleSuspended, error) {
	s, ok := v.(vendors.Suspender)
	if !ok {
		return nil, nil // no box of v is suspendable
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	boxes, err := v.List(ctx, o.Filter)
	if err != nil {
		return nil, fmt.Errorf("idle suspend: %w", err)
	}
	var out []IdleSuspended
	for _, b := range boxes {
		label, ok := b.Labels[boxmeta.LabelIdleSuspend]
		if !ok || b.State != vendors.StateRunning {
			continue
		}
		r, err := suspendIfIdle(ctx, v, s, b, label, o)
		if err != nil {
			log.Debug("idle suspend: box passed over", "box", b.ID, "err", err)
			continue
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, nil
}

// suspendIfIdle suspends box b if its bridge has been idle past label's
// threshold: nil when it has not, an error when it cannot tell.
func suspendIfIdle(ctx context.Context, v vendors.Vendor, s vendors.Suspender, b vendors.Info, label string, o IdleOptions) (*IdleSuspended, error) {
	after, err := boxmeta.ParseIdle(label)
	if err != nil {
		return nil, err
	}
	box, err := v.Connect(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	idle, err := turnBoundary(ctx, box, "gc.SuspendIdle")
	if err != nil {
		return nil, err
	}
	r := &IdleSuspended{Box: b, Idle: time.Duration(idle.IdleMS) * time.Millisecond, After: after}
	if r.Idle < after {
		return nil, nil
	}
	if o.DryRun {
		return r, nil
	}
	stopBridge(ctx, box)
	if r.Suspended, r.Err = s.Suspend(ctx, b.ID); r.Err == nil && o.OnEvent != nil {
		o.OnEvent(Event{Time: time.Now().UTC(), Type: EventSuspended, Vendor: v.Name(), BoxID: b.ID, RunTag: b.RunTag(), Reason: ReasonIdle})
	}
	return r, nil
}
