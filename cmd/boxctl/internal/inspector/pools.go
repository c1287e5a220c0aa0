package inspector

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
)

// PoolsShown says where the pool page's figures come from.
const PoolsShown = "Ready and orphaned boxes and keepers are read from the pools' files. " +
	"Size, claims and hits are known only to a keeper process: they are shown for the keepers " +
	"whose --metrics address boxctl ui was given (--pool-metrics), read from their /metrics."

// KeeperStats are a keeper's figures, read from its /metrics.
type KeeperStats struct {
	// Source is the /metrics URL they were read from.
	Source        string `json:"source"`
	Size          int64  `json:"size"`
	Ready         int64  `json:"ready"`
	Booting       int64  `json:"booting"`
	WaitingClaims int64  `json:"waitingClaims"`
	Claims        int64  `json:"claims"`
	Hits          int64  `json:"hits"`
	Waits         int64  `json:"waits"`
	Misses        int64  `json:"misses"`
	BootFailures  int64  `json:"bootFailures"`
	BreakerOpen   bool   `json:"breakerOpen,omitempty"`
}

// Pool is one pool of the pool page: its file's summary and, when its
// keeper's metrics were read, the keeper's figures.
type Pool struct {
	pool.Summary
	Keeper *KeeperStats `json:"keeper,omitempty"`
}

// MetricsError is a keeper's /metrics that could not be read.
type MetricsError struct {
	Source  string `json:"source"`
	Message string `json:"message"`
}

// Pools is the answer of GET /api/pools.
type Pools struct {
	Pools  []Pool         `json:"pools"`
	Errors []MetricsError `json:"errors"`
	Shown  string         `json:"shown"`
}

// metricsURL is the /metrics URL of a keeper's --metrics address
// (host:port) or URL.
func metricsURL(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr + "/metrics"
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("keeper metrics %q: want host:port or an http(s) URL", addr)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/metrics"
	}
	return u.String(), nil
}

// keeperStats reads the figures of each pool a keeper's /metrics at src
// reports, by pool name.
func (s *Server) keeperStats(ctx context.Context, src string) (map[string]*KeeperStats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.o.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", src, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", src, err)
	}
	out := map[string]*KeeperStats{}
	fields := map[string]func(*KeeperStats, float64){
		"boxctl_pool_size":                func(k *KeeperStats, v float64) { k.Size = int64(v) },
		"boxctl_pool_ready":               func(k *KeeperStats, v float64) { k.Ready = int64(v) },
		"boxctl_pool_booting":             func(k *KeeperStats, v float64) { k.Booting = int64(v) },
		"boxctl_pool_waiting_claims":      func(k *KeeperStats, v float64) { k.WaitingClaims = int64(v) },
		"boxctl_pool_claims_total":        func(k *KeeperStats, v float64) { k.Claims = int64(v) },
		"boxctl_pool_hits_total":          func(k *KeeperStats, v float64) { k.Hits = int64(v) },
		"boxctl_pool_waits_total":         func(k *KeeperStats, v float64) { k.Waits = int64(v) },
		"boxctl_pool_misses_total":        func(k *KeeperStats, v float64) { k.Misses = int64(v) },
		"boxctl_pool_boot_failures_total": func(k *KeeperStats, v float64) { k.BootFailures = int64(v) },
		"boxctl_pool_breaker_open":        func(k *KeeperStats, v float64) { k.BreakerOpen = v != 0 },
	}
	for name, set := range fields {
		fam := fams[name]
		if fam == nil {
			continue
		}
		for _, m := range fam.GetMetric() {
			pl := labelValue(m, "pool")
			if pl == "" {
				continue
			}
			if out[pl] == nil {
				out[pl] = &KeeperStats{Source: src}
			}
			set(out[pl], m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	return out, nil
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func (s *Server) pools(w http.ResponseWriter, r *http.Request) {
	sums, err := pool.Summaries(s.o.PoolDir)
	if err != nil {
		writeError(w, fmt.Errorf("pools: %w", err))
		return
	}
	out := Pools{Pools: []Pool{}, Errors: []MetricsError{}, Shown: PoolsShown}
	byName := map[string]int{}
	for _, sum := range sums {
		byName[sum.Name] = len(out.Pools)
		out.Pools = append(out.Pools, Pool{Summary: sum})
	}
	for _, src := range s.o.KeeperMetrics {
		stats, err := s.keeperStats(r.Context(), src)
		if err != nil {
			out.Errors = append(out.Errors, MetricsError{Source: src, Message: err.Error()})
			continue
		}
		for name, k := range stats {
			i, ok := byName[name]
			if !ok { // a keeper whose pool has no file (yet)
				i = len(out.Pools)
				byName[name] = i
				out.Pools = append(out.Pools, Pool{Summary: pool.Summary{Name: name, Keepers: []string{}}})
			}
			out.Pools[i].Keeper = k
		}
	}
	writeJSON(w, http.StatusOK, out)
}
