package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// gcOptions are the flags of `boxctl gc`.
type gcOptions struct {
	target string
	dryRun bool
}

// gcEntry is a box gc removed, or a record it forgot.
type gcEntry struct {
	ID     string `json:"id"`
	RunTag string `json:"runTag,omitempty"`
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// gcResult is what `gc` prints.
type gcResult struct {
	DryRun bool `json:"dryRun"`
	// Removed are the boxes destroyed (with --dry-run: to destroy).
	Removed []gcEntry `json:"removed"`
	// Forgotten are the state's records of boxes that are gone.
	Forgotten []gcEntry `json:"forgotten"`
}

// Reasons a record is forgotten.
const (
	reasonBoxGone     = "its box is gone"
	reasonNeverCreate = "its `boxctl up` never finished, and its lifetime is over"
)

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
	sf, err := openState()
	if err != nil {
		return err
	}
	v, closeVendor, err := a.openVendor(o.target)
	if err != nil {
		return err
	}
	defer closeVendor()
	res := gcResult{DryRun: o.dryRun, Removed: []gcEntry{}, Forgotten: []gcEntry{}}
	var stop []*localRouter
	collect := func(st *boxState) error {
		var err error
		res, stop, err = collectGarbage(ctx, v, st, o)
		return err
	}
	if o.dryRun {
		var st *boxState
		if st, err = sf.load(); err == nil {
			err = collect(st)
		}
	} else {
		// Under the lock, so that an `up` meanwhile cannot record a box
		// this gc has judged unknown.
		err = sf.update(ctx, collect)
	}
	if err != nil {
		return err
	}
	for _, r := range stop {
		stopRouter(a, r)
	}
	var errs []error
	for _, r := range res.Removed {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("box %s not removed: %s", shortID(r.ID), r.Error))
		}
	}
	if err := a.print(res, func(w io.Writer) error { return printGC(w, res) }); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// collectGarbage runs sandbox.GC on the vendor, then forgets from st the
// records of target whose boxes are gone. It returns the local model
// endpoints to stop.
func collectGarbage(ctx context.Context, v vendors.Vendor, st *boxState, o *gcOptions) (gcResult, []*localRouter, error) {
	res := gcResult{DryRun: o.dryRun, Removed: []gcEntry{}, Forgotten: []gcEntry{}}
	owner := stateOwner()
	known := func(b vendors.Info) bool {
		if b.Owner() != owner {
			return true // another user's state: not this one's to judge
		}
		return st.find(b.ID) != nil || (b.RunTag() != "" && st.findRunTag(b.RunTag()) != nil)
	}
	reaped, err := sandbox.GC(ctx, v, sandbox.GCOptions{DryRun: o.dryRun, Known: known})
	if err != nil {
		return res, nil, err
	}
	removed := map[string]bool{}
	for _, r := range reaped {
		e := gcEntry{ID: r.Box.ID, RunTag: r.Box.RunTag(), Reason: r.Reason}
		if r.Err != nil {
			e.Error = r.Err.Error()
		} else {
			removed[r.Box.ID] = true
		}
		res.Removed = append(res.Removed, e)
	}
	infos, err := v.List(ctx, nil)
	if err != nil {
		return res, nil, err
	}
	// A box gc removed (with --dry-run: would remove) counts as gone.
	live := map[string]bool{}
	for _, b := range infos {
		live[b.ID] = !removed[b.ID]
	}
	now := time.Now()
	forget := func(r *boxRecord) string {
		switch {
		case r.Target != o.target:
			return ""
		case r.pending():
			if now.After(r.Deadline) {
				return reasonNeverCreate
			}
		case !live[r.ID]:
			return reasonBoxGone
		}
		return ""
	}
	var stop []*localRouter
	drop := func(r *boxRecord) bool {
		reason := forget(r)
		if reason == "" {
			return false
		}
		res.Forgotten = append(res.Forgotten, gcEntry{ID: r.ID, RunTag: r.RunTag, Reason: reason})
		if r.Router != nil {
			stop = append(stop, r.Router)
		}
		return true
	}
	if o.dryRun {
		for i := range st.Boxes {
			drop(&st.Boxes[i])
		}
		return res, nil, nil
	}
	st.remove(drop)
	return res, stop, nil
}

func printGC(w io.Writer, res gcResult) error {
	verb, forgot := "removed", "forgot"
	if res.DryRun {
		verb, forgot = "would remove", "would forget"
	}
	if len(res.Removed) == 0 && len(res.Forgotten) == 0 {
		_, err := fmt.Fprintln(w, "nothing to collect")
		return err
	}
	for _, r := range res.Removed {
		line := fmt.Sprintf("%s %s (run %s): %s", verb, shortID(r.ID), r.RunTag, r.Reason)
		if r.Error != "" {
			line = fmt.Sprintf("could not remove %s (run %s, %s): %s", shortID(r.ID), r.RunTag, r.Reason, r.Error)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	for _, r := range res.Forgotten {
		id := shortID(r.ID)
		if id == "" {
			id = "a box being created"
		}
		if _, err := fmt.Fprintf(w, "%s %s (run %s): %s\n", forgot, id, r.RunTag, r.Reason); err != nil {
			return err
		}
	}
	return nil
}
