package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tangle-network/boxctl/bridge/store"
)

// broadcast wakes every waiter without blocking the notifier: wait returns
// a channel closed by the next notify.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// ErrEnd is returned by Reader.Next once a terminal run has no more events.
var ErrEnd = errors.New("end of run")

// ErrFellBehind is returned by Reader.Next when events the reader had not
// read yet were dropped by retention.
var ErrFellBehind = errors.New("reader fell behind the retained window")

// PageSize is the most events Reader.Next returns at once.
const PageSize = 256

// Reader follows one run's committed events from a cursor. It is used by
// one goroutine; Close detaches it.
type Reader struct {
	e     *Engine
	id    string
	after int64
	live  *liveRun
	once  sync.Once
}

// NewReader returns a reader of run id's events after cursor after. The
// caller has checked the cursor against the run's replay window.
func (e *Engine) NewReader(id string, after int64) *Reader {
	r := &Reader{e: e, id: id, after: after}
	e.stats.readers.Add(1)
	e.mu.Lock()
	r.live = e.live[id]
	e.mu.Unlock()
	if r.live != nil {
		r.live.readers.Add(1)
	}
	return r
}

// Cursor is the sequence number of the last event returned.
func (r *Reader) Cursor() int64 { return r.after }

// Next returns the next committed events, waiting for them while the run
// is live. It returns ErrEnd when the run is terminal and everything was
// read, and ctx's error when ctx ends first (the reader stays usable).
func (r *Reader) Next(ctx context.Context) ([]store.Event, error) {
	var evs []store.Event
	err := r.next(ctx, func(after, through int64) (int64, int64, error) {
		var err error
		if evs, err = r.e.store.Events(ctx, r.id, after, PageSize); err != nil || len(evs) == 0 {
			return 0, 0, err
		}
		if through > 0 {
			for len(evs) > 1 && evs[len(evs)-1].Seq > through {
				evs = evs[:len(evs)-1]
			}
		}
		return evs[0].Seq, evs[len(evs)-1].Seq, nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// NextFunc is Next for a caller that copies what it keeps: it calls fn
// with each of the next committed events, whose data is valid only during
// the call, until about maxBytes of event data (at least one event). It
// returns as Next does.
func (r *Reader) NextFunc(ctx context.Context, maxBytes int, fn func(seq int64, data []byte)) error {
	return r.next(ctx, func(after, through int64) (first, last int64, err error) {
		if r.live != nil {
			// What the run committed last is in memory: a reader that
			// keeps up does not read back what was just written.
			if first, frames, ok := r.live.recent.after(after, maxBytes); ok {
				if through > 0 && first+int64(len(frames))-1 > through {
					frames = frames[:max(through-first+1, 1)]
				}
				for i, f := range frames {
					fn(first+int64(i), f)
				}
				return first, first + int64(len(frames)) - 1, nil
			}
		}
		err = r.e.store.EachEvent(ctx, r.id, after, maxBytes, func(seq int64, data []byte) bool {
			if first == 0 {
				if first = seq; seq != after+1 {
					return false // a gap, which next reports
				}
			} else if through > 0 && seq > through {
				return false
			}
			last = seq
			fn(seq, data)
			return true
		})
		return first, last, err
	})
}

// next waits for the next committed events and reads them with read,
// which is given the cursor and the last event it may return (0: any;
// at least the one after the cursor) and returns the sequence numbers of
// the first and the last event it read (0 for none). A first event that
// does not follow the cursor is a gap retention made: ErrFellBehind.
// With Options.Hold, a live run's events are read only through the last
// one the hold waited for.
func (r *Reader) next(ctx context.Context, read func(after, through int64) (first, last int64, err error)) error {
	for {
		var wake <-chan struct{}
		var done <-chan struct{}
		terminal, known := true, false
		if r.live != nil {
			// Take the wake channel before reading, so a commit between
			// the read and the wait is not missed.
			wake, done = r.live.bc.wait(), r.live.done
			select {
			case <-done:
			default:
				terminal = false
				// Nothing was committed since the last read: wait.
				known = r.after >= r.live.last.Load()
			}
		}
		if !known {
			var through int64
			if h := r.e.opts.Hold; h != nil && r.live != nil {
				if through = r.live.last.Load(); through > r.after {
					h(ctx, r.id, through)
				}
			}
			first, last, err := read(r.after, through)
			if err != nil {
				return err
			}
			if first > 0 {
				if first != r.after+1 {
					return fmt.Errorf("run %s: events %d..%d: %w", r.id, r.after+1, first-1, ErrFellBehind)
				}
				r.after = last
				return nil
			}
			if terminal {
				return ErrEnd
			}
		}
		select {
		case <-wake:
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close detaches the reader; the run goes on.
func (r *Reader) Close() {
	r.once.Do(func() {
		r.e.stats.readers.Add(-1)
		if r.live != nil {
			r.live.readers.Add(-1)
		}
	})
}
