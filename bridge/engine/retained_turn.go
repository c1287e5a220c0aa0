package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// retainedTurn is what one retained turn keeps whichever process serves
// it (a fresh one in executeRetained, the session's long-lived one in
// executePersistent): its canonical framer, the frames not yet stored, and
// the one way it ends. Only the turn's own goroutine uses it.
type retainedTurn struct {
	e       *Engine
	ctx     context.Context
	log     *slog.Logger
	l       *liveRun
	rr      *retainedRun
	c       *canonical
	run     store.Run
	req     TurnRequest
	pending [][]byte
	// questions counts the turn's questions; end is its terminal event.
	questions int
	end       *harness.Event
	// prep is the turn's confinement (nil: none), set by start.
	prep *jail.Prepared
	// conv drives the turn's process for a harness.Conversant adapter.
	conv harness.Conversation
	// held is text (or reasoning, heldKind) the harness streamed that is
	// not framed yet: the deltas of one batch of output lines go out as one
	// part update (flushText).
	held     strings.Builder
	heldKind harness.EventKind
}

func (e *Engine) newRetainedTurn(l *liveRun, rr *retainedRun, req TurnRequest, run store.Run) *retainedTurn {
	return &retainedTurn{
		e: e, run: run, req: req,
		ctx: context.Background(), // the run outlives the request that admitted it
		log: e.log.With("run", l.id, "session", l.sessionID),
		l:   l, rr: rr,
		c: newCanonical(l.id, l.sessionID, req.Backend.Adapter.Name(), 0),
	}
}

// finish stores the pending frames, an interaction.cancel for every
// question still open, and last's frames as the run's end, then releases
// the run and wakes its readers.
func (t *retainedTurn) finish(f store.Finish, last func() [][]byte) {
	e, l := t.e, t.l
	t.flushText()
	open, err := e.closeInteractions(t.ctx, l.id, t.rr, f.ErrType == wire.TypeBridgeShutdown)
	if err != nil {
		t.log.Error("close interactions", "err", err)
	}
	frames := append([][]byte(nil), t.pending...)
	for _, it := range open {
		frames = append(frames, t.c.frame(interactionCancelEvent{Type: "interaction.cancel", ID: it.ID, Reason: f.ErrType}))
	}
	frames = append(frames, last()...)
	if r, err := e.store.Finish(t.ctx, l.id, f, frames); err != nil {
		t.log.Error("finish run", "err", err)
	} else {
		l.advance(r.LastSeq) // the run's last events, for its readers' hold
	}
	e.ret.mu.Lock()
	delete(e.ret.runs, l.id)
	e.ret.mu.Unlock()
	e.mu.Lock()
	delete(e.live, l.id)
	e.mu.Unlock()
	l.endTrace(string(f.Status), f.ErrType)
	close(l.done)
	l.bc.notify()
	e.NotifySession(l.sessionID)
}

// fail ends the run with a terminal status event: cancelled for
// status "cancelled", an error otherwise.
func (t *retainedTurn) fail(status, typ, msg string) {
	f := store.Finish{Status: store.StatusError, ErrType: typ, ErrMessage: msg}
	if status == "cancelled" {
		f.Status = store.StatusCancelled
	}
	t.finish(f, func() [][]byte { return [][]byte{t.c.status(status, typ+": "+msg)} })
}

// commit stores the pending frames and wakes the readers; false means the
// store refused them (the framer's sequence is resynchronised).
func (t *retainedTurn) commit() bool {
	if len(t.pending) == 0 {
		return true
	}
	last, err := t.e.store.Append(t.ctx, t.l.id, t.pending)
	t.pending = nil
	if err != nil {
		t.log.Error("append events", "err", err)
		t.resync()
		return false
	}
	t.c.seq = last
	t.l.committed(last)
	return true
}

// resync numbers the framer's next frame after the run's last stored
// event, once the store refused frames the framer had numbered.
func (t *retainedTurn) resync() {
	if r, err := t.e.store.GetRun(t.ctx, t.l.id); err == nil {
		t.c.seq = r.LastSeq
	}
}

// start queues the started status and returns the harness turn: the
// prompt as one user message, the session's native id and state directory.
// It fails the run and returns false when either cannot be had.
func (t *retainedTurn) start(req TurnRequest) (harness.Turn, bool) {
	e, l := t.e, t.l
	t.pending = append(t.pending, t.c.status("started", ""))
	b := req.Backend
	name := b.Adapter.Name()
	native, err := e.store.NativeSession(t.ctx, l.sessionID, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.fail("failed", wire.TypeServerError, "look up session: "+err.Error())
		return harness.Turn{}, false
	}
	stateDir, err := e.sessionDir(name, l.sessionID)
	if err != nil {
		t.fail("failed", wire.TypeServerError, err.Error())
		return harness.Turn{}, false
	}
	turn := harness.Turn{
		RunID: l.id, Bin: b.Bin, Model: req.Model, Messages: append(slices.Clone(req.History), wire.Message{Role: "user", Content: wire.MustJSON(req.Prompt)}),
		NativeSessionID: native, Cwd: req.Cwd, StateDir: stateDir, Environ: e.environ(), Env: req.Env,
		RouterURL: e.opts.RouterURL, RouterKey: e.opts.RouterKey,
	}
	if t.prep, err = e.confine(req.Confine, &turn); err != nil {
		t.fail("failed", JailErrorType(err), err.Error())
		return harness.Turn{}, false
	}
	return turn, true
}

