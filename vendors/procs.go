package vendors

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// Procs is a Box's Spawn, Process, Read and Write written once over the
// process layer (vendors/boxproc), which runs each of them through the
// vendor's one streaming exec. A vendor's Box embeds it, made by NewProcs
// with the Box; a Box with Read and Write of its own keeps them. It holds
// no state but the exec: the processes' records are in the box.
type Procs struct{ layer boxproc.Box }

var _ Process = (*boxproc.Process)(nil)

// NewProcs returns the process methods of one of vendor's boxes, whose
// commands run runs.
func NewProcs(vendor string, run boxproc.RunnerFunc) Procs {
	return Procs{layer: boxproc.Box{Vendor: vendor, Runner: run}}
}

// Spawn starts a detached process; see Box.Spawn. Its environment travels
// on a supervisor's stdin (boxproc.Box.Spawn), so it is in no exec's
// configuration, no command line and nothing a control plane shows; only
// the started process's own environment holds it. The process outlives
// the exec that started it.
func (p Procs) Spawn(ctx context.Context, spec SpawnSpec) (Process, error) {
	proc, err := p.layer.Spawn(ctx, boxproc.SpawnSpec(spec))
	if err != nil {
		return nil, err
	}
	return proc, nil
}

// Process returns a process Spawn started, by name.
func (p Procs) Process(ctx context.Context, id string) (Process, error) {
	proc, err := p.layer.Process(ctx, id)
	if err != nil {
		return nil, err
	}
	return proc, nil
}

// Read returns a regular file's content, read by the box user as a tar
// stream; a file still being written reads as it was.
func (p Procs) Read(ctx context.Context, path string) ([]byte, error) {
	return p.layer.Read(ctx, path)
}

// Write creates or replaces a file, owned by the box's user, who unpacks
// it from a tar stream on an exec's stdin next to the target and moves it
// into place.
func (p Procs) Write(ctx context.Context, path string, data []byte, mode uint32) error {
	return p.layer.Write(ctx, path, data, mode)
}

// EndEarlier ends every process b's earlier run left (boxproc's records
// and running Execs) and frees their names: a resume runs it on a box
// whose vendor kept its processes across a suspend.
func EndEarlier(ctx context.Context, b Box) error {
	res, err := b.Exec(ctx, ExecSpec{Command: []string{"sh", "-c", boxproc.EndEarlierScript}})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exited %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	if err != nil {
		return fmt.Errorf("end the earlier processes: %w", err)
	}
	return nil
}
