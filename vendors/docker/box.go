package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"

	"github.com/tangle-network/boxctl/internal/boxproc"
	"github.com/tangle-network/boxctl/vendors"
)

// ProcDir is where the box keeps the pid, output and exit status of each
// process started with Spawn (ProcDir/<id>/{pid,stdout,stderr,exit}).
const ProcDir = boxproc.Dir

// stageDir holds Write's content on its way in.
const stageDir = "/tmp/.boxctl/stage"

// defaultMaxOutput caps each output stream an Exec keeps.
const defaultMaxOutput = 16 << 20

// maxReadBytes caps a file Read returns.
const maxReadBytes = 256 << 20

// Box is one container. It is safe for concurrent use.
type Box struct {
	v  *Vendor
	id string
}

var _ vendors.Box = (*Box)(nil)

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
	return info(c.ID, img, st, labels, created), nil
}

// Endpoint returns the 127.0.0.1 address the engine published port on.
// Ports are published on the engine host's loopback only, so an engine
// on another machine is refused here rather than answered with an address
// that reaches nothing.
func (b *Box) Endpoint(ctx context.Context, port int) (vendors.Endpoint, error) {
	if err := b.v.localEngine(); err != nil {
		return vendors.Endpoint{}, err
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
	err := b.v.cli.ContainerRemove(ctx, b.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
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
	if len(spec.Command) == 0 {
		return vendors.ExecResult{}, errors.New("docker: exec: empty command")
	}
	max := spec.MaxOutput
	if max <= 0 {
		max = defaultMaxOutput
	}
	pidFile := boxproc.ExecDir + "/" + boxproc.RandomID()
	cmd := append([]string{"/bin/sh", "-c", boxproc.ExecWrapper, pidFile}, spec.Command...)
	execID, err := b.createExec(ctx, "exec", cmd, spec.Env, spec.Dir, spec.Stdin != nil)
	if err != nil {
		return vendors.ExecResult{}, err
	}
	att, err := b.v.cli.ContainerExecAttach(ctx, execID, container.ExecAttachOptions{})
	if err != nil {
		return vendors.ExecResult{}, fmt.Errorf("docker: exec: %w", b.v.mapErr(err, b.id))
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, func() {
		att.Close()
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		b.killPidFile(kctx, pidFile)
	})
	defer stop()
	if spec.Stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, spec.Stdin)
			_ = att.CloseWrite()
		}()
	}
	stdout, stderr := &boxproc.Capped{Max: max}, &boxproc.Capped{Max: max}
	_, cerr := stdcopy.StdCopy(stdout, stderr, att.Reader)
	if ctx.Err() != nil {
		return vendors.ExecResult{}, fmt.Errorf("docker: exec %s: %w", spec.Command[0], context.Cause(ctx))
	}
	if cerr != nil {
		return vendors.ExecResult{}, fmt.Errorf("docker: exec %s: read output: %w", spec.Command[0], b.gone(ctx, "exec", cerr))
	}
	ins, err := b.v.cli.ContainerExecInspect(ctx, execID)
	if err != nil {
		return vendors.ExecResult{}, fmt.Errorf("docker: exec %s: %w", spec.Command[0], b.gone(ctx, "exec", err))
	}
	return vendors.ExecResult{ExitCode: ins.ExitCode, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
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
	_, _ = b.run(ctx, boxproc.KillSession(pidFile)...)
}

// run is Exec of a fixed command whose failure is an error.
func (b *Box) run(ctx context.Context, cmd ...string) ([]byte, error) {
	res, err := b.Exec(ctx, vendors.ExecSpec{Command: cmd})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return res.Stdout, fmt.Errorf("%s exited %d: %s", cmd[0], res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return res.Stdout, nil
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

// Read returns a regular file's content, through the archive API.
func (b *Box) Read(ctx context.Context, p string) ([]byte, error) {
	rc, _, err := b.v.cli.CopyFromContainer(ctx, b.id, p)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			if _, serr := b.Status(ctx); serr != nil {
				return nil, fmt.Errorf("docker: read %s: %w", p, serr)
			}
			return nil, fmt.Errorf("docker: read %s: %w", p, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("docker: read %s: %w", p, b.v.mapErr(err, b.id))
	}
	defer rc.Close()
	data, err := boxproc.UntarFile(rc, maxReadBytes)
	if err != nil {
		return nil, fmt.Errorf("docker: read %s: %w", p, err)
	}
	return data, nil
}

// Write creates or replaces a file, owned by the box's user. The content
// goes in through the archive API into a staging directory of the box
// user's (the engine writes archive entries as root), from where the box
// user moves it into place, so the file is the box user's own.
func (b *Box) Write(ctx context.Context, p string, data []byte, mode uint32) error {
	if err := boxproc.WritePath(p); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	if mode&0o7777 == 0 {
		mode = 0o644
	}
	stage := stageDir + "/" + boxproc.RandomID()
	if _, err := b.run(ctx, "sh", "-c", `umask 077 && mkdir -p "$0"`, stage); err != nil {
		return fmt.Errorf("docker: write %s: %w", p, err)
	}
	archive, err := boxproc.TarFile("data", data, 0o644)
	if err != nil {
		return err
	}
	if err := b.v.cli.CopyToContainer(ctx, b.id, stage, bytes.NewReader(archive), container.CopyToContainerOptions{}); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = b.run(cctx, "rm", "-rf", stage)
		return fmt.Errorf("docker: write %s: %w", p, b.v.mapErr(err, b.id))
	}
	script := `t=; d=$(dirname "$1") && mkdir -p "$d" && t=$(mktemp "$d/.boxctl-write.XXXXXX") && cat "$0/data" >"$t" &&
chmod "$2" "$t" && mv -f "$t" "$1"; s=$?; rm -rf "$0"; [ $s -eq 0 ] || [ -z "$t" ] || rm -f "$t"; exit $s`
	if _, err := b.run(ctx, "sh", "-c", script, stage, p, strconv.FormatUint(uint64(mode&0o7777), 8)); err != nil {
		return fmt.Errorf("docker: write %s: %w", p, err)
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
