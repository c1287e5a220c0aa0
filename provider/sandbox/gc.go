package sandbox

import (
	"context"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// GCOptions tunes GC: the reaper's options.
type GCOptions = reaper.Options

// Reaped is a box GC removed (or, with DryRun, would remove), with its
// reason (reaper.ReasonExpired, ...).
type Reaped = reaper.Reaped

// GC removes the vendor's boxes that are past their deadline, whose owning
// process is gone, or that their owner's state forgot: reaper.Reap, the
// one reaper of every box boxctl makes.
func GC(ctx context.Context, v vendors.Vendor, o GCOptions) ([]Reaped, error) {
	return reaper.Reap(ctx, v, o)
}
