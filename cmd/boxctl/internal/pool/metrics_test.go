package pool

import (
	"context"
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
	Handler(p).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
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

// fixedKeeper is a keeper whose stats the test sets.
type fixedKeeper struct {
	name  string
	stats *Stats
}

func (k fixedKeeper) Name() string                            { return k.name }
func (k fixedKeeper) Ensure(context.Context) error            { return nil }
func (k fixedKeeper) Keep(context.Context, func(Stats)) error { return nil }
func (k fixedKeeper) Stats() Stats                            { return *k.stats }

// A pool its vendor keeps is served from the stats read at each request,
// under the keeper's own names, without the claim counters the vendor
// keeps itself.
func TestVendorMetrics(t *testing.T) {
	stats := Stats{Size: 10, Idle: 8, Ready: 7, Recycled: 2, Oldest: time.Now().Add(-time.Minute), VendorKept: true}
	h := Handler(fixedKeeper{"k", &stats})
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	if rec := get("/other"); rec.Code != 404 {
		t.Errorf("GET /other = %d, want 404", rec.Code)
	}
	for round, want := range []map[string]float64{
		{"boxctl_pool_size": 10, "boxctl_pool_idle": 8, "boxctl_pool_ready": 7, "boxctl_pool_recycled_total": 2},
		{"boxctl_pool_size": 10, "boxctl_pool_idle": 3, "boxctl_pool_ready": 3, "boxctl_pool_recycled_total": 5},
	} {
		if round == 1 {
			stats.Idle, stats.Ready, stats.Recycled = 3, 3, 5
		}
		rec := get("/metrics")
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
		if err != nil {
			t.Fatalf("parse: %v\n%s", err, rec.Body.String())
		}
		for name, v := range want {
			f, ok := fams[name]
			if !ok {
				t.Errorf("round %d: no %s", round, name)
				continue
			}
			m := f.GetMetric()[0]
			if got := m.GetCounter().GetValue() + m.GetGauge().GetValue(); got != v || m.GetLabel()[0].GetValue() != "k" {
				t.Errorf("round %d: %s = %v %v, want %v", round, name, got, m.GetLabel(), v)
			}
		}
		if age := fams["boxctl_pool_oldest_idle_seconds"].GetMetric()[0].GetGauge().GetValue(); age < 60 || age > 120 {
			t.Errorf("round %d: oldest idle age %v s, want about 60", round, age)
		}
		if _, ok := fams["boxctl_pool_claims_total"]; ok {
			t.Errorf("round %d: a vendor's pool serves claim counts it does not keep", round)
		}
	}
}

// TestParseMetrics: a scrape of Handler reads back into the same stats.
func TestParseMetrics(t *testing.T) {
	want := Stats{Size: 4, Ready: 3, Idle: 3, Booting: 1, Waiting: 2, BreakerOpen: true, Claims: 9, Hits: 7, Waits: 1, Misses: 1,
		Failures: 2, Recycled: 3, Healed: 1}
	rec := httptest.NewRecorder()
	Handler(fixedKeeper{"p", &want}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got, err := ParseMetrics(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	if got["p"] != want || len(got) != 1 {
		t.Errorf("ParseMetrics = %+v, want {p: %+v}", got, want)
	}
}
