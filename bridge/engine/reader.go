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
	for {
		var wake <-chan struct{}
		var done <-chan struct{}
		terminal := true
		if r.live != nil {
			// Take the wake channel before reading, so a commit between
			// the read and the wait is not missed.
			wake, done = r.live.bc.wait(), r.live.done
			select {
			case <-done:
			default:
				terminal = false
			}
		}
		evs, err := r.e.store.Events(ctx, r.id, r.after, PageSize)
		if err != nil {
			return nil, err
		}
		if len(evs) > 0 {
			if evs[0].Seq != r.after+1 {
				return nil, fmt.Errorf("run %s: events %d..%d: %w", r.id, r.after+1, evs[0].Seq-1, ErrFellBehind)
			}
			r.after = evs[len(evs)-1].Seq
			return evs, nil
		}
		if terminal {
			return nil, ErrEnd
		}
		select {
		case <-wake:
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
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
