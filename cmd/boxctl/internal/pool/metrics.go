package pool

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// refillBuckets are the upper bounds, in seconds, of the refill latency
// histogram: a boot takes from half a second (Docker) to tens (a cold
// Kubernetes node).
var refillBuckets = []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60}

// metrics are the keeper's counters.
type metrics struct {
	claims, hits, waits, misses, failures, recycled, healed atomic.Int64

	mu      sync.Mutex
	buckets []uint64 // per refillBuckets, not cumulative
	count   uint64
	sum     float64
}

func (m *metrics) observeRefill(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buckets == nil {
		m.buckets = make([]uint64, len(refillBuckets))
	}
	s := d.Seconds()
	for i, b := range refillBuckets {
		if s <= b {
			m.buckets[i]++
			break
		}
	}
	m.count++
	m.sum += s
}

func (m *metrics) stats() Stats {
	return Stats{Claims: m.claims.Load(), Hits: m.hits.Load(), Waits: m.waits.Load(), Misses: m.misses.Load(),
		Failures: m.failures.Load(), Recycled: m.recycled.Load(), Healed: m.healed.Load()}
}

// ServeHTTP answers GET /metrics: the keeper's metrics in the Prometheus
// text format.
func (p *Pool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	s := p.Stats()
	label := poolLabel(p.o.Name)
	counter := func(name, help string, v int64) *dto.MetricFamily {
		return counterFamily(label, name, help, float64(v))
	}
	gauge := func(name, help string, v int) *dto.MetricFamily { return gaugeFamily(label, name, help, float64(v)) }
	breaker := 0
	if s.BreakerOpen {
		breaker = 1
	}
	fams := []*dto.MetricFamily{
		counter("boxctl_pool_claims_total", "Claims of the pool.", s.Claims),
		counter("boxctl_pool_hits_total", "Claims served by a box that waited.", s.Hits),
		counter("boxctl_pool_waits_total", "Claims that waited for a box.", s.Waits),
		counter("boxctl_pool_misses_total", "Claims that created a box cold.", s.Misses),
		counter("boxctl_pool_boot_failures_total", "Standby boxes that failed to boot.", s.Failures),
		counter("boxctl_pool_recycled_total", "Boxes recycled past the pool's maximum age.", s.Recycled),
		counter("boxctl_pool_healed_total", "Boxes replaced because they vanished or stopped answering.", s.Healed),
		gauge("boxctl_pool_size", "Boxes the pool keeps.", s.Size),
		gauge("boxctl_pool_ready", "Boxes waiting to be claimed.", s.Ready),
		gauge("boxctl_pool_booting", "Boxes being booted.", s.Booting),
		gauge("boxctl_pool_waiting_claims", "Claims waiting for a box.", s.Waiting),
		gauge("boxctl_pool_breaker_open", "1 while boots are paused after failures.", breaker),
		p.m.refillFamily(label),
	}
	writeFamilies(w, fams)
}

func poolLabel(name string) []*dto.LabelPair {
	return []*dto.LabelPair{{Name: ptr("pool"), Value: ptr(name)}}
}

func counterFamily(label []*dto.LabelPair, name, help string, v float64) *dto.MetricFamily {
	return &dto.MetricFamily{Name: ptr(name), Help: ptr(help), Type: dto.MetricType_COUNTER.Enum(),
		Metric: []*dto.Metric{{Label: label, Counter: &dto.Counter{Value: ptr(v)}}}}
}

func gaugeFamily(label []*dto.LabelPair, name, help string, v float64) *dto.MetricFamily {
	return &dto.MetricFamily{Name: ptr(name), Help: ptr(help), Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{Label: label, Gauge: &dto.Gauge{Value: ptr(v)}}}}
}

// writeFamilies answers with fams in the Prometheus text format.
func writeFamilies(w http.ResponseWriter, fams []*dto.MetricFamily) {
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return
		}
	}
}

// VendorStats are the figures of a pool its vendor keeps full (a
// Kubernetes SandboxWarmPool, which agent-sandbox refills and claims
// from): what its keeper sees of it.
type VendorStats struct {
	// Size is the boxes the pool keeps; Idle those unclaimed, Ready
	// those of them that are ready.
	Size, Idle, Ready int
	// Recycled counts the boxes the keeper recycled past the maximum age.
	Recycled int64
	// Oldest is when the oldest idle box was made (zero: none).
	Oldest time.Time
}

// VendorMetrics answers GET /metrics with the stats of a pool its vendor
// keeps, read at each request, in the Prometheus text format: the names
// of a keeper's own metrics where they mean the same, and the age of the
// oldest idle box. Claims and refills are the vendor's to count.
func VendorMetrics(name string, stats func() VendorStats) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		s, label := stats(), poolLabel(name)
		age := 0.0
		if !s.Oldest.IsZero() {
			age = time.Since(s.Oldest).Seconds()
		}
		writeFamilies(w, []*dto.MetricFamily{
			counterFamily(label, "boxctl_pool_recycled_total", "Boxes recycled past the pool's maximum age.", float64(s.Recycled)),
			gaugeFamily(label, "boxctl_pool_size", "Boxes the pool keeps.", float64(s.Size)),
			gaugeFamily(label, "boxctl_pool_idle", "Boxes not claimed yet, ready or not.", float64(s.Idle)),
			gaugeFamily(label, "boxctl_pool_ready", "Boxes waiting to be claimed.", float64(s.Ready)),
			gaugeFamily(label, "boxctl_pool_oldest_idle_seconds", "Age of the oldest box not claimed yet.", age),
		})
	})
}

// ServeMetrics serves h on addr until stop is called.
func ServeMetrics(addr string, h http.Handler) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return func() { _ = srv.Close() }, nil
}

func (m *metrics) refillFamily(label []*dto.LabelPair) *dto.MetricFamily {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := &dto.Histogram{SampleCount: ptr(m.count), SampleSum: ptr(m.sum)}
	var cum uint64
	for i, b := range refillBuckets {
		if m.buckets != nil {
			cum += m.buckets[i]
		}
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: ptr(b), CumulativeCount: ptr(cum)})
	}
	return &dto.MetricFamily{Name: ptr("boxctl_pool_refill_seconds"), Help: ptr("Time from a boot's start to its box waiting in the pool."),
		Type: dto.MetricType_HISTOGRAM.Enum(), Metric: []*dto.Metric{{Label: label, Histogram: h}}}
}

func ptr[T any](v T) *T { return &v }
