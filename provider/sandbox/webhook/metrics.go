package webhook

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Stats are a Sender's counts since Open, and what its outbox holds for
// its endpoints now.
type Stats struct {
	// Attempts is the attempts made; Retries those that were not a
	// delivery's first; Failures those that failed.
	Attempts, Retries, Failures int64
	// Delivered is the deliveries a 2xx answer ended.
	Delivered int64
	// Abandoned is the deliveries given up past MaxAge.
	Abandoned int64
	// Pending is the deliveries waiting in the outbox (in flight or not).
	Pending int
	// OldestPending is when the oldest pending event was recorded (zero:
	// none).
	OldestPending time.Time
}

// Stats returns the Sender's counts and what its outbox holds.
func (s *Sender) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Attempts: s.attempts.Load(), Retries: s.retries.Load(), Failures: s.failures.Load(),
		Delivered: s.delivered.Load(), Abandoned: s.abandoned.Load()}
	eps, err := s.box.states(ctx, s.urls)
	if err != nil {
		return st, fmt.Errorf("webhook outbox: %w", err)
	}
	for _, e := range eps {
		st.Pending += e.Pending
		if !e.OldestPending.IsZero() && (st.OldestPending.IsZero() || e.OldestPending.Before(st.OldestPending)) {
			st.OldestPending = e.OldestPending
		}
	}
	return st, nil
}

// metric is one of the Sender's metrics. Each name is written here only.
type metric struct {
	name, help string
	counter    bool
	get        func(Stats) float64
}

var metrics = []metric{
	{"boxctl_webhook_attempts_total", "Delivery attempts made.", true, func(s Stats) float64 { return float64(s.Attempts) }},
	{"boxctl_webhook_retries_total", "Attempts that were not a delivery's first.", true, func(s Stats) float64 { return float64(s.Retries) }},
	{"boxctl_webhook_failed_attempts_total", "Attempts that got no 2xx answer.", true, func(s Stats) float64 { return float64(s.Failures) }},
	{"boxctl_webhook_delivered_total", "Events delivered (a 2xx answer).", true, func(s Stats) float64 { return float64(s.Delivered) }},
	{"boxctl_webhook_abandoned_total", "Deliveries given up past their maximum age.", true, func(s Stats) float64 { return float64(s.Abandoned) }},
	{"boxctl_webhook_pending", "Deliveries waiting in the outbox.", false, func(s Stats) float64 { return float64(s.Pending) }},
	{"boxctl_webhook_oldest_pending_seconds", "Age of the oldest pending delivery's event.", false, func(s Stats) float64 {
		if s.OldestPending.IsZero() {
			return 0
		}
		return time.Since(s.OldestPending).Seconds()
	}},
}

// Metrics answers GET /metrics with the Sender's Stats in the Prometheus
// text format, read at each request.
func (s *Sender) Metrics() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		st, err := s.Stats(r.Context())
		if err != nil {
			http.Error(w, "webhook outbox unreadable", http.StatusServiceUnavailable)
			return
		}
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, m := range metrics {
			v := m.get(st)
			f := &dto.MetricFamily{Name: new(m.name), Help: new(m.help)}
			if m.counter {
				f.Type = dto.MetricType_COUNTER.Enum()
				f.Metric = []*dto.Metric{{Counter: &dto.Counter{Value: &v}}}
			} else {
				f.Type = dto.MetricType_GAUGE.Enum()
				f.Metric = []*dto.Metric{{Gauge: &dto.Gauge{Value: &v}}}
			}
			if err := enc.Encode(f); err != nil {
				return
			}
		}
	})
}
