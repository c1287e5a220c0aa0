package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Stats are the store's figures since Open, for monitoring.
type Stats struct {
	// EventsAppended counts the events committed (Append, Finish).
	EventsAppended int64
	// Write is the latency of write transactions, the wait for the
	// single writer included; Read is the latency of event reads
	// (Events).
	Write, Read Latency
}

// LatencyBounds are the upper bounds of the Latency buckets.
var LatencyBounds = [...]time.Duration{
	500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
}

// Latency is a histogram of durations.
type Latency struct {
	// Buckets[i] counts the observations no longer than LatencyBounds[i]
	// (cumulative, as Prometheus buckets are); Count counts them all.
	Buckets []uint64
	Count   uint64
	Sum     time.Duration
}

// histogram records a Latency. The zero value is ready to use; it is
// safe for concurrent use.
type histogram struct {
	buckets [len(LatencyBounds) + 1]atomic.Uint64 // per bound, then one for longer ones
	sum     atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(int64(d))
}

// since observes the time since start.
func (h *histogram) since(start time.Time) { h.observe(time.Since(start)) }

func (h *histogram) snapshot() Latency {
	l := Latency{Buckets: make([]uint64, len(LatencyBounds)), Sum: time.Duration(h.sum.Load())}
	for i := range h.buckets {
		l.Count += h.buckets[i].Load()
		if i < len(LatencyBounds) {
			l.Buckets[i] = l.Count
		}
	}
	return l
}

// stats are the counters behind Stats.
type stats struct {
	events      atomic.Int64
	write, read histogram
}

// Stats returns the store's figures.
func (s *Store) Stats() Stats {
	return Stats{EventsAppended: s.stats.events.Load(), Write: s.stats.write.snapshot(), Read: s.stats.read.snapshot()}
}

// RunCounts counts the runs the store holds by status (StatusRunning,
// StatusDone, ...). A run is held until its identity expires.
func (s *Store) RunCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, COUNT(*) FROM runs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("count runs: %w", err)
		}
		out[status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	return out, nil
}
