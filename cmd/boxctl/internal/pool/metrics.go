package pool

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metric is one of a keeper's metrics: how a Stats gives its value and
// takes it back from a scrape. Each name is written here only.
type metric struct {
	name, help string
	counter    bool
	// keeperOnly marks what this machine's keeper counts and a vendor
	// counts itself for a pool of its own.
	keeperOnly bool
	get        func(Stats) float64
	set        func(*Stats, float64)
}

func since(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return time.Since(t).Seconds()
}

var metrics = []metric{
	{"boxctl_pool_claims_total", "Claims of the pool.", true, true,
		func(s Stats) float64 { return float64(s.Claims) }, func(s *Stats, v float64) { s.Claims = int64(v) }},
	{"boxctl_pool_hits_total", "Claims served by a box that waited.", true, true,
		func(s Stats) float64 { return float64(s.Hits) }, func(s *Stats, v float64) { s.Hits = int64(v) }},
	{"boxctl_pool_waits_total", "Claims that waited for a box.", true, true,
		func(s Stats) float64 { return float64(s.Waits) }, func(s *Stats, v float64) { s.Waits = int64(v) }},
	{"boxctl_pool_misses_total", "Claims that created a box cold.", true, true,
		func(s Stats) float64 { return float64(s.Misses) }, func(s *Stats, v float64) { s.Misses = int64(v) }},
	{"boxctl_pool_boot_failures_total", "Standby boxes that failed to boot.", true, true,
		func(s Stats) float64 { return float64(s.Failures) }, func(s *Stats, v float64) { s.Failures = int64(v) }},
	{"boxctl_pool_recycled_total", "Boxes recycled past the pool's maximum age.", true, false,
		func(s Stats) float64 { return float64(s.Recycled) }, func(s *Stats, v float64) { s.Recycled = int64(v) }},
	{"boxctl_pool_healed_total", "Boxes replaced because they vanished or stopped answering.", true, true,
		func(s Stats) float64 { return float64(s.Healed) }, func(s *Stats, v float64) { s.Healed = int64(v) }},
	{"boxctl_pool_size", "Boxes the pool keeps.", false, false,
		func(s Stats) float64 { return float64(s.Size) }, func(s *Stats, v float64) { s.Size = int(v) }},
	{"boxctl_pool_ready", "Boxes waiting to be claimed.", false, false,
		func(s Stats) float64 { return float64(s.Ready) }, func(s *Stats, v float64) { s.Ready = int(v) }},
	{"boxctl_pool_idle", "Boxes not claimed yet, ready or not.", false, false,
		func(s Stats) float64 { return float64(max(s.Idle, s.Ready)) }, func(s *Stats, v float64) { s.Idle = int(v) }},
	{"boxctl_pool_booting", "Boxes being booted.", false, true,
		func(s Stats) float64 { return float64(s.Booting) }, func(s *Stats, v float64) { s.Booting = int(v) }},
	{"boxctl_pool_waiting_claims", "Claims waiting for a box.", false, true,
		func(s Stats) float64 { return float64(s.Waiting) }, func(s *Stats, v float64) { s.Waiting = int(v) }},
	{"boxctl_pool_breaker_open", "1 while boots are paused after failures.", false, true,
		func(s Stats) float64 {
			if s.BreakerOpen {
				return 1
			}
			return 0
		}, func(s *Stats, v float64) { s.BreakerOpen = v != 0 }},
	{"boxctl_pool_oldest_idle_seconds", "Age of the oldest box not claimed yet.", false, false,
		func(s Stats) float64 { return since(s.Oldest) }, func(s *Stats, v float64) {
			if v > 0 {
				s.Oldest = time.Now().Add(-time.Duration(v * float64(time.Second)))
			}
		}},
}

// Handler answers GET /metrics with k's metrics in the Prometheus text
// format, read at each request: for a vendor's pool, what its keeper
// sees of it (claims and refills are the vendor's to count).
func Handler(k Keeper) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		s := k.Stats()
		label := []*dto.LabelPair{{Name: new("pool"), Value: new(k.Name())}}
		var fams []*dto.MetricFamily
		for _, m := range metrics {
			if m.keeperOnly && s.VendorKept {
				continue
			}
			f := &dto.MetricFamily{Name: new(m.name), Help: new(m.help)}
			v := m.get(s)
			if m.counter {
				f.Type = dto.MetricType_COUNTER.Enum()
				f.Metric = []*dto.Metric{{Label: label, Counter: &dto.Counter{Value: &v}}}
			} else {
				f.Type = dto.MetricType_GAUGE.Enum()
				f.Metric = []*dto.Metric{{Label: label, Gauge: &dto.Gauge{Value: &v}}}
			}
			fams = append(fams, f)
		}
		if p, ok := k.(*Pool); ok {
			fams = append(fams, p.m.refillFamily(label))
		}
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, f := range fams {
			if err := enc.Encode(f); err != nil {
				return
			}
		}
	})
}

// ParseMetrics reads keepers' metrics in the Prometheus text format (a
// scrape of Handler) back into their stats, by pool name.
func ParseMetrics(r io.Reader) (map[string]Stats, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := map[string]Stats{}
	for _, m := range metrics {
		for _, sample := range fams[m.name].GetMetric() {
			name := ""
			for _, l := range sample.GetLabel() {
				if l.GetName() == "pool" {
					name = l.GetValue()
				}
			}
			if name == "" {
				continue
			}
			s := out[name]
			m.set(&s, sample.GetCounter().GetValue()+sample.GetGauge().GetValue())
			out[name] = s
		}
	}
	return out, nil
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

// refillBuckets are the upper bounds, in seconds, of the refill latency
// histogram: a boot takes from half a second (Docker) to tens (a cold
// Kubernetes node).
var refillBuckets = []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60}

// counters are a Pool's own.
type counters struct {
	claims, hits, waits, misses, failures, recycled, healed atomic.Int64

	mu      sync.Mutex
	buckets []uint64 // per refillBuckets, not cumulative
	count   uint64
	sum     float64
}

func (m *counters) observeRefill(d time.Duration) {
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

func (m *counters) stats() Stats {
	return Stats{Claims: m.claims.Load(), Hits: m.hits.Load(), Waits: m.waits.Load(), Misses: m.misses.Load(),
		Failures: m.failures.Load(), Recycled: m.recycled.Load(), Healed: m.healed.Load()}
}

func (m *counters) refillFamily(label []*dto.LabelPair) *dto.MetricFamily {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := &dto.Histogram{SampleCount: new(m.count), SampleSum: new(m.sum)}
	var cum uint64
	for i, b := range refillBuckets {
		if m.buckets != nil {
			cum += m.buckets[i]
		}
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: new(b), CumulativeCount: new(cum)})
	}
	return &dto.MetricFamily{Name: new("boxctl_pool_refill_seconds"), Help: new("Time from a boot's start to its box waiting in the pool."),
		Type: dto.MetricType_HISTOGRAM.Enum(), Metric: []*dto.Metric{{Label: label, Histogram: h}}}
}
