package engine

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// execute runs one turn to its end and finishes the run in the store.
func (e *Engine) execute(l *liveRun, req StartRequest, started time.Time) {
	ctx := context.Background() // the run outlives the request that started it
	log := e.log.With("run", l.id)
	ch := &chunker{id: "chatcmpl-" + l.id, model: req.ModelID, created: started.Unix()}
	var held [][]byte // frames the driver left for the run's end
	finish := func(f store.Finish, frames [][]byte) {
		defer l.endTrace(string(f.Status), f.ErrType)
		if len(held) > 0 {
			frames = append(held, frames...)
		}
		if _, err := e.store.Finish(ctx, l.id, f, frames); err != nil {
			log.Error("finish run", "err", err)
		}
		// Leave the live set before announcing the end, so whoever sees
		// the run terminal also sees its admission slot free.
		e.mu.Lock()
		delete(e.live, l.id)
		e.mu.Unlock()
		close(l.done)
		l.bc.notify()
	}
	fail := func(typ, msg string) {
		finish(store.Finish{Status: store.StatusError, ErrType: typ, ErrMessage: msg},
			[][]byte{errorFrame(wire.ErrorBody{Type: typ, Message: msg})})
	}

	b := req.Backend
	name := b.Adapter.Name()
	native, err := e.store.NativeSession(ctx, req.SessionID, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		fail(wire.TypeServerError, "look up session: "+err.Error())
		return
	}
	stateDir, err := e.sessionDir(name, req.SessionID)
	if err != nil {
		fail(wire.TypeServerError, err.Error())
		return
	}
	turn := harness.Turn{
		RunID: l.id, Bin: b.Bin, Model: req.Model, Messages: req.Messages, NativeSessionID: native,
		Cwd: req.Cwd, StateDir: stateDir, Environ: e.opts.Environ, Env: req.Env,
		RouterURL: e.opts.RouterURL, RouterKey: e.opts.RouterKey, Effort: req.Effort,
	}
	prep, err := e.confine(req.Confine, &turn)
	if err != nil {
		fail(JailErrorType(err), err.Error())
		return
	}
	spec, err := b.Adapter.Command(turn)
	if err != nil {
		fail(wire.TypeHarnessError, redact(err.Error(), e.opts.Secrets))
		return
	}
	if err := harness.WriteFiles(spec.Files); err != nil {
		fail(wire.TypeHarnessError, redact(err.Error(), e.opts.Secrets))
		return
	}
	spawned := l.spawnSpan(b.Bin)
	proc, err := e.spawnJailed(name, spec, MarkerVar+"="+l.id, prep)
	spawned(err)
	if err != nil {
		fail(wire.TypeHarnessUnavailable, "start "+name+": "+redact(err.Error(), e.opts.Secrets))
		return
	}
	log.Debug("harness started", "pgid", proc.pgid, "bin", b.Bin)
	// The process group and the native session are recorded by the
	// committer, before the events that follow them: the harness's
	// output is not held up by their writes.
	recordedGroup := false
	var nativeID atomic.Pointer[string]
	record := func() {
		if !recordedGroup {
			recordedGroup = true
			if err := e.store.SetProcess(ctx, l.id, proc.pgid); err != nil {
				log.Error("record process group", "err", err)
			}
		}
		if id := nativeID.Swap(nil); id != nil {
			if err := e.store.PutNativeSession(ctx, req.SessionID, name, *id); err != nil {
				log.Error("record native session", "err", err)
			}
		}
	}

	idle, deadline, limit := e.watchdogs(turnTimeout(req.Timeout, b.Timeout))
	defer deadline.Stop()
	defer idle.Stop()
	defer proc.closeStdin()
	parser := spec.Parser
	if parser == nil {
		parser = b.Adapter.NewParser()
	}
	var end *harness.Event
	var scratch [][]byte // the frames of the last line (see driver.handle)
	d := &driver{e: e, l: l, log: log, proc: proc, idle: idle, deadline: deadline, cancel: l.cancel,
		ended: func() bool { return end != nil }, beforeCommit: record, holdEnd: true,
		handle: func(line []byte) [][]byte {
			frames := scratch[:0]
			for _, ev := range parser.Line(line) {
				switch ev.Kind {
				case harness.KindSession:
					id := ev.NativeSessionID
					nativeID.Store(&id)
				case harness.KindEnd:
					if end == nil {
						last := ev // a copy: taking ev's address would put every event on the heap
						end = &last
					}
				default:
					frames = ch.appendFrames(frames, ev)
				}
			}
			scratch = frames
			return frames
		}}
	d.run()
	record() // what the last line said, when no commit followed it
	held = d.leftover
	killGroup(proc.pgid, syscall.SIGKILL)
	stopReason := d.stopReason

	switch {
	// A harness that ends its turn with an error after the driver stopped
	// it reports the stop, not the error the stop caused.
	case end != nil && stopReason != wire.TypeServerError && (stopReason == "" || end.Err == nil):
		f := store.Finish{Status: store.StatusDone}
		if end.Err != nil {
			f = store.Finish{Status: store.StatusError, ErrType: end.Err.Type, ErrMessage: end.Err.Message}
		}
		finish(f, ch.end(*end))
	case stopReason == wire.TypeRunCancelled:
		msg := "the run was cancelled; its process group was killed"
		finish(store.Finish{Status: store.StatusCancelled, ErrType: wire.TypeRunCancelled, ErrMessage: msg},
			[][]byte{errorFrame(wire.ErrorBody{Type: wire.TypeRunCancelled, Message: msg})})
	case stopReason == wire.TypeBridgeShutdown:
		fail(stopReason, "the bridge shut down while the run was live; its process group was killed")
	case stopReason == wire.TypeHarnessStalled:
		fail(stopReason, fmt.Sprintf("%s printed nothing for %s; its process group was killed", name, e.opts.IdleTimeout)+diagnosis(parser, e.opts.Secrets))
	case stopReason == wire.TypeHarnessTimeout:
		frame := errorFrame(wire.ErrorBody{Type: stopReason, Code: wire.FinishTimeout,
			Message: fmt.Sprintf("the turn exceeded its deadline of %s; its process group was killed", limit) + diagnosis(parser, e.opts.Secrets)})
		finish(store.Finish{Status: store.StatusError, ErrType: stopReason, ErrMessage: "turn deadline exceeded"}, [][]byte{frame})
	case stopReason == wire.TypeServerError:
		fail(stopReason, "the bridge could not store the run's events")
	default:
		select { // let the last stderr bytes arrive
		case <-proc.errDone:
		case <-time.After(500 * time.Millisecond):
		}
		msg := fmt.Sprintf("%s exited (%s) before finishing the turn", name, exitStatus(proc.exitErr))
		if t := proc.stderr.String(e.opts.Secrets); t != "" {
			msg += "; stderr: " + t
		}
		fail(wire.TypeHarnessError, msg)
	}
	log.Debug("run finished")
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal " + ws.Signal().String()
		}
		return fmt.Sprintf("status %d", ee.ExitCode())
	}
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// diagnosis is what parser says about a turn that never ended, as a
// suffix of an error message ("" if nothing).
func diagnosis(parser harness.Parser, secrets []string) string {
	if d, ok := parser.(harness.Diagnoser); ok {
		if msg := d.Diagnosis(); msg != "" {
			return "; " + redact(msg, secrets)
		}
	}
	return ""
}
