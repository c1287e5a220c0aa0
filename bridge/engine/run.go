package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// execute runs one turn to its end and finishes the run in the store.
func (e *Engine) execute(l *liveRun, req StartRequest, started time.Time) {
	x := &oneShot{e: e, l: l, req: req, log: e.log.With("run", l.id)}
	b := req.Backend
	name := b.Adapter.Name()
	spec, prep, proc, ok := x.command()
	if !ok {
		return
	}
	spawned := l.spawnSpan(b.Bin, proc != nil)
	if proc == nil {
		var err error
		proc, err = e.spawnJailed(name, spec, MarkerVar+"="+l.id, prep)
		spawned(err)
		if err != nil {
			x.fail(wire.TypeHarnessUnavailable, "start "+name+": "+redact(err.Error(), e.secrets()))
			return
		}
		x.log.Debug("harness started", "pgid", proc.pgid, "bin", b.Bin)
	} else {
		spawned(nil)
		x.log.Debug("harness taken from the spare", "pgid", proc.pgid, "bin", b.Bin)
	}
	idle, deadline, limit := e.watchdogs(turnTimeout(req.Timeout, b.Timeout))
	defer deadline.Stop()
	defer idle.Stop()
	defer proc.closeStdin()
	parser := spec.Parser
	if parser == nil {
		parser = b.Adapter.NewParser()
	}
	ch := &chunker{id: "chatcmpl-" + l.id, model: req.ModelID, created: started.Unix()}
	end, stopReason := x.drive(proc, parser, ch, idle, deadline)
	x.conclude(proc, parser, ch, end, stopReason, limit)
	x.log.Debug("run finished")
}

// oneShot is a one-shot run being executed: a turn in a harness process
// of its own, its events chat completion chunks.
type oneShot struct {
	e    *Engine
	l    *liveRun
	req  StartRequest
	log  *slog.Logger
	held [][]byte // frames the driver left for the run's end
	// marker is the process's marker when it is a spare's ("": the
	// run's own, MarkerVar=id).
	marker string
	// start is how the process came to serve the turn.
	start wire.HarnessStart
}

// finish ends the run in the store with f and its last frames, and lets
// it go.
func (x *oneShot) finish(f store.Finish, frames [][]byte) {
	e, l := x.e, x.l
	defer l.endTrace(string(f.Status), f.ErrType)
	if len(x.held) > 0 {
		frames = append(x.held, frames...)
	}
	// The run outlives the request that started it.
	if r, err := e.store.Finish(context.Background(), l.id, f, frames); err != nil {
		x.log.Error("finish run", "err", err)
	} else {
		l.advance(r.LastSeq) // the run's last events, for its readers' hold
	}
	// Leave the live set before announcing the end, so whoever sees
	// the run terminal also sees its admission slot free.
	e.mu.Lock()
	delete(e.live, l.id)
	e.mu.Unlock()
	close(l.done)
	l.bc.notify()
}

// fail ends the run with an error of type typ.
func (x *oneShot) fail(typ, msg string) {
	x.finish(store.Finish{Status: store.StatusError, ErrType: typ, ErrMessage: msg},
		[][]byte{errorFrame(wire.ErrorBody{Type: typ, Message: msg})})
}

// command builds the harness command of the turn, its configuration
// files written, and the confinement it runs in, or hands the turn to the
// spare kept for its settings (proc, already running); it has failed the
// run when ok is false.
func (x *oneShot) command() (spec harness.Command, prep *jail.Prepared, proc *process, ok bool) {
	e, req := x.e, x.req
	b := req.Backend
	name := b.Adapter.Name()
	native, err := e.store.NativeSession(context.Background(), req.SessionID, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		x.fail(wire.TypeServerError, "look up session: "+err.Error())
		return spec, nil, nil, false
	}
	stateDir, err := e.sessionDir(name, req.SessionID)
	if err != nil {
		x.fail(wire.TypeServerError, err.Error())
		return spec, nil, nil, false
	}
	turn := harness.Turn{
		RunID: x.l.id, Bin: b.Bin, Model: req.Model, Messages: req.Messages, NativeSessionID: native,
		Cwd: req.Cwd, StateDir: stateDir, Environ: e.environ(), Env: req.Env,
		RouterURL: e.opts.RouterURL, RouterKey: e.opts.RouterKey, Effort: req.Effort,
	}
	p, marker, sspec := x.adoptSpare(turn, native)
	e.endSessionSpares(req.SessionID)
	if p != nil {
		x.marker = marker
		return sspec, nil, p, true
	}
	if prep, err = e.confine(req.Confine, &turn); err != nil {
		x.fail(JailErrorType(err), err.Error())
		return spec, nil, nil, false
	}
	if spec, err = b.Adapter.Command(turn); err == nil {
		err = harness.WriteFiles(spec.Files)
	}
	if err != nil {
		x.fail(wire.TypeHarnessError, redact(err.Error(), e.secrets()))
		return spec, nil, nil, false
	}
	return spec, prep, nil, true
}

