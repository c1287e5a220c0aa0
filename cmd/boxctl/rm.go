package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/boxstate"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// rmOptions are the flags and arguments of `boxctl rm`.
type rmOptions struct {
	target string
	boxes  []string
}

// rmResult is one box `rm` removed.
type rmResult struct {
	ID string `json:"id"`
	// Forgotten reports that the state file named the box.
	Forgotten bool `json:"forgotten"`
	// RouterStopped reports that its local model endpoint was stopped.
	RouterStopped bool `json:"routerStopped,omitempty"`
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
	opened := map[string]vendors.Vendor{}
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	vendorOf := func(target string) (vendors.Vendor, error) {
		if v, ok := opened[target]; ok {
			return v, nil
		}
		v, closeVendor, err := a.openVendor(target)
		if err != nil {
			return nil, err
		}
		opened[target], closers = v, append(closers, closeVendor)
		return v, nil
	}
	var (
		done []rmResult
		errs []error
	)
	for _, arg := range o.boxes {
		target := o.target
		if rec, err := st.Resolve(arg); err == nil && rec.Target != "" {
			target = rec.Target
		}
		v, err := vendorOf(target)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		id, rec, err := st.ResolveVendor(ctx, v, arg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := boxstate.Destroy(ctx, v, id); err != nil {
			errs = append(errs, err)
			continue
		}
		ev := sandbox.Event{Type: sandbox.EventDestroyed, Vendor: v.Name(), BoxID: id, Reason: sandbox.ReasonUser}
		if rec != nil {
			ev.RunTag = rec.RunTag
		}
		a.eventSink(s)(ev)
		res := rmResult{ID: id}
		if rec != nil {
			stopped, err := s.Forget(ctx, rec)
			res.RouterStopped = stopped
			if err != nil {
				errs = append(errs, fmt.Errorf("box %s removed, but not forgotten: %w", shortID(id), err))
			}
			res.Forgotten = err == nil
		}
		a.log.Debug("box removed", "box", shortID(id))
		done = append(done, res)
	}
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
	return errors.Join(errs...)
}
