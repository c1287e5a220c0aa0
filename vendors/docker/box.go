package docker

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// ProcDir is where the box keeps the pid, output and exit status of each
// process started with Spawn (ProcDir/<id>/{pid,stdout,stderr,exit}).
const ProcDir = boxproc.Dir

// Box is one container. It is safe for concurrent use.
type Box struct {
	procLayer // Spawn, Process, Read and Write
	v         *Vendor
	id        string
	// deadline is the one Create set (zero on a Connect).
	deadline time.Time
}

var (
	_ vendors.Box       = (*Box)(nil)
	_ vendors.Addressed = (*Box)(nil)
	_ vendors.Deadlined = (*Box)(nil)
)

// KnownDeadline returns the deadline Create set. See vendors.Deadlined.
func (b *Box) KnownDeadline() (time.Time, bool) { return b.deadline, !b.deadline.IsZero() }

// Address returns the container's address on the boxes' network, where
// its traffic to HostAddress comes from.
func (b *Box) Address(ctx context.Context) (netip.Addr, error) {
	c, err := b.v.cli.ContainerInspect(ctx, b.id)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("docker: address: %w", b.v.mapErr(err, b.id))
	}
	if c.NetworkSettings != nil {
		for _, name := range b.v.boxNetworks() {
			if n := c.NetworkSettings.Networks[name]; n != nil && n.IPAddress != "" {
				return netip.ParseAddr(n.IPAddress)
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("docker: box %s has no address on network %s", short(b.id), b.v.opts.network)
}

// ID returns the container id.
func (b *Box) ID() string { return b.id }

// Status inspects the container.
func (b *Box) Status(ctx context.Context) (vendors.Info, error) {
	c, err := b.v.cli.ContainerInspect(ctx, b.id)
	if err != nil {
		return vendors.Info{}, fmt.Errorf("docker: status: %w", b.v.mapErr(err, b.id))
	}
	st := vendors.StateUnknown
	var labels map[string]string
	img := ""
	if c.State != nil {
		st = stateOf(c.State.Status)
	}
	if c.Config != nil {
		labels, img = c.Config.Labels, c.Config.Image
	}
	created, _ := time.Parse(time.RFC3339Nano, c.Created)
	return b.v.withLifetime(ctx, info(c.ID, img, st, labels, created)), nil
}

// Endpoint returns the 127.0.0.1 address the engine published port on,
// or (WithDirectPorts) the box's address with port. Ports are published
// on the engine host's loopback only, so an engine on another machine is
// refused here rather than answered with an address that reaches
// nothing.
func (b *Box) Endpoint(ctx context.Context, port int) (vendors.Endpoint, error) {
	if err := b.v.localEngine(); err != nil {
		return vendors.Endpoint{}, err
	}
	if b.v.opts.direct {
		addr, err := b.Address(ctx)
		if err != nil {
			return vendors.Endpoint{}, fmt.Errorf("docker: endpoint: %w", err)
		}
		return vendors.Endpoint{URL: "http://" + netip.AddrPortFrom(addr, uint16(port)).String()}, nil
	}
	c, err := b.v.cli.ContainerInspect(ctx, b.id)
	if err != nil {
		return vendors.Endpoint{}, fmt.Errorf("docker: endpoint: %w", b.v.mapErr(err, b.id))
	}
	if c.NetworkSettings != nil {
		for _, bind := range c.NetworkSettings.Ports[nat.Port(strconv.Itoa(port)+"/tcp")] {
			if bind.HostPort != "" && (bind.HostIP == "127.0.0.1" || bind.HostIP == "") {
				return vendors.Endpoint{URL: "http://127.0.0.1:" + bind.HostPort}, nil
			}
		}
	}
	return vendors.Endpoint{}, fmt.Errorf("docker: box %s does not expose port %d", short(b.id), port)
}

// Destroy removes the container and everything in it; a box already gone
// is not an error.
func (b *Box) Destroy(ctx context.Context) error {
	forkImage := ""
	if c, err := b.v.cli.ContainerInspect(ctx, b.id); err == nil && c.Config != nil && c.Config.Labels[boxmeta.LabelForkOf] != "" {
		forkImage = c.Image
	}
	err := b.v.cli.ContainerRemove(ctx, b.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil && forkImage != "":
		b.v.removeForkImage(ctx, forkImage)
		return nil
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "already in progress"):
		// The engine is removing it already (auto-remove): wait for that.
		okC, errC := b.v.cli.ContainerWait(ctx, b.id, container.WaitConditionRemoved)
		select {
		case <-okC:
			return nil
		case werr := <-errC:
			if cerrdefs.IsNotFound(werr) {
				return nil
			}
			return fmt.Errorf("docker: destroy box %s: %w", short(b.id), werr)
		}
	}
	return fmt.Errorf("docker: destroy box %s: %w", short(b.id), err)
}

// Exec runs a command to completion. If ctx ends first, the command is
// killed in the box.
func (b *Box) Exec(ctx context.Context, spec vendors.ExecSpec) (vendors.ExecResult, error) {
	return vendors.StreamExec(ctx, Name, spec, func(ctx context.Context, stdout, stderr io.Writer) (int, error) {
		return b.stream(ctx, "exec", spec.Command, spec.Env, spec.Dir, spec.Stdin, stdout, stderr)
	})
}

// stream runs cmd in the container as an exec with env and dir, feeds it
// stdin (nil: none), copies its output to stdout and stderr as it comes,
// and returns its exit status. The command runs in a session of its own
// (boxproc.ExecWrapper), which a cancelled ctx kills.
func (b *Box) stream(ctx context.Context, op string, cmd []string, env map[string]string, dir string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	pidFile := boxproc.ExecDir + "/" + boxproc.RandomID()
	wrapped := append([]string{"/bin/sh", "-c", boxproc.ExecWrapper, pidFile}, cmd...)
	execID, err := b.createExec(ctx, op, wrapped, env, dir, stdin != nil)
	if err != nil {
		return 0, err
	}
	att, err := b.v.cli.ContainerExecAttach(ctx, execID, container.ExecAttachOptions{})
	if err != nil {
		return 0, fmt.Errorf("docker: %s: %w", op, b.v.mapErr(err, b.id))
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, func() {
		att.Close()
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		b.killPidFile(kctx, pidFile)
	})
	defer stop()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, stdin)
			_ = att.CloseWrite()
		}()
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	_, cerr := stdcopy.StdCopy(stdout, stderr, att.Reader)
	if ctx.Err() != nil {
		return 0, fmt.Errorf("docker: %s %s: %w", op, cmd[0], context.Cause(ctx))
	}
	if cerr != nil {
		return 0, fmt.Errorf("docker: %s %s: read output: %w", op, cmd[0], b.gone(ctx, op, cerr))
	}
	ins, err := b.v.cli.ContainerExecInspect(ctx, execID)
	if err != nil {
		return 0, fmt.Errorf("docker: %s %s: %w", op, cmd[0], b.gone(ctx, op, err))
	}
	return ins.ExitCode, nil
}

