package server

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// scrape reads GET /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, v *env) map[string]*dto.MetricFamily {
	t.Helper()
	resp := v.do(t, "GET", "/metrics", "")
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s, %v", resp.StatusCode, body, err)
	}
	if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeTextPlain {
		t.Errorf("GET /metrics Content-Type %q is not the text format", resp.Header.Get("Content-Type"))
	}
	for _, secret := range []string{bearer, metricsRouterKey, "metrics-run"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("GET /metrics shows %q:\n%s", secret, body)
		}
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return families
}

const metricsRouterKey = "rk-metrics-secret-key"

// value is the value of the sample of family name whose labels include
// labels (name, value pairs); it fails for a missing sample or a family
// of another type.
func value(t *testing.T, families map[string]*dto.MetricFamily, name string, typ dto.MetricType, labels ...string) float64 {
	t.Helper()
	f := families[name]
	if f == nil {
		t.Fatalf("no metric family %s", name)
	}
	if f.GetType() != typ {
		t.Fatalf("%s is a %v, want a %v", name, f.GetType(), typ)
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
			}
			if !found {
				continue next
			}
		}
		switch typ {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no sample of %s with labels %v", name, labels)
	return 0
}

func TestMetrics(t *testing.T) {
	v := newEnv(t, config{engine: engine.Options{RouterKey: metricsRouterKey}})
	if resp := v.do(t, "GET", "/metrics", "", "Authorization", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the bearer = %d, want 401", resp.StatusCode)
	}

	m := scrape(t, v)
	for _, status := range []string{"running", "done", "error", "cancelled"} {
		if n := value(t, m, "bridge_runs", dto.MetricType_GAUGE, "status", status); n != 0 {
			t.Errorf("bridge_runs{status=%q} before any run = %v, want 0", status, n)
		}
	}
	if n := value(t, m, "bridge_harness_spawn_failures_total", dto.MetricType_COUNTER, "harness", "claude-code"); n != 0 {
		t.Errorf("spawn failures before any run = %v, want 0", n)
	}

	resp := v.do(t, "POST", "/v1/chat/completions", chatBody("metrics-run-1", "hello", false))
	if c := decode[wire.Completion](t, resp); resp.StatusCode != 200 || c.Error != nil {
		t.Fatalf("chat = %d %+v", resp.StatusCode, c)
	}
	_, stop := openStream(t, v, chatBody("metrics-run-2", "stall", true))
	polltest.Until(t, 10*time.Second, "bridge_replay_readers to reach 1 with one stream open", func() bool {
		m = scrape(t, v)
		return value(t, m, "bridge_replay_readers", dto.MetricType_GAUGE) == 1
	})
	for _, c := range []struct {
		name   string
		typ    dto.MetricType
		labels []string
		want   float64
	}{
		{"bridge_runs", dto.MetricType_GAUGE, []string{"status", "done"}, 1},
		{"bridge_runs", dto.MetricType_GAUGE, []string{"status", "running"}, 1},
		{"bridge_live_runs", dto.MetricType_GAUGE, nil, 1},
		{"bridge_idle_session_processes", dto.MetricType_GAUGE, nil, 0},
		{"bridge_spare_harness_processes", dto.MetricType_GAUGE, nil, 0},
		{"bridge_spare_turns_total", dto.MetricType_COUNTER, nil, 0},
	} {
		if got := value(t, m, c.name, c.typ, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n := value(t, m, "bridge_events_appended_total", dto.MetricType_COUNTER); n < 3 {
		t.Errorf("bridge_events_appended_total after a whole run = %v, want its events (3 or more)", n)
	}
	for _, op := range []string{"write", "read"} {
		if n := value(t, m, "bridge_store_latency_seconds", dto.MetricType_HISTOGRAM, "op", op); n == 0 {
			t.Errorf("bridge_store_latency_seconds{op=%q} has no observations", op)
		}
	}
	stop()
	if resp := v.do(t, "POST", "/v1/runs/metrics-run-2/cancel?wait_ms=10000", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel = %d", resp.StatusCode)
	}
	m = scrape(t, v)
	if n := value(t, m, "bridge_runs", dto.MetricType_GAUGE, "status", "cancelled"); n != 1 {
		t.Errorf("bridge_runs{status=cancelled} after the cancel = %v, want 1", n)
	}
	if n := value(t, m, "bridge_live_runs", dto.MetricType_GAUGE); n != 0 {
		t.Errorf("bridge_live_runs after the cancel = %v, want 0", n)
	}
}

// TestMetrics_SpawnFailure counts a harness that cannot be started: its
// binary answered the health probe (whose ready verdict is cached), then
// went away before the turn.
func TestMetrics_SpawnFailure(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "claude")
	data, err := os.ReadFile(bridgetest.FakeClaude(t))
	if err != nil || os.WriteFile(bin, data, 0o755) != nil {
		t.Fatalf("copy fakeclaude: %v", err)
	}
	v := newEnv(t, config{bin: bin})
	if resp := v.do(t, "GET", "/health", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /health = %d, want the backend ready", resp.StatusCode)
	}
	os.Remove(bin)
	resp := v.do(t, "POST", "/v1/chat/completions", chatBody("metrics-run-x", "hello", false))
	if c := decode[wire.Completion](t, resp); c.Error == nil || c.Error.Type != wire.TypeHarnessUnavailable {
		t.Fatalf("chat with the binary gone = %d %+v, want error %s", resp.StatusCode, c, wire.TypeHarnessUnavailable)
	}
	m := scrape(t, v)
	if n := value(t, m, "bridge_harness_spawn_failures_total", dto.MetricType_COUNTER, "harness", "claude-code"); n != 1 {
		t.Errorf("bridge_harness_spawn_failures_total{harness=claude-code} = %v, want 1", n)
	}
	if n := value(t, m, "bridge_runs", dto.MetricType_GAUGE, "status", "error"); n != 1 {
		t.Errorf("bridge_runs{status=error} = %v, want 1", n)
	}
}
