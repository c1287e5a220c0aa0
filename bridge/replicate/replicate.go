// Package replicate ships a bridge's runs to the replica outside its box
// (wire.ReplicaPath at the broker the bridge reaches its model upstream
// through, presenting the box's token), as they are stored: each
// committed change marks its run (Queue.Mark, the store's OnChange), and
// the shipper sends what the replica does not hold yet. A run never waits
// for it: marks coalesce, and a replica that is slow or away only lets
// the shipper fall behind, bounded by the store (it reads the events from
// there, not from memory). A replica that does not exist (a broker
// without one, a Router reached directly) stops the shipper.
package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Queue holds the runs changed since they were last shipped.
type Queue struct {
	mu    sync.Mutex
	dirty map[string]bool
	wake  chan struct{}
}

// NewQueue returns an empty queue.
func NewQueue() *Queue { return &Queue{dirty: map[string]bool{}, wake: make(chan struct{}, 1)} }

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
}

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
	for {
		status, body, err := o.Call(ctx, http.MethodGet, wire.ReplicaPath, nil)
		if ctx.Err() != nil {
			return
		}
		if err == nil && status == http.StatusOK {
			var runs wire.ReplicaRuns
			if err := json.Unmarshal(body, &runs); err == nil {
				for _, r := range runs.Runs {
					held[r.ID] = shipped{last: r.LastSeq, status: r.Status}
				}
				break
			}
		}
		if err == nil && status >= 400 && status < 500 && status != http.StatusTooManyRequests {
			o.Log.Info("replica: the upstream keeps none; the box's events stay in it alone", "status", status)
			return
		}
		if !sleep(ctx, o.Retry) {
			return
		}
	}
	if runs, err := o.Store.RunsSince(ctx, o.Store.Now().Add(-o.Since)); err == nil {
		for _, r := range runs {
			o.Queue.Mark(r.ID)
		}
	}
	o.Log.Debug("replica: shipping", "runs held", len(held))
	for {
		failed := false
		for _, id := range o.Queue.take() {
			more, err := ship(ctx, o, id, held)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				o.Log.Debug("replica: ship failed", "run", id, "err", err)
				failed = true
			}
			if more || err != nil {
				o.Queue.Mark(id)
			}
		}
		if failed && !sleep(ctx, o.Retry) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-o.Queue.wake:
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

// errGone is a run whose events before the replica's next one the store
// no longer holds (it trimmed them first): it is not shipped further.
var errGone = errors.New("the store trimmed the run's events before they were shipped")

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
		o.Log.Warn("replica: run not shipped whole", "run", id, "replica has", h.last, "store from", r.FirstSeq)
		held[id] = shipped{last: r.LastSeq, status: r.Status}
		return false, errGone
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
	case status == http.StatusOK:
		held[id] = shipped{last: out.LastSeq, status: out.Status}
		return out.LastSeq < r.LastSeq, nil
	case status == http.StatusConflict && out.Run != nil:
		held[id] = shipped{last: out.Run.LastSeq, status: out.Run.Status}
		return true, nil
	}
	return false, &statusError{status: status}
}

type statusError struct{ status int }

func (e *statusError) Error() string { return "replica answered " + http.StatusText(e.status) }
