package vendors

import "context"

// Sweeper is a vendor whose failed box starts can leave processes on the
// host that its control plane no longer lists: gVisor's sandbox and gofer
// under their shim, after a start under runsc failed on a Docker engine.
// Sweep ends them (with dryRun, only lists them). The reaper calls it
// after its pass over the boxes, so `boxctl gc` ends them too.
type Sweeper interface {
	Sweep(ctx context.Context, dryRun bool) ([]Leftover, error)
}

// Leftover is what a failed start left running: the id of the box the
// processes served, which the control plane may no longer know, and the
// processes.
type Leftover struct {
	BoxID string
	PIDs  []int
	// Err is why they could not all be ended, if they could not.
	Err error
}
