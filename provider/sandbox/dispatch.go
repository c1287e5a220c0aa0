package sandbox

import (
	"context"
	"sync"

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
	done    chan struct{}
}

// watchRun starts the watch of the run ref dispatched, the box's usage
// before it being before (metered: the broker answered). Close, Destroy
// and Suspend end the watch; the run goes on in the box, and its end is
// then reported by nobody here.
func (e *Environment) watchRun(ref provider.Reference, before broker.Usage, metered bool) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &runWatch{e: e, runID: ref.ControlRef.RunID, before: before, metered: metered, cancel: cancel, done: make(chan struct{})}
	e.mu.Lock()
	prev := e.watch
	e.watch = w
	e.mu.Unlock()
	if prev != nil {
		prev.stop()
	}
	go func() {
		defer close(w.done)
		defer cancel()
		s, err := e.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
		if err != nil {
			return
		}
		res, err := s.Result(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			e.p.o.Logger.Debug("dispatched run: its end was not read", "box", e.box.ID(), "run", w.runID, "err", err)
			w.end(ctx, "error")
		default:
			w.end(ctx, res.Status)
		}
	}()
}

// end reads the box's usage and reports the run's end, once.
func (w *runWatch) end(ctx context.Context, outcome string) {
	w.once.Do(func() {
		ev := Event{Type: EventTurnEnded, BoxID: w.e.box.ID(), RunTag: w.e.ref.RunTag, RunID: w.runID, Reason: outcome}
		if after, ok := w.e.p.boxUsage(context.WithoutCancel(ctx), w.e.box.ID()); ok && w.metered {
			ev.Usage = usageSince(w.before, after)
		}
		w.e.p.emit(ev)
	})
}

// stop ends the watch and waits for it.
func (w *runWatch) stop() {
	w.cancel()
	<-w.done
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

// endRunWatch ends the watch of a dispatched run, if one runs.
func (e *Environment) endRunWatch() {
	e.mu.Lock()
	w := e.watch
	e.watch = nil
	e.mu.Unlock()
	if w != nil {
		w.stop()
	}
}
