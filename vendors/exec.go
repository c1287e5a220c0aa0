package vendors

import (
	"context"
	"errors"
	"io"

	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// DefaultMaxOutput caps each of stdout and stderr an Exec keeps when
// ExecSpec.MaxOutput is not set.
const DefaultMaxOutput = 16 << 20

// OutputCap returns how much of each of stdout and stderr an Exec of s
// keeps: s.MaxOutput, or DefaultMaxOutput when that is not set.
func (s ExecSpec) OutputCap() int64 {
	if s.MaxOutput <= 0 {
		return DefaultMaxOutput
	}
	return s.MaxOutput
}

// StreamExec is Box.Exec of vendor's box over a streaming exec: stream
// runs spec's command in the box, copies its output to stdout and stderr
// as it comes and returns its exit status. StreamExec refuses an empty
// command, keeps up to spec.OutputCap of each stream and returns stream's
// error as it is.
func StreamExec(ctx context.Context, vendor string, spec ExecSpec, stream func(ctx context.Context, stdout, stderr io.Writer) (int, error)) (ExecResult, error) {
	if len(spec.Command) == 0 {
		return ExecResult{}, errors.New(vendor + ": exec: empty command")
	}
	max := spec.OutputCap()
	stdout, stderr := &boxproc.Capped{Max: max}, &boxproc.Capped{Max: max}
	code, err := stream(ctx, stdout, stderr)
	if err != nil {
		return ExecResult{}, err
	}
	return ExecResult{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}
