package docker

import (
	"context"

	"github.com/tangle-network/boxctl/internal/boxproc"
	"github.com/tangle-network/boxctl/vendors"
)

// Process is a process started by Spawn.
type Process = boxproc.Process

var _ vendors.Process = (*Process)(nil)

// procs is the box to the process layer, over the engine's exec API: each
// command an exec whose session a cancelled context kills.
func (b *Box) procs() *boxproc.Box {
	return &boxproc.Box{Vendor: Name, Runner: boxproc.RunnerFunc(func(ctx context.Context, c boxproc.Command) (int, error) {
		return b.stream(ctx, c.Op, c.Argv, nil, "", c.Stdin, c.Stdout, c.Stderr)
	})}
}

// Spawn starts a detached process; see vendors.Box.Spawn. Its environment
// travels on the supervisor's stdin (boxproc.Box.Spawn), so it is in no
// exec's configuration and no command line; only the started process's
// own environment holds it.
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

// Read returns a regular file's content, read by the box user.
func (b *Box) Read(ctx context.Context, p string) ([]byte, error) {
	return b.procs().Read(ctx, p)
}

// Write creates or replaces a file, owned by the box's user, who unpacks
// it from a tar stream on an exec's stdin and moves it into place.
func (b *Box) Write(ctx context.Context, p string, data []byte, mode uint32) error {
	return b.procs().Write(ctx, p, data, mode)
}
