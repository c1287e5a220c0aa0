package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors/kubernetes"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/vendors/docker"
)

// lsOptions are the flags of `boxctl ls`.
type lsOptions struct {
	target string
}

func newLsCmd(a *app, runF func(context.Context, *lsOptions) error) *cobra.Command {
	o := &lsOptions{target: docker.Name}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the boxes boxctl made on a vendor",
		Long: `ls lists every box carrying boxctl's labels on the vendor (whoever made it):
id, state, run tag, owner, deadline, and the harness when the state file knows
the box. A box the state file does not know is marked with *; one the state file
names that no longer exists is listed as gone (boxctl gc forgets it).`,
		Example: `  boxctl ls
  boxctl ls -o json`,
		Args: boxArgs(cobra.NoArgs),
		RunE: verbRunE(a, o, func([]string) error { return checkBoxTarget(o.target) }, runF, runLs),
	}
	cmd.Flags().StringVar(&o.target, "target", o.target, "the vendor to list: "+strings.Join(boxTargets, ", "))
	return cmd
}

func runLs(ctx context.Context, a *app, o *lsOptions) error {
	s, st, err := a.readState()
	if err != nil {
		return err
	}
	v, closeVendor, err := a.openVendor(o.target)
	if err != nil {
		return err
	}
	defer closeVendor()
	infos, err := v.List(ctx, nil)
	if err != nil {
		return err
	}
	rows := st.Rows(o.target, s.Owner(), infos)
	a.meterRows(ctx, s, o.target, rows)
	return a.print(rows, func(w io.Writer) error { return render.Rows(w, rows, time.Now()) })
}

// meterRows adds to each row of a box with an upstream what the user's
// broker measured it spend, when the broker runs (ls starts none).
func (a *app) meterRows(ctx context.Context, s *boxstate.Store, target string, rows []boxstate.Row) {
	c := broker.Dial(brokerSocket(s))
	if remote, _ := a.remoteBroker(); remote != nil && target == kubernetes.Name {
		c = remote // the cluster's broker measures its boxes
	}
	if _, err := c.Status(ctx); err != nil {
		return
	}
	for i := range rows {
		if rows[i].Upstream == "" {
			continue
		}
		if u, err := c.Usage(ctx, rows[i].ID); err == nil {
			rows[i].Usage = &u
		}
	}
}