func (b *Box) createExec(ctx context.Context, op string, cmd []string, env map[string]string, dir string, stdin bool) (string, error) {
	opts := container.ExecOptions{Cmd: cmd, WorkingDir: dir, AttachStdout: true, AttachStderr: true, AttachStdin: stdin}
	for k, v := range env {
		opts.Env = append(opts.Env, k+"="+v)
	}
	created, err := b.v.cli.ContainerExecCreate(ctx, b.id, opts)
	if err != nil {
		if cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "is not running") {
			return "", fmt.Errorf("docker: %s: %w", op, &vendors.GoneError{Vendor: Name, ID: b.id, Op: op, Err: err})
		}
		return "", fmt.Errorf("docker: %s: %w", op, b.v.mapErr(err, b.id))
	}
	return created.ID, nil
}

// killPidFile kills the session of a cancelled Exec.
func (b *Box) killPidFile(ctx context.Context, pidFile string) {
	_, _ = b.Exec(ctx, vendors.ExecSpec{Command: boxproc.KillSession(pidFile)})
}

// gone maps an error during an operation in the box to *vendors.GoneError
// when the container no longer runs.
func (b *Box) gone(ctx context.Context, op string, err error) error {
	c, ierr := b.v.cli.ContainerInspect(context.WithoutCancel(ctx), b.id)
	if cerrdefs.IsNotFound(ierr) || (ierr == nil && c.State != nil && !c.State.Running) {
		return &vendors.GoneError{Vendor: Name, ID: b.id, Op: op, Err: err}
	}
	return err
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
