package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/vendors"
)

// ErrExecTimedOut is the error of Environment.Exec when the command
// outlived its call's deadline (or the bridge's longest, 10 minutes) and
// was ended, its whole process group with it.
var ErrExecTimedOut = errors.New("exec: the command outlived its deadline and was ended")

// ErrExecTruncated is the error of Environment.Exec, beside the result,
// when the command wrote more than the bridge's route carries
// (wire.ExecOutputLimit) and the spec allowed more: the result holds the
// first wire.ExecOutputLimit bytes of each output. A spec whose MaxOutput
// is within the limit never sees it; Box().Exec keeps up to MaxOutput.
var ErrExecTruncated = errors.New("exec: the command's output is over what the bridge's route carries")

// execDeadlineMargin is how much sooner than the call's deadline the
// bridge ends a command: its answer then arrives while the call waits.
const execDeadlineMargin = 250 * time.Millisecond

// Exec runs a command to its end in the box through its bridge (POST
// /v1/exec): one HTTP call to a process already running in the box, where
// a vendor's exec (Box().Exec) goes through the vendor's control plane or
// engine. The command runs as the harnesses' user from their environment,
// as a harness's tool call would, outside any jail the operator set for
// turns. It ends at ctx's deadline (ErrExecTimedOut; at most the bridge's
// 10 minutes) or when ctx is cancelled. Each output is kept up to
// spec.MaxOutput, and the route carries at most wire.ExecOutputLimit (1
// MiB): more is ErrExecTruncated beside the result, unless the spec set a
// MaxOutput over the limit, which runs through the vendor's exec instead
// (as a bridge without the route, or stdin over the limit, does).
func (e *Environment) Exec(ctx context.Context, spec vendors.ExecSpec) (vendors.ExecResult, error) {
	req := wire.ExecRequest{Command: spec.Command, Env: spec.Env, Dir: spec.Dir, TimeoutMS: wire.MaxExecTimeoutMS}
	if d, ok := ctx.Deadline(); ok {
		req.TimeoutMS = min(req.TimeoutMS, max(1, (time.Until(d)-execDeadlineMargin).Milliseconds()))
	}
	vendorExec := func(stdin []byte) (vendors.ExecResult, error) {
		if stdin != nil {
			spec.Stdin = io.MultiReader(bytes.NewReader(stdin), spec.Stdin)
		}
		return e.box.Exec(ctx, spec)
	}
	if spec.MaxOutput > wire.ExecOutputLimit {
		return vendorExec(nil)
	}
	if spec.Stdin != nil {
		in, err := io.ReadAll(io.LimitReader(spec.Stdin, wire.ExecOutputLimit+1))
		if err != nil {
			return vendors.ExecResult{}, fmt.Errorf("exec: read stdin: %w", err)
		}
		if len(in) > wire.ExecOutputLimit {
			return vendorExec(in)
		}
		req.Stdin = in
	}
	res, err := e.pv.Exec(ctx, req)
	var nf *provider.NotFoundError
	switch {
	case errors.As(err, &nf):
		// A bridge that predates the route.
		return vendorExec(req.Stdin)
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return vendors.ExecResult{}, fmt.Errorf("%w: %w", ErrExecTimedOut, err)
	case err != nil:
		return vendors.ExecResult{}, fmt.Errorf("exec: %w", err)
	case res.TimedOut:
		return vendors.ExecResult{}, ErrExecTimedOut
	}
	out := vendors.ExecResult{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr}
	limit := spec.OutputCap()
	out.Stdout, out.Stderr = out.Stdout[:min(len(out.Stdout), int(limit))], out.Stderr[:min(len(out.Stderr), int(limit))]
	if res.Truncated && limit > wire.ExecOutputLimit {
		return out, ErrExecTruncated
	}
	return out, nil
}
