package docker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/tangle-network/boxctl/internal/boxproc"
	"github.com/tangle-network/boxctl/vendors"
)

// execExit waits briefly for an exec to end and returns its exit status
// (-1 if it did not end).
func (b *Box) execExit(ctx context.Context, execID string) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ins, err := b.v.cli.ContainerExecInspect(ctx, execID)
		if err == nil && !ins.Running {
			return ins.ExitCode
		}
		select {
		case <-ctx.Done():
			return -1
		case <-tick.C:
		}
	}
}

// Spawn starts a detached process; see vendors.Box.Spawn. Its environment
// travels on the supervisor's stdin, so it is in no exec's configuration
// and no command line; only the started process's own environment holds
// it.
func (b *Box) Spawn(ctx context.Context, spec vendors.SpawnSpec) (vendors.Process, error) {
	name, err := boxproc.SpawnName(spec.Command, spec.Name)
	if err != nil {
		return nil, fmt.Errorf("docker: spawn: %w", err)
	}
	envIn, err := boxproc.EnvLines(spec.Env)
	if err != nil {
		return nil, fmt.Errorf("docker: spawn: %w", err)
	}
	dir := ProcDir + "/" + name
	cmd := append([]string{"/bin/sh", "-c", boxproc.Supervisor, "boxctl-spawn", dir}, spec.Command...)
	execID, err := b.createExec(ctx, "spawn", cmd, nil, spec.Dir, true)
	if err != nil {
		return nil, err
	}
	att, err := b.v.cli.ContainerExecAttach(ctx, execID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker: spawn: %w", b.v.mapErr(err, b.id))
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, func() { att.Close() })
	defer stop()
	if _, err := io.WriteString(att.Conn, envIn); err != nil {
		return nil, fmt.Errorf("docker: spawn: environment: %w", b.gone(ctx, "spawn", err))
	}
	_ = att.CloseWrite()
	// The supervisor prints the pid (stdout) or why it could not start
	// (stderr); both arrive multiplexed.
	pr, pw := io.Pipe()
	stderr := &boxproc.Capped{Max: 4096}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, err := stdcopy.StdCopy(pw, stderr, att.Reader)
		pw.CloseWithError(err)
	}()
	line, rerr := bufio.NewReader(pr).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if rerr != nil || perr != nil || pid <= 0 {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("docker: spawn %s: %w", spec.Command[0], context.Cause(ctx))
		}
		// The supervisor failed: wait for its stderr and its end, then
		// report both.
		pr.Close()
		<-copied
		code := b.execExit(context.WithoutCancel(ctx), execID)
		return nil, fmt.Errorf("docker: spawn %s: supervisor exited %d: %s", spec.Command[0], code, strings.TrimSpace(stderr.String()))
	}
	return &Process{b: b, id: name, execID: execID, pid: pid}, nil
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
	b      *Box
	id     string
	execID string // the supervisor's exec; empty for a process found by id
	pid    int
}

var _ vendors.Process = (*Process)(nil)

// ID returns the process's name in the box.
func (p *Process) ID() string { return p.id }

// PID returns the process's pid in the box.
func (p *Process) PID() int { return p.pid }

func (p *Process) dir() string { return ProcDir + "/" + p.id }

// Output follows the process's stdout and stderr from their start until
// it ends (or ctx ends, or the readers are closed).
func (p *Process) Output(ctx context.Context) (io.ReadCloser, io.ReadCloser, error) {
	// The follower records its pid, so closing the readers (or ctx
	// ending) stops it in the box too, not only the connection.
	pidFile := boxproc.ExecDir + "/" + boxproc.RandomID()
	if _, err := p.b.run(ctx, "mkdir", "-p", boxproc.ExecDir); err != nil {
		return nil, nil, fmt.Errorf("docker: output: %w", err)
	}
	execID, err := p.b.createExec(ctx, "output", []string{"/bin/sh", "-c", boxproc.Follow, p.dir(), strconv.Itoa(p.pid), pidFile}, nil, "", false)
	if err != nil {
		return nil, nil, err
	}
	att, err := p.b.v.cli.ContainerExecAttach(ctx, execID, container.ExecAttachOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("docker: output: %w", p.b.v.mapErr(err, p.b.id))
	}
	var once sync.Once
	stopFollower := func() {
		once.Do(func() {
			att.Close()
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_, _ = p.b.run(kctx, boxproc.StopFollower(pidFile)...)
		})
	}
	stop := context.AfterFunc(ctx, stopFollower)
	stdout, stderr, outW, errW := boxproc.Pipes(func() { go stopFollower() })
	go func() {
		defer stop()
		defer att.Close()
		_, err := stdcopy.StdCopy(outW, errW, att.Reader)
		if err == nil && ctx.Err() != nil {
			err = context.Cause(ctx)
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

// Wait polls the process until it ends and returns its exit status.
func (p *Process) Wait(ctx context.Context) (int, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		code, done, err := p.exited(ctx)
		if err != nil || done {
			return code, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("docker: wait for %s: %w", p.id, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func (p *Process) exited(ctx context.Context) (int, bool, error) {
	if p.execID != "" {
		ins, err := p.b.v.cli.ContainerExecInspect(ctx, p.execID)
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				return 0, false, &vendors.GoneError{Vendor: Name, ID: p.b.id, Op: "wait", Err: err}
			}
			return 0, false, fmt.Errorf("docker: wait for %s: %w", p.id, p.b.gone(ctx, "wait", err))
		}
		if ins.Running {
			return 0, false, nil
		}
		return ins.ExitCode, true, nil
	}
	res, err := p.b.Exec(ctx, vendors.ExecSpec{Command: []string{"cat", p.dir() + "/exit"}})
	if err != nil {
		return 0, false, err
	}
	if res.ExitCode != 0 {
		return 0, false, nil
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	return code, err == nil, err
}

// Signal sends sig to the process; one that already ended is not an
// error.
func (p *Process) Signal(ctx context.Context, sig syscall.Signal) error {
	_, err := p.b.run(ctx, boxproc.Signal(int(sig), p.pid, p.dir())...)
	if err != nil {
		return fmt.Errorf("docker: signal %s: %w", p.id, err)
	}
	return nil
}
