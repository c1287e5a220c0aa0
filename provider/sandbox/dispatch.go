package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
)

// runWatch follows a dispatched run to its end, then reports the turn
// ended (EventTurnEnded) with what the broker measured the box spend
// since the dispatch: the usage of that run alone, as the bridge admits
// one live run per box.
type runWatch struct {
	e       *Environment
	runID   string
	before  broker.Usage
	metered bool
	cancel  context.CancelFunc
	once    sync.Once
}

// watchStatusEvery is how often a watch whose stream failed asks the
// run's status instead; watchStatusTries bounds the failed asks in a row
// before the run's end is reported as unknown.
const (
	watchStatusEvery = 2 * time.Second
	watchStatusTries = 15
)

// watchRun starts the watch of the run ref dispatched, the box's usage
// before it being before (metered: the broker answered). Close and
// Destroy end the watch; the run goes on in the box, and its end is then
// reported by nobody here. The event is emitted on the watch's own
// goroutine (Options.OnEvent).
func (e *Environment) watchRun(ref provider.Reference, before broker.Usage, metered bool) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &runWatch{e: e, runID: ref.ControlRef.RunID, before: before, metered: metered, cancel: cancel}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		cancel()
		return
	}
	prev := e.watch
	e.watch = w
	e.mu.Unlock()
	if prev != nil {
		prev.cancel()
	}
	go func() {
		defer cancel()
		s, err := e.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
		if err != nil {
			return
		}
		res, err := s.Result(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			w.end(ctx, res.Status)
			return
		}
		// The stream failed (a dropped connection, a restarted bridge):
		// the run's status says when it ends.
		e.p.o.Logger.Debug("dispatched run: its stream failed; asking its status", "box", e.box.ID(), "run", w.runID, "err", err)
		failed := 0
		for failed < watchStatusTries {
			st, err := s.Status(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				if reason := e.lostReason(ctx); reason != "" {
					e.noteLost(ctx, reason)
					w.end(ctx, "lost")
					return
				}
				failed++
			case st.Terminal:
				w.end(ctx, st.Status)
				return
			default:
				failed = 0
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(watchStatusEvery):
			}
		}
		w.end(ctx, "unknown")
	}()
}

// watchUsageTimeout bounds the reading of the box's usage at a run's end.
const watchUsageTimeout = 5 * time.Second

// end reads the box's usage and reports the run's end, once; the event
// is emitted outside the once, so that a handler may call back into the
// environment.
func (w *runWatch) end(ctx context.Context, outcome string) {
	var ev *Event
	w.once.Do(func() {
		e := Event{Type: EventTurnEnded, BoxID: w.e.box.ID(), RunTag: w.e.ref.RunTag, RunID: w.runID, Reason: outcome}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), watchUsageTimeout)
		defer cancel()
		if after, ok := w.e.p.boxUsage(uctx, w.e.box.ID()); ok && w.metered {
			e.Usage = usageSince(w.before, after)
		}
		ev = &e
	})
	if ev != nil {
		w.e.p.emit(*ev)
	}
}

// settleWatch reports the end of the last dispatched run, known terminal
// (status), before the next turn starts: that turn's spend is never
// counted to it.
func (e *Environment) settleWatch(ctx context.Context, status string) {
	e.mu.Lock()
	w := e.watch
	e.mu.Unlock()
	if w != nil {
		w.end(ctx, status)
	}
}

// endRunWatch ends the watch of a dispatched run, if one runs, and any
// later one (the environment is closing). It does not wait for it.
func (e *Environment) endRunWatch() {
	e.mu.Lock()
	w := e.watch
	e.watch, e.closed = nil, true
	e.mu.Unlock()
	if w != nil {
		w.cancel()
	}
}