// drive reads the turn's output through parser into chunks until the
// turn ends or is stopped, and returns its terminal event (nil: none) and
// why the driver stopped it ("": it did not).
func (x *oneShot) drive(proc *process, parser harness.Parser, ch *chunker, idle, deadline *time.Timer) (*harness.Event, string) {
	record, nativeID := x.recorder(proc)
	var end *harness.Event
	var scratch [][]byte // the frames of the last line (see driver.handle)
	d := &driver{e: x.e, l: x.l, log: x.log, proc: proc, idle: idle, deadline: deadline, cancel: x.l.cancel,
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
	x.held = d.leftover
	killGroup(proc.pgid, syscall.SIGKILL)
	return end, d.stopReason
}

// recorder returns what records the turn's process group, and the native
// session the harness reported (stored in nativeID), when called: the
// committer calls it before the events that follow them, so that the
// harness's output is not held up by their writes.
func (x *oneShot) recorder(proc *process) (record func(), nativeID *atomic.Pointer[string]) {
	ctx := context.Background()
	recordedGroup := false
	nativeID = new(atomic.Pointer[string])
	return func() {
		if !recordedGroup {
			recordedGroup = true
			start := x.start
			if start.Process == "" {
				start.Process = wire.HarnessStarted
			}
			if err := x.e.store.SetRunProcess(ctx, x.l.id, store.RunProcess{PGID: proc.pgid, Marker: x.marker, Start: &start}); err != nil {
				x.log.Error("record process group", "err", err)
			}
		}
		if id := nativeID.Swap(nil); id != nil {
			if err := x.e.store.PutNativeSession(ctx, x.req.SessionID, x.req.Backend.Adapter.Name(), *id); err != nil {
				x.log.Error("record native session", "err", err)
			}
		}
	}, nativeID
}

// conclude finishes the run as it ended: with its terminal event, or as
// the driver stopped it (stopReason), or as a harness that exited before
// its turn ended. limit is the turn's deadline.
func (x *oneShot) conclude(proc *process, parser harness.Parser, ch *chunker, end *harness.Event, stopReason string, limit time.Duration) {
	e := x.e
	name := x.req.Backend.Adapter.Name()
	switch {
	// A harness that ends its turn with an error after the driver stopped
	// it reports the stop, not the error the stop caused.
	case end != nil && stopReason != wire.TypeServerError && (stopReason == "" || end.Err == nil):
		f := store.Finish{Status: store.StatusDone}
		if end.Err != nil {
			f = store.Finish{Status: store.StatusError, ErrType: end.Err.Type, ErrMessage: end.Err.Message}
		}
		x.finish(f, ch.end(*end))
		if end.Err == nil {
			// The run's goroutine is one of the engine's: Close waits
			// for the spares' start too.
			e.mu.Lock()
			admitted := e.admitted
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				x.prestartAfter(admitted)
			}()
		}
	case stopReason == wire.TypeRunCancelled:
		msg := "the run was cancelled; its process group was killed"
		x.finish(store.Finish{Status: store.StatusCancelled, ErrType: wire.TypeRunCancelled, ErrMessage: msg},
			[][]byte{errorFrame(wire.ErrorBody{Type: wire.TypeRunCancelled, Message: msg})})
	case stopReason == wire.TypeBridgeShutdown:
		x.fail(stopReason, "the bridge shut down while the run was live; its process group was killed")
	case stopReason == wire.TypeHarnessStalled:
		x.fail(stopReason, fmt.Sprintf("%s printed nothing for %s; its process group was killed", name, e.opts.IdleTimeout)+diagnosis(parser, e.secrets()))
	case stopReason == wire.TypeHarnessTimeout:
		frame := errorFrame(wire.ErrorBody{Type: stopReason, Code: wire.FinishTimeout,
			Message: fmt.Sprintf("the turn exceeded its deadline of %s; its process group was killed", limit) + diagnosis(parser, e.secrets())})
		x.finish(store.Finish{Status: store.StatusError, ErrType: stopReason, ErrMessage: "turn deadline exceeded"}, [][]byte{frame})
	case stopReason == wire.TypeServerError:
		x.fail(stopReason, "the bridge could not store the run's events")
	default:
		select { // let the last stderr bytes arrive
		case <-proc.errDone:
		case <-time.After(500 * time.Millisecond):
		}
		msg := fmt.Sprintf("%s exited (%s) before finishing the turn", name, exitStatus(proc.exitErr))
		if t := proc.stderr.String(e.secrets()); t != "" {
			msg += "; stderr: " + t
		}
		x.fail(wire.TypeHarnessError, msg)
	}
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
