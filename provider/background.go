package provider

import (
	"context"
	"sync"
)

// background is the work a Provider runs past the callers that started
// it: a cancellation whose caller stopped waiting (its ctx ended, or it
// gave up after its own bound) still runs to the bridge's confirmation,
// a capability discovery other callers share outlives the first one, and
// the Timeout of a dispatched turn is enforced after Dispatch returned.
// Provider.Close marks it closed and waits for it.
//
// A counter under a mutex, rather than a sync.WaitGroup, because work may
// start while Close waits (a stream left during Close cancels its run),
// which a WaitGroup forbids once its counter reached zero.
type background struct {
	mu     sync.Mutex
	closed bool
	stop   chan struct{} // closed by close: watchers stop waiting
	n      int           // work started and not yet done
	idle   chan struct{} // closed when n drops to zero; nil while nobody waits
}

func newBackground() *background { return &background{stop: make(chan struct{})} }

// run starts f in a goroutine the Provider owns.
func (b *background) run(f func()) {
	b.add()
	go func() {
		defer b.done()
		f()
	}()
}

// add counts work that runs in a goroutine someone else started; done
// must follow.
func (b *background) add() {
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
}

func (b *background) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n--
	if b.n == 0 && b.idle != nil {
		close(b.idle)
		b.idle = nil
	}
}

// close marks the Provider closed and stops the watchers; it is
// idempotent.
func (b *background) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
}

func (b *background) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// wait returns when no work is left, or with ctx's cause when ctx ends
// first (the work goes on, each piece within its own bound).
func (b *background) wait(ctx context.Context) error {
	b.mu.Lock()
	if b.n == 0 {
		b.mu.Unlock()
		return nil
	}
	if b.idle == nil {
		b.idle = make(chan struct{})
	}
	idle := b.idle
	b.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
