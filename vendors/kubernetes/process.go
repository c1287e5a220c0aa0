package kubernetes

import (
	"context"

	"github.com/tangle-network/boxctl/internal/boxproc"
	"github.com/tangle-network/boxctl/vendors"
)

// Process is a process started by Spawn.
type Process = boxproc.Process

var _ vendors.Process = (*Process)(nil)

// procs is the box to the process layer, over the pod's exec subresource:
// each command an exec whose session a cancelled context kills.
func (b *Box) procs() *boxproc.Box {
	return &boxproc.Box{Vendor: Name, Runner: boxproc.RunnerFunc(func(ctx context.Context, c boxproc.Command) (int, error) {
		return b.exec(ctx, c.Op, c.Argv, nil, "", c.Stdin, c.Stdout, c.Stderr)
	})}
}

// Spawn starts a detached process; see vendors.Box.Spawn. Its environment
// travels on the exec's stdin to a supervisor in the box
// (boxproc.Box.Spawn), so it is in no pod spec, no exec command line (nor
// the API server's audit log of it); only the started process's own
// environment holds it. The process outlives the exec that started it.
func (b *Box) Spawn(ctx context.Context, spec vendors.SpawnSpec) (vendors.Process, error) {
	p, err := b.procs().Spawn(ctx, boxproc.SpawnSpec(spec))
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Process returns a process Spawn started, by name.
func (b *Box) Process(ctx context.Context, id string) (vendors.Process, error) {
	p, err := b.procs().Process(ctx, id)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Read returns a regular file's content, as a tar stream from the box (as
// kubectl cp reads); a file still being written reads as it was.
func (b *Box) Read(ctx context.Context, p string) ([]byte, error) {
	return b.procs().Read(ctx, p)
}

// Write creates or replaces a file: a tar stream unpacked by the box user
// (so the file is theirs) next to the target, then moved into place.
func (b *Box) Write(ctx context.Context, p string, data []byte, mode uint32) error {
	return b.procs().Write(ctx, p, data, mode)
}
