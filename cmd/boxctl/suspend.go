package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
)

// newSuspendCmds returns `boxctl suspend` and `boxctl resume` (its Router from the environment, as up's).
func newSuspendCmds(a *app) (cmds []*cobra.Command) {
	for _, c := range []struct {
		use, short string
		act        boxstate.Action
	}{
		{"suspend", "Stop a box between turns, keeping its workspace and sessions", boxstate.Suspend},
		{"resume", "Start a suspended box again, with a fresh bearer", boxstate.Resume},
	} {
		cmds = append(cmds, &cobra.Command{Use: c.use + " <box>", Short: c.short, Args: boxArgs(cobra.ExactArgs(1)), RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openState()
			if err != nil {
				return err
			}
			id, err := boxstate.Apply(cmd.Context(), func() (*boxstate.Store, error) { return s, nil }, c.act, args[0], a.openVendor, a.brokerAccess(s), a.log)
			if err != nil {
				return err
			}
			done := c.act.String()
			return a.print(map[string]string{"id": id, "state": done}, func(w io.Writer) error { _, err := fmt.Fprintf(w, "%s %s\n", done, shortID(id)); return err })
		}})
	}
	return cmds
}
