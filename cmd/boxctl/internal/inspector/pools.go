package inspector

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
)

// PoolsShown says where the pool page's figures come from.
const PoolsShown = "Ready and orphaned boxes and keepers are read from the pools' files. " +
	"Size, claims and hits are known only to a keeper process: they are shown for the keepers " +
	"whose --metrics address boxctl ui was given (--pool-metrics), read from their /metrics. " +
	"A pool its vendor keeps (Kubernetes) is read from the vendor: its size and ready boxes."

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
	// Target is the target of a pool its vendor keeps.
	Target string       `json:"target,omitempty"`
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
	stats, err := pool.ParseMetrics(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", src, err)
	}
	out := map[string]*KeeperStats{}
	for name, st := range stats {
		out[name] = &KeeperStats{Source: src, Size: int64(st.Size), Ready: int64(st.Ready), Booting: int64(st.Booting),
			WaitingClaims: int64(st.Waiting), Claims: st.Claims, Hits: st.Hits, Waits: st.Waits, Misses: st.Misses,
			BootFailures: st.Failures, BreakerOpen: st.BreakerOpen}
	}
	return out, nil
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
	for _, target := range s.o.PoolTargets {
		v, err := s.o.Vendor(target)
		var sums []pool.Summary
		if err == nil {
			sums, err = pool.For(v, "").List(r.Context())
		}
		if err != nil {
			out.Errors = append(out.Errors, MetricsError{Source: target, Message: err.Error()})
			continue
		}
		for _, sum := range sums {
			if sum.VendorKept {
				out.Pools = append(out.Pools, Pool{Summary: sum, Target: target})
			}
		}
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
