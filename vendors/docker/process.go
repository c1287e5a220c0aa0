package docker

import (
	"context"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// Process is a process started by Spawn.
type Process = boxproc.Process

// procLayer is the box's Spawn, Process, Read and Write (vendors.Procs),
// embedded under a name of the package's own.
type procLayer = vendors.Procs

// newBox returns the box of container id, its process methods over the
// engine's exec API: each command an exec whose session a cancelled
// context kills.
func (v *Vendor) newBox(id string) *Box {
	b := &Box{v: v, id: id}
	b.procLayer = vendors.NewProcs(Name, func(ctx context.Context, c boxproc.Command) (int, error) {
		return b.stream(ctx, c.Op, c.Argv, nil, "", c.Stdin, c.Stdout, c.Stderr)
	})
	return b
}
