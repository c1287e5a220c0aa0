// Package replicate ships a bridge's runs to the replica outside its box
// (wire.ReplicaPath at the broker the bridge reaches its model upstream
// through, presenting the box's token), as they are stored: each
// committed change marks its run (Queue.Mark, the store's OnChange), and
// the shipper sends what the replica does not hold yet. A run never waits
// for it: marks coalesce, and a replica that is slow or away only lets
// the shipper fall behind, bounded by the store (it reads the events from
// there, not from memory). A replica that does not exist (a broker
// without one, a Router reached directly) stops the shipper.
//
// Readers of the bridge's runs wait, for a short bound, for the replica
// to hold an event before they get it (Queue.Hold, the engine's
// Options.Hold): a box lost right after a reader got an event leaves no
// reader ahead of the replica, unless the replica is slower than the
// bound.
package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Queue holds the runs changed since they were last shipped, and what
// the replica acknowledged of each (Hold).
type Queue struct {
	mu    sync.Mutex
	dirty map[string]bool
	wake  chan struct{}

	shipping bool             // the replica takes batches: Hold waits
	acked    map[string]int64 // the last event the replica holds, by run
	acks     chan struct{}    // closed and replaced at each change of acked or shipping
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{dirty: map[string]bool{}, wake: make(chan struct{}, 1), acked: map[string]int64{}, acks: make(chan struct{})}
}

// maxAcked bounds the runs whose acknowledgements the queue remembers.
const maxAcked = 4096

// ack notes that the replica holds run's events through last.
func (q *Queue) ack(run string, last int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if last <= q.acked[run] {
		return
	}
	if _, ok := q.acked[run]; !ok && len(q.acked) >= maxAcked {
		clear(q.acked) // runs read live are new: they are acked again
	}
	q.acked[run] = last
	close(q.acks)
	q.acks = make(chan struct{})
}

// setShipping says whether the replica takes batches.
func (q *Queue) setShipping(on bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shipping == on {
		return
	}
	q.shipping = on
	close(q.acks)
	q.acks = make(chan struct{})
}

// Hold waits until the replica holds run's events through seq, for at
// most bound, or until ctx ends: a reader that gets an event only once
// it is outside the box never has one a later reader of the replica
// misses. It returns at once while nothing is shipped (no replica, or
// the shipper not started or stopped). It never holds a run back: the
// store takes the run's events as they come.
func (q *Queue) Hold(ctx context.Context, run string, seq int64, bound time.Duration) {
	var timer <-chan time.Time
	for {
		q.mu.Lock()
		done, acks := !q.shipping || q.acked[run] >= seq, q.acks
		q.mu.Unlock()
		if done {
			return
		}
		if timer == nil {
			t := time.NewTimer(bound)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-acks:
		case <-timer:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Mark notes that run id changed. It never blocks.
func (q *Queue) Mark(id string) {
	q.mu.Lock()
	q.dirty[id] = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.dirty) == 0
}

func (q *Queue) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.dirty))
	for id := range q.dirty {
		out = append(out, id)
	}
	clear(q.dirty)
	return out
}

// Caller sends a request of the bridge's own to the upstream (the model
// relay's Call).
type Caller func(ctx context.Context, method, path string, body []byte) (status int, answer []byte, err error)

// Options configure Run.
type Options struct {
	Store *store.Store
	Queue *Queue
	Call  Caller
	Log   *slog.Logger
	// Since: runs started this long before the shipper's start are
	// shipped too, if the replica lacks them (default 24 h).
	Since time.Duration
	// MaxBatchBytes bounds a batch's events (default 1 MiB).
	MaxBatchBytes int
	// Retry is the wait after a failed send (default 1 s).
	Retry time.Duration
	// Drain, once closed, has the shipper send what is marked and
	// return (the bridge ends: its runs' last events go out).
	Drain <-chan struct{}
}

// maxRefusals is how many refusals of the box's token in a row end the
// shipper before it ever shipped.
const maxRefusals = 8

// shipped is what the shipper knows the replica holds of a run.
type shipped struct {
	last   int64
	status string
}

