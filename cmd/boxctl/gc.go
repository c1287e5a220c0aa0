package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// gcOptions are the flags of `boxctl gc`.
type gcOptions struct {
	target string
	dryRun bool
	every  time.Duration
}

func newGCCmd(a *app, runF func(context.Context, *gcOptions) error) *cobra.Command {
	o := &gcOptions{target: docker.Name}
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove boxes past their deadline or whose owner is gone; suspend idle ones",
		Long: `gc removes, by their labels alone, the boxctl boxes on the vendor that are past
their deadline, whose owning process is gone, or that belong to this user's state
but are no longer in it; it then forgets the state's records of boxes that no
longer exist, and stops their local model endpoints. It suspends the boxes made
with --idle-suspend that had no turn for that long, and prints what it did and
why. --dry-run prints the same and changes nothing; --every repeats until Ctrl-C.`,
		Example: `  boxctl gc --dry-run
  boxctl gc --every 1m -o json`,
		Args: boxArgs(cobra.NoArgs),
		RunE: verbRunE(a, o, func([]string) error { return o.check() }, runF, runGC),
	}
	cmd.Flags().StringVar(&o.target, "target", o.target, "the vendor to collect: "+strings.Join(boxTargets, ", "))
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be removed and remove nothing")
	cmd.Flags().DurationVar(&o.every, "every", 0, "collect again at this interval until interrupted (Ctrl-C)")
	return cmd
}

func (o *gcOptions) check() error {
	if o.every != 0 && o.every < time.Second {
		return usageErrorf("--every %v: want at least 1s", o.every)
	}
	return checkBoxTarget(o.target)
}

func runGC(ctx context.Context, a *app, o *gcOptions) error {
	s, err := a.openState()
	if err != nil {
		return err
	}
	v, closeVendor, err := a.openVendor(o.target)
	if err != nil {
		return err
	}
	defer closeVendor()
	return s.CollectEvery(ctx, v, o.target, o.dryRun, o.every, func(res boxstate.Collected) error {
		return a.print(res, func(w io.Writer) error { return render.Collected(w, res) })
	})
}
