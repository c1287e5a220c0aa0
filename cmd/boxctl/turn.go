package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/turntext"
	"github.com/tangle-network/boxctl/provider"
)

// turnOptions are the flags and arguments of `boxctl turn`.
type turnOptions struct {
	box     string
	prompt  string
	timeout time.Duration
	model   string
}

func newTurnCmd(a *app, runF func(context.Context, *turnOptions) error) *cobra.Command {
	o := &turnOptions{}
	cmd := &cobra.Command{
		Use:   "turn <box> <prompt>",
		Short: "Run one agent turn in a box and stream it",
		Long: `turn sends a prompt to the harness in a box that ` + "`boxctl up`" + ` made and streams the
run as it happens: the agent's text as it arrives, one line per tool call, and a
last line with the model that served the turn and its token usage. -o json
prints every event as one JSON object per line instead.

<box> is a box id, a unique prefix of it (at least 4 characters), or "last".
Ctrl-C cancels the run in the box; a run that fails, is cancelled or outlives
--timeout exits non-zero with the reason.`,
		Example: `  boxctl turn last "Say hello"
  boxctl turn 3f2a "Fix the failing test" --timeout 10m
  boxctl turn last "List the files" -o json`,
		Args: boxArgs(cobra.ExactArgs(2)),
		RunE: verbRunE(a, o, func(args []string) error {
			o.box, o.prompt = args[0], args[1]
			if o.timeout < 0 {
				return usageErrorf("--timeout %v: want a positive duration, or 0 for none", o.timeout)
			}
			if o.prompt == "" {
				return usageErrorf("the prompt is empty")
			}
			return nil
		}, runF, runTurn),
	}
	f := cmd.Flags()
	f.DurationVar(&o.timeout, "timeout", 0, "cancel the run if it has not ended after this long (default: no bound)")
	f.StringVar(&o.model, "model", "", "model for this turn (default: the box's)")
	return cmd
}

func runTurn(ctx context.Context, a *app, o *turnOptions) error {
	s, st, err := a.readState()
	if err != nil {
		return err
	}
	rec, err := st.Resolve(o.box)
	if err != nil {
		return err
	}
	v, closeVendor, err := a.openVendor(rec.Target)
	if err != nil {
		return err
	}
	defer closeVendor()
	env, err := s.Connect(ctx, v, rec, boxstate.ConnectOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = env.Close(context.WithoutCancel(ctx)) }()
	a.log.Debug("turn", "box", shortID(rec.ID), "timeout", o.timeout, "model", o.model)

	r := turntext.New(turntext.Options{Out: a.out, Status: a.errOut, JSON: a.jsonOutput()})
	for ev, err := range env.Stream(ctx, provider.Turn{Prompt: o.prompt, Model: o.model, Timeout: o.timeout}) {
		if err != nil {
			r.End()
			if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
			}
			return fmt.Errorf("turn: %w", err)
		}
		if err := r.Event(ev); err != nil {
			return err
		}
	}
	if err := r.End(); err != nil {
		return err
	}
	if status, failure := r.Status(); failure != "" {
		return fmt.Errorf("turn %s: %s", status, failure)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("turn: %w", context.Cause(ctx))
	}
	return nil
}
