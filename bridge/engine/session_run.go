package engine

import (
	"context"
	"strconv"
	"syscall"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// executeRetained runs one retained turn to its end: like execute, but
// its frames are canonical envelopes, the harness's stdin stays open for
// answers to its questions, and every question is answered by the
// session's policy or through Respond.
func (e *Engine) executeRetained(l *liveRun, rr *retainedRun, req TurnRequest, run store.Run) {
	if p, ok := rr.adapter.(harness.Persistent); ok && e.opts.SessionIdleTimeout > 0 {
		e.executePersistent(l, rr, p, req, run)
		return
	}
	rt := e.newRetainedTurn(l, rr, req, run)
	turn, ok := rt.start(req)
	if !ok {
		return
	}
	b := req.Backend
	spec, err := rr.adapter.RetainedCommand(turn)
	if err == nil {
		err = harness.WriteFiles(spec.Files)
	}
	if c, ok := rr.adapter.(harness.Conversant); ok && err == nil {
		// The process serves this one turn: its input follows the
		// handshake, or waits in the conversation for the answers.
		rt.conv = c.NewConversation(turn)
		var input []byte
		if input, err = rt.conv.TurnInput(turn); err == nil {
			spec.Stdin = append(append(spec.Stdin, rt.conv.Open()...), input...)
		}
	}
	if err != nil {
		rt.fail("failed", wire.TypeHarnessError, redact(err.Error(), e.secrets()))
		return
	}
	started := l.spawnSpan(b.Bin, false)
	proc, err := e.spawnJailed(b.Adapter.Name(), spec, MarkerVar+"="+l.id, rt.prep)
	started(err)
	if err != nil {
		rt.fail("failed", wire.TypeHarnessUnavailable, "start "+b.Adapter.Name()+": "+redact(err.Error(), e.secrets()))
		return
	}
	defer killGroup(proc.pgid, syscall.SIGKILL)
	defer proc.closeStdin()
	rt.attach(proc)
	// A retained turn of a harness without a long-lived process starts
	// one per turn.
	start := &wire.HarnessStart{Process: wire.HarnessStarted, Reason: wire.StartNotSupported}
	if err := e.store.SetRunProcess(rt.ctx, l.id, store.RunProcess{PGID: proc.pgid, Start: start}); err != nil {
		rt.log.Error("record process group", "err", err)
	}
	rt.commit()

	idle, deadline, limit := e.watchdogs(turnTimeout(req.Timeout, b.Timeout))
	defer deadline.Stop()
	defer idle.Stop()
	parser := spec.Parser
	if parser == nil {
		parser = b.Adapter.NewParser()
	}
	d := rt.driver(proc, parser, idle, deadline, l.cancel)
	d.run()
	killGroup(proc.pgid, syscall.SIGKILL)
	rt.conclude(d, parser, limit)
}

// question handles a harness's question: answered at once under an
// unattended policy, otherwise stored as an open interaction and
// announced by the returned `interaction` event.
func (e *Engine) question(ctx context.Context, l *liveRun, rr *retainedRun, req TurnRequest, run store.Run, q harness.Question, n int, c *canonical) [][]byte {
	log := e.log.With("run", l.id)
	if req.Policy == wire.PolicyUnattendedAllow || req.Policy == wire.PolicyUnattendedDeny {
		allow := req.Policy == wire.PolicyUnattendedAllow
		line, err := rr.adapter.Answer(q, allow, "denied by the session's unattended-deny interaction policy")
		if err == nil {
			err = rr.write(line)
		}
		if err != nil {
			log.Error("answer question", "err", err)
		}
		return nil
	}
	id := "perm-" + strconv.Itoa(n)
	fr, _ := rr.adapter.(harness.FeedbackRelayer)
	ir, err := interactionRequest(q, id, run, fr != nil && fr.RelaysFeedback())
	if err != nil {
		log.Error("build interaction request", "err", err)
		if line, err := rr.adapter.Answer(q, false, "the bridge could not present this request"); err == nil {
			rr.write(line)
		}
		return nil
	}
	rr.mu.Lock()
	rr.questions[id] = q
	rr.mu.Unlock()
	if err := e.store.PutInteraction(ctx, store.Interaction{RunID: l.id, ID: id, NativeID: q.NativeID, Request: wire.MustJSON(ir)}); err != nil {
		log.Error("store interaction", "err", err)
	}
	// The frame is numbered by the run's canonical encoder.
	return [][]byte{c.frame(interactionEvent{Type: "interaction", Request: ir})}
}
