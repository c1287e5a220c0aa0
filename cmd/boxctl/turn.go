package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/turntext"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// turnOptions are the flags and arguments of `boxctl turn`.
type turnOptions struct {
	box     string
	prompt  string
	timeout time.Duration
	model   string
	session string
	replace bool
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
--timeout exits non-zero with the reason.

--session continues a conversation: turns of one session id share it. A box
that is lost (its vendor no longer has it) ends its turn as interrupted; with
--replace its sessions continue on a new box of the same image and upstream,
each session's history from the replica outside the box, and this turn runs
there (the box takes the lost one's place in the state). Other turns the loss
interrupted are listed, never run again by themselves.`,
		Example: `  boxctl turn last "Say hello"
  boxctl turn 3f2a "Fix the failing test" --timeout 10m
  boxctl turn last "Remember the number 7" --session s1
  boxctl turn last "Which number?" --session s1 --replace
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
	f.StringVar(&o.session, "session", "", "continue the conversation of this session id (default: a new one)")
	f.BoolVar(&o.replace, "replace", false, "if the box was lost, continue its sessions on a new box and run the turn there")
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
	// Through the box's broker the turn's prompt is kept in its replica,
	// and a lost box's events and sessions are read from there.
	var access *boxstate.ModelAccess
	if rec.Upstream != "" {
		if acc, err := a.brokerAccess(s)(ctx, v, rec); err != nil {
			a.log.Warn("the box's broker: the turn is not recorded in its replica", "err", err)
		} else {
			access = &acc
		}
	}
	turn := provider.Turn{Prompt: o.prompt, Model: o.model, Timeout: o.timeout, SessionID: o.session}
	env, err := s.Connect(ctx, v, rec, boxstate.ConnectOptions{Access: access})
	replaced := false // one replacement per turn
	if errors.Is(err, vendors.ErrNotFound) && o.replace {
		if env, turn, err = replaceBox(ctx, a, s, v, rec, access, turn, ""); err != nil {
			return err
		}
		replaced = true
	} else if errors.Is(err, vendors.ErrNotFound) {
		return fmt.Errorf("%w (--replace continues its sessions on a new box)", err)
	} else if err != nil {
		return err
	}
	defer func() { _ = env.Close(context.WithoutCancel(ctx)) }()
	a.log.Debug("turn", "box", shortID(rec.ID), "timeout", o.timeout, "model", o.model)

	lost, runID, err := streamTurn(ctx, a, env, turn)
	switch {
	case lost && !o.replace:
		return fmt.Errorf("%w (--replace continues its sessions on a new box)", err)
	case !lost || !o.replace || replaced:
		return err
	}
	// One replacement per turn: a box lost in it again ends the turn.
	next, again, rerr := replaceBox(ctx, a, s, v, rec, access, turn, runID)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	defer func() { _ = next.Close(context.WithoutCancel(ctx)) }()
	_, _, err = streamTurn(ctx, a, next, again)
	return err
}

// streamTurn streams turn in env and prints it; lost reports that the box
// was lost under it (the run, runID, interrupted).
func streamTurn(ctx context.Context, a *app, env *sandbox.Environment, turn provider.Turn) (lost bool, runID string, err error) {
	r := turntext.New(turntext.Options{Out: a.out, Status: a.errOut, JSON: a.jsonOutput()})
	for ev, err := range env.Stream(ctx, turn) {
		if err != nil {
			r.End()
			if _, gone := errors.AsType[*sandbox.LostError](err); gone {
				return true, runID, fmt.Errorf("turn: %w", err)
			}
			if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
			}
			return false, runID, fmt.Errorf("turn: %w", err)
		}
		if ev.RunID != "" {
			runID = ev.RunID
		}
		if ev.Type == provider.EventStatus && strings.HasPrefix(ev.Detail, sandbox.DetailBoxLost) {
			lost = true
		}
		if err := r.Event(ev); err != nil {
			return false, runID, err
		}
	}
	if err := r.End(); err != nil {
		return false, runID, err
	}
	if status, failure := r.Status(); failure != "" {
		return lost, runID, fmt.Errorf("turn %s: %s", status, failure)
	}
	if ctx.Err() != nil {
		return false, runID, fmt.Errorf("turn: %w", context.Cause(ctx))
	}
	return false, runID, nil
}

// replaceBox continues the sessions of rec's lost box on a new box and
// says so; the turn to run there is turn, or, when the loss interrupted
// its run (runID), that run's turn under its own ids. The other turns the
// loss interrupted are listed.
func replaceBox(ctx context.Context, a *app, s *boxstate.Store, v vendors.Vendor, rec *boxstate.Record, access *boxstate.ModelAccess, turn provider.Turn, runID string) (*sandbox.Environment, provider.Turn, error) {
	if access == nil {
		return nil, turn, fmt.Errorf("box %s was lost, and no broker's replica holds its sessions (a box made without a broker): it cannot be replaced", shortID(rec.ID))
	}
	next, env, rep, err := s.Replace(ctx, v, rec, *access)
	if err != nil {
		return nil, turn, fmt.Errorf("replace lost box %s: %w", shortID(rec.ID), err)
	}
	fmt.Fprintf(a.errOut, "box %s was lost; box %s continues it\n", shortID(rep.From), shortID(next.ID))
	for _, cs := range rep.Sessions {
		fmt.Fprintf(a.errOut, "  session %s: %d turns of history (%s)\n", cs.ID, cs.Turns, cs.Method)
	}
	for _, in := range rep.Interrupted {
		if in.RunID == runID {
			again := in.Turn()
			again.Model, again.Timeout = turn.Model, turn.Timeout
			turn = again
			fmt.Fprintf(a.errOut, "  this turn (run %s) runs again there\n", in.RunID)
			continue
		}
		fmt.Fprintf(a.errOut, "  interrupted: run %s of session %s, not run again: %q\n", in.RunID, in.SessionID, truncate(in.Prompt, 60))
	}
	return env, turn, nil
}

// truncate cuts s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
