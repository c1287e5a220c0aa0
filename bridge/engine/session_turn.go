package engine

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// executePersistent runs one retained turn in its session's long-lived
// process: it takes the session's idle process (or starts one that
// resumes the session), writes the turn's input line, and ends the turn at
// the turn's terminal event, leaving the process for the next turn. A
// cancel asks the harness to interrupt the turn (harness.Persistent
// Interrupt) and kills the process group if no terminal event follows
// within KillGrace; any other stop, a crash, or an exit ends the process,
// and the next turn starts a fresh one. Frames, interactions and the
// run's end are as in executeRetained.
func (e *Engine) executePersistent(l *liveRun, rr *retainedRun, pa harness.Persistent, req TurnRequest, run store.Run) {
	rt := e.newRetainedTurn(l, rr, req)
	ctx, log, c := rt.ctx, rt.log, rt.c
	finish, fail, commit := rt.finish, rt.fail, rt.commit
	turn, ok := rt.start(req)
	if !ok {
		return
	}
	b := req.Backend
	name := b.Adapter.Name()
	input, err := pa.TurnInput(turn)
	if err != nil {
		fail("failed", wire.TypeHarnessError, redact(err.Error(), e.opts.Secrets))
		return
	}
	key, fp := sessionProcKey(name, l.sessionID), turnFingerprint(turn)
	limit := e.opts.MaxLifetime
	if b.Timeout > 0 && b.Timeout < limit {
		limit = b.Timeout
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	idle := time.NewTimer(e.opts.IdleTimeout)
	defer idle.Stop()
	var (
		sp                *sessionProc
		proc              *process
		parser            harness.Parser
		end               *harness.Event
		stopReason        string
		killed, interrupt bool
		questions         int
		lines             <-chan []byte
		exited            <-chan struct{}
		cancel            = l.cancel
		killC, drainC     <-chan time.Time
	)
	stop := func(reason string) {
		if stopReason == "" {
			stopReason = reason
		}
		killed = true
		killGroup(proc.pgid, syscall.SIGKILL)
	}
	handle := func(line []byte) { rt.handle(line, parser, req, run, &questions, &end) }
	// A process kept from the last turn may have died since, or die as
	// the turn's input reaches it: when it goes without a word of the
	// turn, the turn runs once more in a fresh process that resumes the
	// session.
	for attempt := 0; ; attempt++ {
		reused := true
		if sp = e.takeSessionProc(key, fp); sp == nil {
			reused = false
			if sp, err = e.startSessionProc(turn, pa, key, fp, l.id); err != nil {
				fail("failed", wire.TypeHarnessUnavailable, "start "+name+": "+redact(err.Error(), e.opts.Secrets))
				return
			}
		}
		proc, parser = sp.proc, b.Adapter.NewParser()
		lines, exited, drainC = proc.lines, proc.exited, nil
		if err := proc.writeStdin(input); err != nil {
			e.endSessionProc(sp)
			if reused && attempt == 0 {
				continue
			}
			fail("failed", wire.TypeHarnessError, name+" did not take the turn's input: "+err.Error())
			return
		}
		rr.mu.Lock()
		rr.write = proc.writeStdin
		rr.mu.Unlock()
		if err := e.store.SetProcessMarker(ctx, l.id, proc.pgid, sp.marker); err != nil {
			log.Error("record process group", "err", err)
		}
		commit()
		heard := false
		for end == nil && lines != nil {
			select {
			case line, ok := <-lines:
				if !ok {
					lines = nil
					continue
				}
				heard = true
				idle.Reset(e.opts.IdleTimeout)
				handle(line)
			drain:
				for n := 1; n < maxBatch && end == nil; n++ {
					select {
					case line, ok := <-lines:
						if !ok {
							lines = nil
							break drain
						}
						handle(line)
					default:
						break drain
					}
				}
				if !commit() {
					stop(wire.TypeServerError)
				}
			case <-exited:
				exited = nil
				killGroup(proc.pgid, syscall.SIGKILL)
				drainC = time.After(e.opts.ResultGrace)
			case <-drainC:
				proc.stdout.Close() // something outside the group holds stdout open
				drainC = nil
			case <-idle.C:
				stop(wire.TypeHarnessStalled)
			case <-deadline.C:
				stop(wire.TypeHarnessTimeout)
			case <-cancel:
				cancel = nil
				reason, _ := l.cancelReason.Load().(string)
				line := pa.Interrupt()
				if reason == wire.TypeRunCancelled && line != nil && proc.writeStdin(line) == nil {
					// The turn ends with its terminal event; the process stays.
					stopReason, interrupt = reason, true
					killC = time.After(e.opts.KillGrace)
					continue
				}
				stop(reason)
			case <-killC:
				killC = nil
				stop(stopReason)
			}
		}
		if end == nil && !heard && reused && attempt == 0 && stopReason == "" {
			log.Debug("session process went before the turn; starting a fresh one")
			e.endSessionProc(sp)
			continue
		}
		break
	}
	// The process goes back to the session (or away) before the run reads
	// terminal: a caller that admits the next turn the moment this one ends
	// must find it.
	healthy := end != nil && !killed && exited != nil && lines != nil
	if healthy {
		e.keepSessionProc(ctx, sp, l.sessionID)
	} else {
		defer e.endSessionProc(sp)
	}
	exitErr := errors.New("still running")
	if end == nil {
		killGroup(proc.pgid, syscall.SIGKILL)
		select {
		case <-proc.exited:
			exitErr = proc.exitErr
		case <-time.After(e.opts.KillGrace):
		}
		select { // let the last stderr bytes arrive
		case <-proc.errDone:
		case <-time.After(500 * time.Millisecond):
		}
	}
	switch {
	case end != nil && stopReason != wire.TypeServerError && (stopReason == "" || end.Err == nil):
		f := store.Finish{Status: store.StatusDone}
		if end.Err != nil {
			f = store.Finish{Status: store.StatusError, ErrType: end.Err.Type, ErrMessage: end.Err.Message}
		}
		finish(f, func() [][]byte { return c.end(*end) })
	case stopReason == wire.TypeRunCancelled && interrupt && !killed:
		fail("cancelled", wire.TypeRunCancelled, "the run was cancelled; "+name+" interrupted its turn")
	case stopReason == wire.TypeRunCancelled:
		fail("cancelled", wire.TypeRunCancelled, "the run was cancelled; its process group was killed")
	case stopReason == wire.TypeBridgeShutdown:
		fail("failed", stopReason, "the bridge shut down while the run was live; its process group was killed")
	case stopReason == wire.TypeHarnessStalled:
		fail("failed", stopReason, fmt.Sprintf("%s printed nothing for %s; its process group was killed", name, e.opts.IdleTimeout)+diagnosis(parser, e.opts.Secrets))
	case stopReason == wire.TypeHarnessTimeout:
		fail("failed", stopReason, fmt.Sprintf("the turn exceeded its deadline of %s; its process group was killed", limit)+diagnosis(parser, e.opts.Secrets))
	case stopReason == wire.TypeServerError:
		rt.pending = nil
		fail("failed", stopReason, "the bridge could not store the run's events")
	default:
		msg := fmt.Sprintf("%s exited (%s) before finishing the turn", name, exitStatus(exitErr))
		if t := proc.stderr.String(e.opts.Secrets); t != "" {
			msg += "; stderr: " + t
		}
		fail("failed", wire.TypeHarnessError, msg)
	}
}

// startSessionProc starts the long-lived process of a session for the run
// runID, marked with that run's id for crash recovery.
func (e *Engine) startSessionProc(t harness.Turn, pa harness.Persistent, key, fingerprint, runID string) (*sessionProc, error) {
	spec, err := pa.SessionCommand(t)
	if err == nil {
		err = harness.WriteFiles(spec.Files)
	}
	if err != nil {
		return nil, err
	}
	spec.HoldStdin = true
	if spec.Stdin == nil {
		spec.Stdin = []byte{}
	}
	marker := MarkerVar + "=" + runID
	proc, err := startProcess(spec, marker)
	if err != nil {
		return nil, err
	}
	e.log.Debug("session process started", "pgid", proc.pgid, "bin", t.Bin, "resume", t.NativeSessionID != "")
	return &sessionProc{key: key, proc: proc, marker: marker, fingerprint: fingerprint}, nil
}
