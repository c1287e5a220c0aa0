package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
)

// newSuspendCmds returns `boxctl suspend` and `boxctl resume` (its Router from the environment, as up's).
func newSuspendCmds(a *app) (cmds []*cobra.Command) {
	for use, c := range map[string][2]string{"suspend": {"suspended", "Stop a box between turns, keeping its workspace and sessions"}, "resume": {"resumed", "Start a suspended box again, with a fresh bearer"}} {
		cmds = append(cmds, &cobra.Command{Use: use + " <box>", Short: c[1], Args: boxArgs(cobra.ExactArgs(1)), RunE: func(cmd *cobra.Command, args []string) error {
			id, err := boxstate.Verb(cmd.Context(), a.openState, use, args[0], a.openVendor, os.Getenv, a.log)
			if err != nil {
				return err
			}
			return a.print(map[string]string{"id": id, "state": c[0]}, func(w io.Writer) error { _, err := fmt.Fprintf(w, "%s %s\n", c[0], shortID(id)); return err })
		}})
	}
	return cmds
}