// Run ships until ctx ends, or the upstream has no replica.
func Run(ctx context.Context, o Options) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Since <= 0 {
		o.Since = 24 * time.Hour
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 1 << 20
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	held := map[string]shipped{}
	// Until the first answer, a drain ends the shipper: a bridge that
	// never had an upstream (a pooled box never claimed) has nothing to
	// ship.
	ictx, icancel := context.WithCancel(ctx)
	defer icancel()
	go func() {
		select {
		case <-o.Drain:
			icancel()
		case <-ictx.Done():
		}
	}()
	refused := 0
	for {
		status, body, err := o.Call(ictx, http.MethodGet, wire.ReplicaPath, nil)
		if ictx.Err() != nil {
			return
		}
		if err == nil && status == http.StatusOK {
			var runs wire.ReplicaRuns
			if json.Unmarshal(body, &runs) == nil {
				for _, r := range runs.Runs {
					held[r.ID] = shipped{last: r.LastSeq, status: r.Status}
					o.Queue.ack(r.ID, r.LastSeq)
				}
			}
			break // a list too long to read: the replica says where to resume (409)
		}
		if err == nil && (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) {
			o.Log.Info("replica: the upstream keeps none; the box's events stay in it alone", "status", status)
			return
		}
		// A refused token may be one being rotated (a resume, a claim):
		// asked again, less and less often, and given up after
		// maxRefusals in a row (an upstream that is no broker).
		wait := o.Retry
		if err == nil && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
			if refused++; refused >= maxRefusals {
				o.Log.Info("replica: the upstream refuses the box's token; the box's events stay in it alone", "status", status)
				return
			}
			wait = min(o.Retry<<refused, time.Minute)
		}
		if !sleep(ictx, wait) {
			return
		}
	}
	icancel()
	o.Queue.setShipping(true)
	defer o.Queue.setShipping(false)
	if runs, err := o.Store.RunsSince(ctx, o.Store.Now().Add(-o.Since)); err == nil {
		for _, r := range runs {
			o.Queue.Mark(r.ID)
		}
	}
	o.Log.Debug("replica: shipping", "runs held", len(held))
	skipped := map[string]bool{} // runs the replica refused as malformed
	drain := o.Drain
	for draining := false; ; {
		failed := false
		for _, id := range o.Queue.take() {
			if skipped[id] {
				o.Queue.ack(id, math.MaxInt64) // again: the acks may have been cleared
				continue
			}
			more, err := ship(ctx, o, id, held)
			if ctx.Err() != nil {
				return
			}
			if _, bad := errors.AsType[*refusedError](err); bad {
				o.Log.Warn("replica: run not shipped further", "run", id, "err", err)
				skipped[id] = true
				o.Queue.ack(id, math.MaxInt64) // its readers wait for nothing
				continue
			}
			if err != nil {
				o.Log.Debug("replica: ship failed", "run", id, "err", err)
				failed = true
			}
			if more || err != nil {
				o.Queue.Mark(id)
			}
		}
		// While sends fail, readers are not held back for a replica that
		// does not answer.
		o.Queue.setShipping(!failed)
		if draining && (failed || o.Queue.empty()) {
			return // one pass more at the end, then the bridge goes
		}
		if failed && !sleep(ctx, o.Retry) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-o.Queue.wake:
		case <-drain:
			draining, drain = true, nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ship sends one batch of run id's events the replica lacks (or its new
// status), and reports whether more remain.
func ship(ctx context.Context, o Options, id string, held map[string]shipped) (more bool, err error) {
	r, err := o.Store.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h := held[id]
	if r.LastSeq <= h.last && r.Status == h.status {
		return false, nil
	}
	if h.last+1 < r.FirstSeq {
		return false, &refusedError{reason: fmt.Sprintf("the store trimmed its events %d to %d before they were shipped", h.last+1, r.FirstSeq-1)}
	}
	batch := wire.ReplicaBatch{SessionID: r.SessionID, Status: r.Status, First: h.last + 1, Events: []json.RawMessage{}}
	size := 0
	err = o.Store.EachEvent(ctx, id, h.last, o.MaxBatchBytes, func(seq int64, data []byte) bool {
		if seq != batch.First+int64(len(batch.Events)) {
			return false
		}
		batch.Events = append(batch.Events, json.RawMessage(append([]byte(nil), data...)))
		size += len(data)
		return size < o.MaxBatchBytes
	})
	if err != nil {
		return false, err
	}
	last := batch.First + int64(len(batch.Events)) - 1
	if last < r.LastSeq {
		batch.Status = store.StatusRunning // its end is not in this batch
	}
	body, err := json.Marshal(batch)
	if err != nil {
		return false, err
	}
	status, answer, err := o.Call(ctx, http.MethodPost, wire.ReplicaPath+"/"+id, body)
	if err != nil {
		return false, err
	}
	var out struct {
		wire.ReplicaRun
		Run *wire.ReplicaRun `json:"run"`
	}
	_ = json.Unmarshal(answer, &out)
	switch {
	case status == http.StatusOK && out.LastSeq >= last && out.ID == id:
		held[id] = shipped{last: out.LastSeq, status: out.Status}
		o.Queue.ack(id, out.LastSeq)
		return out.LastSeq < r.LastSeq, nil
	case status == http.StatusConflict && out.Run != nil:
		held[id] = shipped{last: out.Run.LastSeq, status: out.Run.Status}
		o.Queue.ack(id, out.Run.LastSeq)
		return true, nil
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		return false, &refusedError{reason: fmt.Sprintf("the replica refused a batch (%d)", status)}
	}
	return false, &statusError{status: status}
}

type statusError struct{ status int }

func (e *statusError) Error() string { return "replica answered " + http.StatusText(e.status) }

// refusedError is a run that cannot be shipped further: the replica
// refused its batch as malformed, or the store no longer holds what the
// replica lacks.
type refusedError struct{ reason string }

func (e *refusedError) Error() string { return "replica: " + e.reason }