// handle turns one line of the harness's output into queued frames: a
// question becomes an interaction, a native session id is recorded for
// the next turn's resume, and the first end event is kept. Text and
// reasoning deltas are held until flushText, so that what arrives in one
// batch of lines is one part update rather than one per delta (each
// update repeats the part's whole text so far).
func (t *retainedTurn) handle(line []byte, parser harness.Parser) {
	if t.conv != nil {
		reply, forTurn := t.conv.Reply(line)
		if len(reply) > 0 {
			if err := t.rr.write(reply); err != nil {
				t.log.Error("write reply", "err", err)
			}
		}
		if !forTurn {
			return
		}
	}
	if q, ok := t.rr.adapter.ParseQuestion(line); ok {
		t.flushText()
		t.questions++
		t.pending = append(t.pending, t.e.question(t.ctx, t.l, t.rr, t.req, t.run, q, t.questions, t.c)...)
		return
	}
	for _, ev := range parser.Line(line) {
		switch ev.Kind {
		case harness.KindText, harness.KindReasoning:
			if ev.Kind != t.heldKind {
				t.flushText()
				t.heldKind = ev.Kind
			}
			t.held.WriteString(ev.Text)
		case harness.KindSession:
			if err := t.e.store.PutNativeSession(t.ctx, t.l.sessionID, t.req.Backend.Adapter.Name(), ev.NativeSessionID); err != nil {
				t.log.Error("record native session", "err", err)
			}
		case harness.KindEnd:
			t.flushText()
			if t.end == nil {
				t.end = &ev
			}
		default:
			t.flushText()
			t.pending = append(t.pending, t.c.events(ev)...)
		}
	}
}

// flushText frames the held text as one part update.
func (t *retainedTurn) flushText() {
	if t.held.Len() == 0 {
		return
	}
	t.pending = append(t.pending, t.c.events(harness.Event{Kind: t.heldKind, Text: t.held.String()})...)
	t.held.Reset()
}

// attach points the turn's answers at proc's stdin.
func (t *retainedTurn) attach(proc *process) {
	t.rr.mu.Lock()
	t.rr.write = proc.writeStdin
	t.rr.mu.Unlock()
}

// driver returns the driver of the turn's output from proc.
func (t *retainedTurn) driver(proc *process, parser harness.Parser, idle, deadline *time.Timer, cancel <-chan struct{}) *driver {
	return &driver{e: t.e, l: t.l, log: t.log, proc: proc, idle: idle, deadline: deadline, cancel: cancel,
		ended: func() bool { return t.end != nil },
		handle: func(line []byte) [][]byte {
			t.handle(line, parser)
			out := t.pending
			t.pending = nil
			return out
		},
		flush: func() [][]byte {
			t.flushText()
			out := t.pending
			t.pending = nil
			return out
		}}
}

// conclude ends the run after its driver returned: with the harness's
// terminal event when the turn reached it (unless the store failed, or a
// cancel made the harness end it with an error), otherwise with the
// reason the driver stopped it, or the process's exit.
func (t *retainedTurn) conclude(d *driver, parser harness.Parser, limit time.Duration) {
	e, proc, end := t.e, d.proc, t.end
	name := t.req.Backend.Adapter.Name()
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
	switch reason := d.stopReason; {
	case end != nil && reason != wire.TypeServerError && (reason == "" || end.Err == nil):
		f := store.Finish{Status: store.StatusDone}
		if end.Err != nil {
			f = store.Finish{Status: store.StatusError, ErrType: end.Err.Type, ErrMessage: end.Err.Message}
		}
		t.finish(f, func() [][]byte { return t.c.end(*end) })
	case reason == wire.TypeRunCancelled && d.interrupted && !d.killed:
		t.fail("cancelled", wire.TypeRunCancelled, "the run was cancelled; "+name+" interrupted its turn")
	case reason == wire.TypeRunCancelled:
		t.fail("cancelled", wire.TypeRunCancelled, "the run was cancelled; its process group was killed")
	case reason == wire.TypeBridgeShutdown:
		t.fail("failed", reason, "the bridge shut down while the run was live; its process group was killed")
	case reason == wire.TypeHarnessStalled:
		t.fail("failed", reason, fmt.Sprintf("%s printed nothing for %s; its process group was killed", name, e.opts.IdleTimeout)+diagnosis(parser, e.secrets()))
	case reason == wire.TypeHarnessTimeout:
		t.fail("failed", reason, fmt.Sprintf("the turn exceeded its deadline of %s; its process group was killed", limit)+diagnosis(parser, e.secrets()))
	case reason == wire.TypeServerError:
		// The framer numbered frames the store did not take.
		t.pending = nil
		t.resync()
		t.fail("failed", reason, "the bridge could not store the run's events")
	default:
		msg := fmt.Sprintf("%s exited (%s) before finishing the turn", name, exitStatus(exitErr))
		if s := proc.stderr.String(e.secrets()); s != "" {
			msg += "; stderr: " + s
		}
		t.fail("failed", wire.TypeHarnessError, msg)
	}
}
