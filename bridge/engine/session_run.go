package engine

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"time"

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
	rt := e.newRetainedTurn(l, rr, req)
	ctx, log, c := rt.ctx, rt.log, rt.c
	finish, fail, commit := rt.finish, rt.fail, rt.commit
	turn, ok := rt.start(req)
	if !ok {
		return
	}
	b := req.Backend
	name := b.Adapter.Name()
	spec, err := rr.adapter.RetainedCommand(turn)
	if err == nil {
		err = harness.WriteFiles(spec.Files)
	}
	if err != nil {
		fail("failed", wire.TypeHarnessError, redact(err.Error(), e.opts.Secrets))
		return
	}
	proc, err := startProcess(spec, MarkerVar+"="+l.id)
	if err != nil {
		fail("failed", wire.TypeHarnessUnavailable, "start "+name+": "+redact(err.Error(), e.opts.Secrets))
		return
	}
	defer killGroup(proc.pgid, syscall.SIGKILL)
	defer proc.closeStdin()
	rr.mu.Lock()
	rr.write = proc.writeStdin
	rr.mu.Unlock()
	if err := e.store.SetProcess(ctx, l.id, proc.pgid); err != nil {
		log.Error("record process group", "err", err)
	}
	commit()

	limit := e.opts.MaxLifetime
	if b.Timeout > 0 && b.Timeout < limit {
		limit = b.Timeout
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	idle := time.NewTimer(e.opts.IdleTimeout)
	defer idle.Stop()
	parser := spec.Parser
	if parser == nil {
		parser = b.Adapter.NewParser()
	}
	var (
		end                   *harness.Event
		stopReason            string
		questions             int
		lines, exited, cancel = proc.lines, proc.exited, l.cancel
		graceC, killC, drainC <-chan time.Time
	)
	stop := func(reason string, soft bool) {
		if stopReason == "" {
			stopReason = reason
		}
		if soft {
			killGroup(proc.pgid, syscall.SIGTERM)
			killC = time.After(e.opts.KillGrace)
			return
		}
		killGroup(proc.pgid, syscall.SIGKILL)
	}
	handle := func(line []byte) { rt.handle(line, parser, req, run, &questions, &end) }
	for lines != nil || exited != nil {
		select {
		case line, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			idle.Reset(e.opts.IdleTimeout)
			handle(line)
		drain:
			for n := 1; n < maxBatch; n++ {
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
				stop(wire.TypeServerError, false)
			}
			if end != nil && graceC == nil && exited != nil {
				proc.closeStdin()
				graceC = time.After(e.opts.ResultGrace)
			}
		case <-exited:
			exited = nil
			killGroup(proc.pgid, syscall.SIGKILL)
			if lines != nil {
				drainC = time.After(e.opts.ResultGrace)
			}
		case <-drainC:
			proc.stdout.Close()
			drainC = nil
		case <-graceC:
			stop("", false)
			graceC = nil
		case <-idle.C:
			if end == nil {
				stop(wire.TypeHarnessStalled, false)
			}
		case <-deadline.C:
			if end == nil {
				stop(wire.TypeHarnessTimeout, false)
			}
		case <-cancel:
			cancel = nil
			if end == nil {
				reason, _ := l.cancelReason.Load().(string)
				stop(reason, true)
			}
		case <-killC:
			killC = nil
			killGroup(proc.pgid, syscall.SIGKILL)
		}
	}
	killGroup(proc.pgid, syscall.SIGKILL)
	switch {
	case end != nil && stopReason != wire.TypeServerError:
		f := store.Finish{Status: store.StatusDone}
		if end.Err != nil {
			f = store.Finish{Status: store.StatusError, ErrType: end.Err.Type, ErrMessage: end.Err.Message}
		}
		finish(f, func() [][]byte { return c.end(*end) })
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
		select {
		case <-proc.errDone:
		case <-time.After(500 * time.Millisecond):
		}
		msg := fmt.Sprintf("%s exited (%s) before finishing the turn", name, exitStatus(proc.exitErr))
		if t := proc.stderr.String(e.opts.Secrets); t != "" {
			msg += "; stderr: " + t
		}
		fail("failed", wire.TypeHarnessError, msg)
	}
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
	ir, err := interactionRequest(q, id, run)
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
	if err := e.store.PutInteraction(ctx, store.Interaction{RunID: l.id, ID: id, NativeID: q.NativeID, Request: mustJSON(ir)}); err != nil {
		log.Error("store interaction", "err", err)
	}
	// The frame is numbered by the run's canonical encoder.
	return [][]byte{c.frame(interactionEvent{Type: "interaction", Request: ir})}
}
