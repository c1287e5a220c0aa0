package reaper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Options tunes Reap.
type Options struct {
	// Filter narrows the boxes considered to those with these labels
	// (e.g. one run tag). Default: every box the vendor made.
	Filter map[string]string
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
	// Known reports whether a box owned by a user's state (UserOwner) is
	// still in that state. Reap asks it about every user-owned box, other
	// users' and other states' included: answer true for an owner that is
	// not the caller's. Nil keeps such boxes until their deadline. A
	// pooled box (boxmeta.LabelPool) it knows is kept when its keeper
	// process is gone: a claim recorded it.
	Known func(vendors.Info) bool
	// Now is the current time. Default: time.Now.
	Now func() time.Time
}

// Reaped is a box Reap removed (or, with DryRun, would remove).
type Reaped struct {
	Box    vendors.Info
	Reason string
	// Err is the failed destroy, if it failed.
	Err error
}

// Reasons a box is reaped.
const (
	ReasonExpired   = "past its deadline"
	ReasonOwnerGone = "its owner is gone"
	ReasonForgotten = "no longer in its owner's state"
	// ReasonLeftover: processes a failed start left on the host, which
	// the vendor's control plane no longer lists (vendors.Sweeper).
	ReasonLeftover = "processes left by a failed start"
)

// Reap removes the vendor's boxes that are past their deadline, whose
// owning process is gone, or that their owner's state forgot. It returns
// every box it chose, with the destroy's error where one failed; the
// error is for the listing only. A box already gone when Reap connects to
// it counts as removed. A vendor that is a vendors.Sweeper then ends what
// failed starts left behind, reported with ReasonLeftover.
func Reap(ctx context.Context, v vendors.Vendor, o Options) ([]Reaped, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	boxes, err := v.List(ctx, o.Filter)
	if err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	var out []Reaped
	for _, b := range boxes {
		reason := ""
		switch owner := b.Owner(); {
		case !b.Deadline.IsZero() && now().After(b.Deadline):
			reason = ReasonExpired
		case OwnerGone(owner) && !(b.Labels[boxmeta.LabelPool] != "" && o.Known != nil && o.Known(b)):
			// A pooled box a claim recorded in a state outlives its keeper.
			reason = ReasonOwnerGone
		case IsUserOwner(owner) && o.Known != nil && !o.Known(b):
			reason = ReasonForgotten
		}
		if reason == "" {
			continue
		}
		r := Reaped{Box: b, Reason: reason}
		if !o.DryRun {
			if box, err := v.Connect(ctx, b.ID); err == nil {
				r.Err = box.Destroy(ctx)
			} else if !isNotFound(err) {
				r.Err = err
			}
		}
		out = append(out, r)
	}
	sw, ok := v.(vendors.Sweeper)
	if !ok {
		return out, nil
	}
	left, err := sw.Sweep(ctx, o.DryRun)
	for _, l := range left {
		out = append(out, Reaped{Box: vendors.Info{ID: l.BoxID, Vendor: v.Name()}, Reason: ReasonLeftover, Err: l.Err})
	}
	if err != nil {
		return out, fmt.Errorf("reap: sweep: %w", err)
	}
	return out, nil
}

func isNotFound(err error) bool {
	return err != nil && errors.Is(err, vendors.ErrNotFound)
}
