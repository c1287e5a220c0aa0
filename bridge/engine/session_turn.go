package engine

import (
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/jail"
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
	rt := e.newRetainedTurn(l, rr, req, run)
	turn, ok := rt.start(req)
	if !ok {
		return
	}
	b := req.Backend
	name := b.Adapter.Name()
	_, conversant := pa.(harness.Conversant)
	var (
		input []byte
		err   error
	)
	if !conversant {
		if input, err = pa.TurnInput(turn); err != nil {
			rt.fail("failed", wire.TypeHarnessError, redact(err.Error(), e.secrets()))
			return
		}
	}
	// A process serves only turns confined as the one it was started for.
	key, fp := sessionProcKey(name, l.sessionID), turnFingerprint(turn, rt.prep.Key())
	idle, deadline, limit := e.watchdogs(turnTimeout(req.Timeout, b.Timeout))
	defer deadline.Stop()
	defer idle.Stop()
	var (
		sp     *sessionProc
		d      *driver
		parser harness.Parser
		cancel <-chan struct{} = l.cancel
	)
	// A process kept from the last turn may have died since, or die as
	// the turn's input reaches it: when it goes without a word of the
	// turn, the turn runs once more in a fresh process that resumes the
	// session.
	for attempt := 0; ; attempt++ {
		reused := true
		var start wire.HarnessStart
		if sp, start = e.takeSessionProc(key, fp); sp == nil {
			reused = false
			started := l.spawnSpan(turn.Bin, false)
			sp, err = e.startSessionProc(turn, pa, key, fp, l.id, rt.prep)
			started(err)
			if err != nil {
				rt.fail("failed", wire.TypeHarnessUnavailable, "start "+name+": "+redact(err.Error(), e.secrets()))
				return
			}
		}
		interrupt := pa.Interrupt
		if rt.conv = sp.conv; sp.conv != nil {
			if input, err = sp.conv.TurnInput(turn); err != nil {
				e.keepSessionProc(rt.ctx, sp, l.sessionID)
				rt.fail("failed", wire.TypeHarnessError, redact(err.Error(), e.secrets()))
				return
			}
			interrupt = sp.conv.Interrupt
		}
		if err := sp.proc.writeStdin(input); err != nil {
			e.endSessionProc(sp)
			if reused && attempt == 0 {
				continue
			}
			rt.fail("failed", wire.TypeHarnessError, name+" did not take the turn's input: "+err.Error())
			return
		}
		rt.attach(sp.proc)
		if attempt > 0 {
			start = wire.HarnessStart{Process: wire.HarnessStarted, Reason: wire.StartExited}
		}
		if err := e.store.SetRunProcess(rt.ctx, l.id, store.RunProcess{PGID: sp.proc.pgid, Marker: sp.marker, Start: &start}); err != nil {
			rt.log.Error("record process group", "err", err)
		}
		rt.commit()
		parser = b.Adapter.NewParser()
		d = rt.driver(sp.proc, parser, idle, deadline, cancel)
		d.stays, d.interrupt = true, interrupt
		d.run()
		cancel = d.cancel
		if rt.end == nil && !d.heard && reused && attempt == 0 && d.stopReason == "" {
			rt.log.Debug("session process went before the turn; starting a fresh one")
			e.endSessionProc(sp)
			continue
		}
		break
	}
	// The process goes back to the session (or away) before the run reads
	// terminal: a caller that admits the next turn the moment this one ends
	// must find it.
	if rt.end != nil && !d.killed && !d.gone {
		e.keepSessionProc(rt.ctx, sp, l.sessionID)
	} else {
		defer e.endSessionProc(sp)
	}
	rt.conclude(d, parser, limit)
}

// startSessionProc starts the long-lived process of a session for the run
// runID, marked with that run's id for crash recovery, confined by prep
// (nil: not confined).
func (e *Engine) startSessionProc(t harness.Turn, pa harness.Persistent, key string, fingerprint procSettings, runID string, prep *jail.Prepared) (*sessionProc, error) {
	spec, err := pa.SessionCommand(t)
	if err == nil {
		err = harness.WriteFiles(spec.Files)
	}
	if err != nil {
		return nil, err
	}
	spec.HoldStdin = true
	var conv harness.Conversation
	if c, ok := pa.(harness.Conversant); ok {
		conv = c.NewConversation(t)
		spec.Stdin = append(spec.Stdin, conv.Open()...)
	}
	if spec.Stdin == nil {
		spec.Stdin = []byte{}
	}
	marker := MarkerVar + "=" + runID
	harnessName, _, _ := strings.Cut(key, "\x00") // sessionProcKey
	proc, err := e.spawnJailed(harnessName, spec, marker, prep)
	if err != nil {
		return nil, err
	}
	e.log.Debug("session process started", "pgid", proc.pgid, "bin", t.Bin, "resume", t.NativeSessionID != "")
	return &sessionProc{key: key, proc: proc, marker: marker, fingerprint: fingerprint, conv: conv}, nil
}
