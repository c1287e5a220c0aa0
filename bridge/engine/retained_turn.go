package engine

import (
	"context"
	"errors"
	"log/slog"

	"github.com/tangle-network/boxctl/bridge/harness"
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
	pending [][]byte
}

func (e *Engine) newRetainedTurn(l *liveRun, rr *retainedRun, req TurnRequest) *retainedTurn {
	return &retainedTurn{
		e:   e,
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
	open, err := e.closeInteractions(t.ctx, l.id, t.rr)
	if err != nil {
		t.log.Error("close interactions", "err", err)
	}
	frames := append([][]byte(nil), t.pending...)
	for _, it := range open {
		frames = append(frames, t.c.frame(interactionCancelEvent{Type: "interaction.cancel", ID: it.ID, Reason: f.ErrType}))
	}
	frames = append(frames, last()...)
	if _, err := e.store.Finish(t.ctx, l.id, f, frames); err != nil {
		t.log.Error("finish run", "err", err)
	}
	e.ret.mu.Lock()
	delete(e.ret.runs, l.id)
	e.ret.mu.Unlock()
	e.mu.Lock()
	delete(e.live, l.id)
	e.mu.Unlock()
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
		if r, gerr := t.e.store.GetRun(t.ctx, t.l.id); gerr == nil {
			t.c.seq = r.LastSeq
		}
		return false
	}
	t.c.seq = last
	t.l.bc.notify()
	return true
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
	return harness.Turn{
		RunID: l.id, Bin: b.Bin, Model: req.Model, Messages: []wire.Message{{Role: "user", Content: mustJSON(req.Prompt)}},
		NativeSessionID: native, Cwd: req.Cwd, StateDir: stateDir, Environ: e.opts.Environ, Env: req.Env,
		RouterURL: e.opts.RouterURL, RouterKey: e.opts.RouterKey,
	}, true
}

// handle turns one line of the harness's output into queued frames: a
// question becomes an interaction (numbered through *questions), a native
// session id is recorded for the next turn's resume, and the first end
// event is kept in *end.
func (t *retainedTurn) handle(line []byte, parser harness.Parser, req TurnRequest, run store.Run, questions *int, end **harness.Event) {
	if q, ok := t.rr.adapter.ParseQuestion(line); ok {
		*questions++
		t.pending = append(t.pending, t.e.question(t.ctx, t.l, t.rr, req, run, q, *questions, t.c)...)
		return
	}
	for _, ev := range parser.Line(line) {
		switch ev.Kind {
		case harness.KindSession:
			if err := t.e.store.PutNativeSession(t.ctx, t.l.sessionID, req.Backend.Adapter.Name(), ev.NativeSessionID); err != nil {
				t.log.Error("record native session", "err", err)
			}
		case harness.KindEnd:
			if *end == nil {
				*end = &ev
			}
		default:
			t.pending = append(t.pending, t.c.events(ev)...)
		}
	}
}
