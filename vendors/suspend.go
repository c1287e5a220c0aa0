package vendors

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// StateSuspended is a box that Suspender.Suspend stopped with its disk
// kept: it runs nothing and uses no CPU or memory until Resume.
const StateSuspended State = "suspended"

// DefaultRetention is how long a suspended box is kept when its create
// spec names no retention of its own.
const DefaultRetention = 7 * 24 * time.Hour

// Suspender is a vendor whose boxes can stop with their disk kept and
// start again later: the optional capability behind suspend, resume and
// fork. A box is suspendable only when its CreateSpec.Retention was set
// (FieldRetention); the others are refused with ErrNotSuspendable.
//
// Lifetimes of a suspendable box: its CreateSpec.Lifetime is an active
// budget, used only while the box runs (a suspended box keeps what is
// left of it), and its retention bounds how long it may stay suspended,
// counted from each suspend. Info.Deadline is the end of whichever of the
// two applies now, so a reaper ends a box past either.
type Suspender interface {
	// Suspend stops box id and keeps its disk; it returns once the box
	// runs nothing. Suspending a suspended box is not an error.
	Suspend(ctx context.Context, id string) (SuspendInfo, error)
	// Resume starts suspended box id again and returns it running, with
	// no process of its earlier run left (Spawn's names are free again).
	// A box past its retention is *RetentionError.
	Resume(ctx context.Context, id string) (Box, error)
	// Fork makes n new suspended boxes from suspended box id's disk,
	// with its labels and what is left of its budget; it returns their
	// ids. On an error nothing it made is left, or the error is a
	// *CleanupError naming a box it could not remove.
	Fork(ctx context.Context, id string, n int) ([]string, error)
}

// SuspendInfo is what Suspend left.
type SuspendInfo struct {
	// SuspendedAt is when the box stopped.
	SuspendedAt time.Time
	// BudgetLeft is the active time the box has left.
	BudgetLeft time.Duration
	// RetainUntil is when the suspended box is removed (by the vendor
	// where it can, by gc in any case).
	RetainUntil time.Time
}

// ErrNotSuspendable is matched by a suspend, resume or fork of a box that
// cannot do it: a vendor without Suspender, a box made without a
// retention, or a resume of a box that is not suspended.
var ErrNotSuspendable = errors.New("box is not suspendable")

// NotSuspendableError names the box and why. It matches
// ErrNotSuspendable.
type NotSuspendableError struct {
	Vendor, ID, Reason string
}

func (e *NotSuspendableError) Error() string {
	return fmt.Sprintf("%s: box %s: %s", e.Vendor, e.ID, e.Reason)
}

// Is reports ErrNotSuspendable.
func (e *NotSuspendableError) Is(target error) bool { return target == ErrNotSuspendable }

// ErrRetentionExpired is matched by a resume of a box suspended past its
// retention, or whose active budget is used up.
var ErrRetentionExpired = errors.New("box lifetime is over")

// RetentionError is a box that may not run again: suspended past its
// retention, or with no active budget left. It matches
// ErrRetentionExpired.
type RetentionError struct {
	Vendor, ID string
	// Until is the end that passed.
	Until time.Time
	// Budget is set when the active budget, not the retention, ran out.
	Budget bool
}

func (e *RetentionError) Error() string {
	what := "retention"
	if e.Budget {
		what = "active budget"
	}
	return fmt.Sprintf("%s: box %s: its %s ended at %s", e.Vendor, e.ID, what, e.Until.UTC().Format(time.RFC3339))
}

// Is reports ErrRetentionExpired.
func (e *RetentionError) Is(target error) bool { return target == ErrRetentionExpired }
