package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/open"
)

// execOptions are the flags and arguments of `boxctl exec`.
type execOptions struct {
	target  string
	box     string
	command []string
	dir     string
}

// exitStatusError is a command in a box that exited non-zero: boxctl
// exits with the same status, and prints nothing more.
type exitStatusError struct{ code int }

func (e exitStatusError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newExecCmd(a *app, runF func(context.Context, *execOptions) error) *cobra.Command {
	o := &execOptions{target: docker.Name}
	cmd := &cobra.Command{
		Use:   "exec <box> -- CMD [ARG...]",
		Short: "Run a command in a box to completion",
		Long: `exec runs a command in a box, prints its stdout and stderr, and exits with
its status. <box> is a box id, a unique prefix of it, or "last"; a box the
state does not know is found among the vendor's boxes by id.`,
		Example: `  boxctl exec last -- ls -la /workspace
  boxctl exec 3f2a -- sh -c 'claude --version'`,
		Args: boxArgs(func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return fmt.Errorf("want <box> -- CMD [ARG...]")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.box, o.command = args[0], args[1:]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			err := runExec(cmd.Context(), a, o)
			if _, ok := err.(exitStatusError); ok {
				cmd.SilenceErrors = true
			}
			return err
		},
	}
	cmd.Flags().StringVar(&o.target, "target", o.target, "the vendor of a box the state does not know")
	cmd.Flags().StringVarP(&o.dir, "workdir", "w", "", "working directory in the box (default: the box's)")
	return cmd
}

func runExec(ctx context.Context, a *app, o *execOptions) error {
	box, closeBox, err := a.openBox(ctx, o.target, o.box)
	if err != nil {
		return err
	}
	defer closeBox()
	res, err := box.Exec(ctx, vendors.ExecSpec{Command: o.command, Dir: o.dir})
	if err != nil {
		return fmt.Errorf("exec in box %s: %w", shortID(box.ID()), err)
	}
	if _, err := a.out.Write(res.Stdout); err != nil {
		return err
	}
	if _, err := a.errOut.Write(res.Stderr); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return exitStatusError{code: res.ExitCode}
	}
	return nil
}

// openBox connects to the box arg names (boxstate.State.Locate), on the
// vendor of its record, else of target. The caller calls closeBox when
// done with the box.
func (a *app) openBox(ctx context.Context, target, arg string) (box vendors.Box, closeBox func(), err error) {
	_, st, err := a.readState()
	if err != nil {
		return nil, nil, err
	}
	vs := open.NewSet(open.Options{Logger: a.log})
	closeBox = func() { _ = vs.Close() }
	v, id, _, err := st.Locate(ctx, vs.Opener(), target, arg)
	if err == nil {
		box, err = v.Connect(ctx, id)
	}
	if err != nil {
		closeBox()
		return nil, nil, err
	}
	return box, closeBox, nil
}
