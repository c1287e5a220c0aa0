package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/provider/sandbox/boxstate"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// gcOptions are the flags of `boxctl gc`.
type gcOptions struct {
	target string
	dryRun bool
}

func newGCCmd(a *app, runF func(context.Context, *gcOptions) error) *cobra.Command {
	o := &gcOptions{target: docker.Name}
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove boxes past their deadline or whose owner is gone",
		Long: `gc removes, by their labels alone, the boxctl boxes on the vendor that are past
their deadline, whose owning process is gone, or that belong to this user's state
but are no longer in it; it then forgets the state's records of boxes that no
longer exist, and stops their local model endpoints. It prints what it removed
and why. --dry-run prints the same and changes nothing.`,
		Example: `  boxctl gc --dry-run
  boxctl gc -o json`,
		Args: boxArgs(cobra.NoArgs),
		RunE: verbRunE(a, o, func([]string) error { return checkBoxTarget(o.target) }, runF, runGC),
	}
	cmd.Flags().StringVar(&o.target, "target", o.target, "the vendor to collect: "+strings.Join(boxTargets, ", "))
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be removed and remove nothing")
	return cmd
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
	res, err := s.Collect(ctx, v, o.target, o.dryRun)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range res.Removed {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("box %s not removed: %s", shortID(r.ID), r.Error))
		}
	}
	if err := a.print(res, func(w io.Writer) error { return boxstate.WriteCollected(w, res) }); err != nil {
		return err
	}
	return errors.Join(errs...)
}
