package pool

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetrics: GET /metrics parses as the Prometheus text format and
// carries the keeper's counters, gauges and refill histogram.
func TestMetrics(t *testing.T) {
	p := &Pool{o: Options{Name: "m", Size: 3}, reg: registry{path: t.TempDir() + "/m.json"}}
	p.m.claims.Add(4)
	p.m.hits.Add(3)
	p.m.misses.Add(1)
	p.m.observeRefill(700 * time.Millisecond)
	p.m.observeRefill(3 * time.Second)
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Errorf("Content-Type %q", rec.Header().Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, rec.Body.String())
	}
	tests := []struct {
		name string
		want float64
	}{
		{"boxctl_pool_claims_total", 4}, {"boxctl_pool_hits_total", 3}, {"boxctl_pool_misses_total", 1},
		{"boxctl_pool_size", 3}, {"boxctl_pool_ready", 0},
	}
	for _, tt := range tests {
		f, ok := fams[tt.name]
		if !ok {
			t.Errorf("no %s", tt.name)
			continue
		}
		m := f.GetMetric()[0]
		got := m.GetCounter().GetValue() + m.GetGauge().GetValue()
		if got != tt.want || m.GetLabel()[0].GetValue() != "m" {
			t.Errorf("%s = %v %v, want %v", tt.name, got, m.GetLabel(), tt.want)
		}
	}
	h := fams["boxctl_pool_refill_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 3.7 {
		t.Errorf("refill histogram count %d sum %v, want 2 and 3.7", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		switch {
		case b.GetUpperBound() >= 5:
			want = 2
		case b.GetUpperBound() >= 1:
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}
