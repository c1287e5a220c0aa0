package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// bareLifetime bounds a bare container: its labels make it a managed box
// of this process, which gc removes once the process is gone.
const bareLifetime = 10 * time.Minute

// BareRun is `docker run -d IMAGE` then `docker exec CONTAINER cmd...`:
// the engine's own create and start of image, on its default network,
// with none of a box's network, limits, jails or checks, and cmd run in
// it. It returns the time from the create request to cmd's answer and
// what removes the container (one that failed is removed before it
// returns). It is the baseline of boxctl's own
// create in `boxctl bench`.
func (v *Vendor) BareRun(ctx context.Context, image string, cmd []string) (_ time.Duration, remove func(context.Context) error, err error) {
	spec := vendors.CreateSpec{Image: image, Lifetime: bareLifetime, RunTag: "bare", Owner: reaper.ProcessOwner()}
	start := time.Now()
	name := "boxctl-bare-" + strconv.FormatUint(rand.Uint64()&0xffffffffff, 36)
	created, err := v.cli.ContainerCreate(ctx, &container.Config{Image: image, Labels: vendors.Labels(spec, start, v.opts.version)},
		&container.HostConfig{AutoRemove: true}, nil, nil, name)
	if err != nil {
		// Made, maybe, though the call failed: removed by name (as Create).
		err = fmt.Errorf("docker: bare run of %s: %w", image, v.mapErr(err, ""))
		return 0, nil, errors.Join(err, v.removeCreated(ctx, name))
	}
	b := v.newBox(created.ID)
	defer func() {
		if err != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = b.Destroy(dctx)
		}
	}()
	if err := v.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return 0, nil, fmt.Errorf("docker: bare run of %s: %w", image, v.mapErr(err, created.ID))
	}
	exec, err := v.cli.ContainerExecCreate(ctx, created.ID, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, nil, fmt.Errorf("docker: bare exec: %w", v.mapErr(err, created.ID))
	}
	att, err := v.cli.ContainerExecAttach(ctx, exec.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, nil, fmt.Errorf("docker: bare exec: %w", v.mapErr(err, created.ID))
	}
	var out bytes.Buffer
	_, err = out.ReadFrom(att.Reader)
	att.Close()
	if err != nil {
		return 0, nil, fmt.Errorf("docker: bare exec: %w", err)
	}
	ins, err := v.cli.ContainerExecInspect(ctx, exec.ID)
	if err != nil {
		return 0, nil, fmt.Errorf("docker: bare exec: %w", v.mapErr(err, created.ID))
	}
	if ins.ExitCode != 0 {
		return 0, nil, fmt.Errorf("docker: bare exec %s: exit %s", cmd[0], strconv.Itoa(ins.ExitCode))
	}
	return time.Since(start), b.Destroy, nil
}
