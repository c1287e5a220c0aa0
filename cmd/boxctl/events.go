package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// eventsOptions are the flags of `boxctl events`.
type eventsOptions struct {
	follow bool
}

func newEventsCmd(a *app, runF func(context.Context, *eventsOptions) error) *cobra.Command {
	o := &eventsOptions{}
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print the boxes' lifecycle events as JSON lines",
		Long: `events prints the lifecycle events of the boxes this state knows, oldest first, one
JSON object a line: created, ready, turn.started, turn.ended (with the turn's
outcome), destroyed (with its reason: user, deadline, gc or failure). With -f it
then waits for new events, from any boxctl process, until interrupted.

The events are kept beside the state file ($` + boxstate.PathEnv + `): boxes.json's are in
boxes.events.jsonl.`,
		Example: `  boxctl events
  boxctl events -f | jq 'select(.type == "destroyed")'`,
		Args: boxArgs(cobra.NoArgs),
		RunE: verbRunE(a, o, func([]string) error { return nil }, runF, runEvents),
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "wait for new events until interrupted")
	return cmd
}

func runEvents(ctx context.Context, a *app, o *eventsOptions) error {
	s, err := a.openState()
	if err != nil {
		return err
	}
	enc := json.NewEncoder(a.out)
	err = s.Events().Read(ctx, o.follow, func(ev sandbox.Event) error { return enc.Encode(ev) })
	if o.follow && errors.Is(err, context.Canceled) {
		return nil // interrupted: the end of a follow
	}
	return err
}
