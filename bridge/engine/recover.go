package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tangle-network/boxctl/bridge/internal/leftover"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Recovery at start: the runs the previous incarnation left live are
// ended bridge_restarted and their leftover processes killed.

// RestartReason is the message of runs ended by a restart.
const RestartReason = "the bridge restarted while the run was live; its harness was stopped"

func (e *Engine) recover(ctx context.Context) error {
	e.killLeftoverSpares()
	runs, err := e.store.LiveRuns(ctx)
	if err != nil {
		return fmt.Errorf("recover runs: %w", err)
	}
	if len(runs) == 0 {
		return nil
	}
	// The leftover processes are found (one read of /proc, the slow
	// part) and killed while the runs are ended; the recovery is done
	// when both are.
	var killed []int
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		groups := make([]leftover.Group, len(runs))
		for i, r := range runs {
			groups[i] = leftover.Group{Marker: r.Marker, PGID: r.PGID}
		}
		killed = leftover.Kill(e.opts.ProcDir, groups)
	}()
	defer func() { <-scanned }()
	for _, r := range runs {
		frames, err := e.restartFrames(ctx, r)
		if err != nil {
			return fmt.Errorf("recover run %s: %w", r.ID, err)
		}
		if _, err := e.store.Finish(ctx, r.ID, store.Finish{Status: store.StatusError,
			ErrType: wire.TypeBridgeRestarted, ErrMessage: RestartReason}, frames); err != nil {
			return fmt.Errorf("recover run %s: %w", r.ID, err)
		}
	}
	<-scanned
	for i, r := range runs {
		e.log.Warn("run was live when the bridge stopped", "run", r.ID, "pgid", r.PGID, "leftover_processes", killed[i])
	}
	return nil
}

// restartFrames are the last frames of a run the restart ended, in the
// run's own format: a plain run's is an error frame; a retained turn's
// are canonical, an interaction.cancel for each interaction still open
// (which no answer can reach now: it is expired, and an answer to it is
// acknowledged expired) and a failed status, as the turn would have ended
// itself.
func (e *Engine) restartFrames(ctx context.Context, r store.Run) ([][]byte, error) {
	if _, err := e.store.TurnOfRun(ctx, r.ID); errors.Is(err, store.ErrNotFound) {
		return [][]byte{errorFrame(wire.ErrorBody{Type: wire.TypeBridgeRestarted, Message: RestartReason})}, nil
	} else if err != nil {
		return nil, err
	}
	open, err := e.store.ExpireInteractions(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	c := newCanonical(r.ID, r.SessionID, r.Harness, r.LastSeq)
	var frames [][]byte
	for _, it := range open {
		frames = append(frames, c.frame(interactionCancelEvent{Type: "interaction.cancel", ID: it.ID, Reason: wire.TypeBridgeRestarted}))
	}
	return append(frames, c.status("failed", wire.TypeBridgeRestarted+": "+RestartReason)), nil
}
