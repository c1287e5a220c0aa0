package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/open"
)

// rmOptions are the flags and arguments of `boxctl rm`.
type rmOptions struct {
	target string
	boxes  []string
}

func newRmCmd(a *app, runF func(context.Context, *rmOptions) error) *cobra.Command {
	o := &rmOptions{target: docker.Name}
	cmd := &cobra.Command{
		Use:   "rm <box>...",
		Short: "Destroy boxes and forget them",
		Long: `rm destroys each box, stops the local model endpoint ` + "`up --router local`" + ` started for
it, and removes it from the state file. <box> is a box id, a unique prefix of it,
or "last"; a box the state does not know is found among the vendor's boxes. A box
that is already gone is not an error.`,
		Example: `  boxctl rm last
  boxctl rm 3f2a 9bc0`,
		Args: boxArgs(cobra.MinimumNArgs(1)),
		RunE: verbRunE(a, o, func(args []string) error { o.boxes = args; return nil }, runF, runRm),
	}
	cmd.Flags().StringVar(&o.target, "target", o.target, "the vendor of a box the state does not know")
	return cmd
}

func runRm(ctx context.Context, a *app, o *rmOptions) error {
	s, st, err := a.readState()
	if err != nil {
		return err
	}
	// Each box is destroyed on the vendor of its record; --target names
	// the vendor of boxes the state does not know.
	vs := open.NewSet(open.Options{Logger: a.log})
	defer func() { _ = vs.Close() }()
	done, rmErr := s.RemoveArgs(ctx, st, vs.Opener(), o.target, o.boxes)
	if err := a.print(done, func(w io.Writer) error {
		for _, r := range done {
			if _, err := fmt.Fprintf(w, "removed %s\n", shortID(r.ID)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return rmErr
}
