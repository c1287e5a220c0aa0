package kubernetes

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

// box returns the box of Sandbox id in pod, its process methods over the
// pod's exec subresource: each command an exec whose session a cancelled
// context kills, with nothing of a spawned process's environment in the
// pod spec or an exec's command line (nor the API server's audit log).
func (v *Vendor) box(id, pod string) *Box {
	b := &Box{v: v, id: id, pod: pod}
	b.procLayer = vendors.NewProcs(Name, func(ctx context.Context, c boxproc.Command) (int, error) {
		return b.exec(ctx, c.Op, c.Argv, nil, "", c.Stdin, c.Stdout, c.Stderr)
	})
	return b
}
