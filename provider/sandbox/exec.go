package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/vendors"
)

// Exec runs a command to its end in the box through its bridge (POST
// /v1/exec): one HTTP call to a process already running in the box, where
// a vendor's exec (Box().Exec) goes through the vendor's control plane or
// engine. The command runs as the harnesses' user from their environment,
// as a harness's tool call would. A bridge too old for the route falls
// back to the vendor's exec. Output beyond wire.ExecOutputLimit is
// dropped (a vendor's exec keeps spec.MaxOutput).
func (e *Environment) Exec(ctx context.Context, spec vendors.ExecSpec) (vendors.ExecResult, error) {
	req := wire.ExecRequest{Command: spec.Command, Env: spec.Env, Dir: spec.Dir}
	if spec.Stdin != nil {
		in, err := io.ReadAll(io.LimitReader(spec.Stdin, wire.ExecOutputLimit+1))
		if err != nil {
			return vendors.ExecResult{}, fmt.Errorf("exec: read stdin: %w", err)
		}
		if len(in) > wire.ExecOutputLimit {
			return e.box.Exec(ctx, vendors.ExecSpec{Command: spec.Command, Env: spec.Env, Dir: spec.Dir,
				Stdin: io.MultiReader(bytes.NewReader(in), spec.Stdin), MaxOutput: spec.MaxOutput})
		}
		req.Stdin = in
	}
	res, err := e.pv.Exec(ctx, req)
	var be *provider.BridgeError
	if errors.As(err, &be) && be.Status == 404 {
		return e.box.Exec(ctx, spec)
	}
	if err != nil {
		return vendors.ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	return vendors.ExecResult{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr}, nil
}
