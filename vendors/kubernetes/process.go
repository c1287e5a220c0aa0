package kubernetes

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/internal/boxproc"
	"github.com/tangle-network/boxctl/vendors"
)

// Spawn starts a detached process; see vendors.Box.Spawn. Its environment
// travels on the exec's stdin to a supervisor in the box
// (boxproc.DetachedSupervisor), so it is in no pod spec, no exec command
// line (nor the API server's audit log of it); only the started process's
// own environment holds it. The process outlives the exec that started it.
func (b *Box) Spawn(ctx context.Context, spec vendors.SpawnSpec) (vendors.Process, error) {
	name, err := boxproc.SpawnName(spec.Command, spec.Name)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: spawn: %w", err)
	}
	envIn, err := boxproc.EnvLines(spec.Env)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: spawn: %w", err)
	}
	dir := boxproc.Dir + "/" + name
	cmd := append([]string{"/bin/sh", "-c", boxproc.DetachedSupervisor, "boxctl-spawn", dir, spec.Dir}, spec.Command...)
	var stdout strings.Builder
	stderr := &boxproc.Capped{Max: 4096}
	code, err := b.stream(ctx, "spawn", cmd, strings.NewReader(envIn), &stdout, stderr)
	if err != nil {
		return nil, err
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(stdout.String()))
	if code != 0 || perr != nil || pid <= 0 {
		return nil, fmt.Errorf("kubernetes: spawn %s: supervisor exited %d: %s", spec.Command[0], code, strings.TrimSpace(stderr.String()))
	}
	return &Process{b: b, id: name, pid: pid}, nil
}

// Process returns a process Spawn started, by name.
func (b *Box) Process(ctx context.Context, id string) (vendors.Process, error) {
	pid, err := boxproc.PID(ctx, Name, b.Read, id)
	if err != nil {
		return nil, err
	}
	return &Process{b: b, id: id, pid: pid}, nil
}

// Process is a process started by Spawn.
type Process struct {
	b   *Box
	id  string
	pid int
}

var _ vendors.Process = (*Process)(nil)

// ID returns the process's name in the box.
func (p *Process) ID() string { return p.id }

// PID returns the process's pid in the box.
func (p *Process) PID() int { return p.pid }

func (p *Process) dir() string { return boxproc.Dir + "/" + p.id }

// Output follows the process's stdout and stderr from their start until
// it ends (or ctx ends, or the readers are closed).
func (p *Process) Output(ctx context.Context) (io.ReadCloser, io.ReadCloser, error) {
	pidFile := boxproc.ExecDir + "/" + boxproc.RandomID()
	if _, err := p.b.run(ctx, "mkdir", "-p", boxproc.ExecDir); err != nil {
		return nil, nil, fmt.Errorf("kubernetes: output: %w", err)
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var once sync.Once
	stopFollower := func() {
		once.Do(func() {
			cancel()
			kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer kcancel()
			_, _ = p.b.run(kctx, boxproc.StopFollower(pidFile)...)
		})
	}
	stop := context.AfterFunc(ctx, stopFollower)
	stdout, stderr, outW, errW := boxproc.Pipes(func() { go stopFollower() })
	go func() {
		defer stop()
		_, err := p.b.stream(fctx, "output", []string{"/bin/sh", "-c", boxproc.Follow, p.dir(), strconv.Itoa(p.pid), pidFile}, nil, outW, errW)
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		} else if fctx.Err() != nil {
			err = nil // closed by the reader
		}
		outW.CloseWithError(err)
		errW.CloseWithError(err)
	}()
	return stdout, stderr, nil
}

// Logs reads what the process printed so far from its output files.
func (p *Process) Logs(ctx context.Context) ([]byte, []byte, error) {
	return boxproc.Logs(ctx, Name, p.b.Read, p.dir())
}

// waitScript waits in the box for the exit record of the process whose
// record is $0, at most a minute a call (exit 75: still running).
const waitScript = `[ -d "$0" ] || { echo "no process record $0" >&2; exit 2; }
i=0; while [ ! -e "$0/exit" ]; do [ $i -ge 300 ] && exit 75; sleep 0.2; i=$((i+1)); done
cat "$0/exit"`

// Wait blocks in the box until the process ends and returns its exit
// status.
func (p *Process) Wait(ctx context.Context) (int, error) {
	for {
		res, err := p.b.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", waitScript, p.dir()}})
		if err != nil {
			return 0, fmt.Errorf("kubernetes: wait for %s: %w", p.id, err)
		}
		switch res.ExitCode {
		case 0:
			code, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
			if err != nil {
				return 0, fmt.Errorf("kubernetes: wait for %s: exit record %q", p.id, res.Stdout)
			}
			return code, nil
		case 75:
			continue
		}
		return 0, fmt.Errorf("kubernetes: wait for %s: exited %d: %s", p.id, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
}

// Signal sends sig to the process; one that already ended is not an
// error.
func (p *Process) Signal(ctx context.Context, sig syscall.Signal) error {
	if _, err := p.b.run(ctx, boxproc.Signal(int(sig), p.pid, p.dir())...); err != nil {
		return fmt.Errorf("kubernetes: signal %s: %w", p.id, err)
	}
	return nil
}
