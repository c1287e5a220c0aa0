package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// logsOptions are the flags and arguments of `boxctl logs`.
type logsOptions struct {
	target string
	box    string
	follow bool
}

func newLogsCmd(a *app, runF func(context.Context, *logsOptions) error) *cobra.Command {
	o := &logsOptions{target: docker.Name}
	cmd := &cobra.Command{
		Use:   "logs <box>",
		Short: "Print the output of the bridge in a box",
		Long: `logs prints what the bridge in a box wrote so far: its stdout to stdout, its
stderr to stderr. --follow keeps printing until the bridge ends or Ctrl-C.
<box> is a box id, a unique prefix of it, or "last".`,
		Example: `  boxctl logs last
  boxctl logs 3f2a --follow`,
		Args: boxArgs(cobra.ExactArgs(1)),
		RunE: verbRunE(a, o, func(args []string) error { o.box = args[0]; return nil }, runF, runLogs),
	}
	cmd.Flags().StringVar(&o.target, "target", o.target, "the vendor of a box the state does not know")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new output until the bridge ends")
	return cmd
}

func runLogs(ctx context.Context, a *app, o *logsOptions) error {
	box, closeBox, err := a.openBox(ctx, o.target, o.box)
	if err != nil {
		return err
	}
	defer closeBox()
	proc, err := box.Process(ctx, sandbox.BridgeProcess)
	if err != nil {
		return fmt.Errorf("bridge of box %s: %w", shortID(box.ID()), err)
	}
	if !o.follow {
		out, errOut, err := proc.Logs(ctx)
		if err != nil {
			return fmt.Errorf("bridge output: %w", err)
		}
		if _, err := a.out.Write(out); err != nil {
			return err
		}
		_, err = a.errOut.Write(errOut)
		return err
	}
	stdout, stderr, err := proc.Output(ctx)
	if err != nil {
		return fmt.Errorf("bridge output: %w", err)
	}
	defer stdout.Close()
	defer stderr.Close()
	var g errgroup.Group
	g.Go(func() error { _, err := io.Copy(a.out, stdout); return err })
	g.Go(func() error { _, err := io.Copy(a.errOut, stderr); return err })
	err = g.Wait()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
