package sandbox_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/pool"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// BenchmarkPoolClaim measures the time from a claim to a ready
// environment (a turn can be sent) on every target: claims from a warm
// pool (impl=boxctl: take a standby box, one claim request, the provider
// environment) against cold creates of the same image in the same run
// (impl=baseline), at 1 and 10 claims at once. One op is a number of
// rounds of conc claims, the pool refilled between rounds (untimed as far
// as the metrics go); it reports the median and p99 claim latency in ms.
// On Kubernetes, impl=agent-sandbox claims from a standby warm pool of
// the cluster's own (benchKubeStandbyClaims).
func BenchmarkPoolClaim(b *testing.B) {
	f := setup(b)
	for _, tg := range f.targets(b) {
		for _, conc := range []int{1, 10} {
			rounds := max(30/conc, 3)
			b.Run(tg.name+"/conc="+strconv.Itoa(conc)+"/impl=baseline", func(b *testing.B) {
				p := f.on(b, tg, nil)
				for b.Loop() {
					lat := claimRounds(b, rounds, conc, 0, nil, func(ctx context.Context) (*sandbox.Environment, error) {
						return p.Create(ctx, sandbox.CreateRequest{Profile: claude})
					})
					vendortest.ReportLatency(b, lat)
				}
			})
			b.Run(tg.name+"/conc="+strconv.Itoa(conc)+"/impl=boxctl", func(b *testing.B) {
				benchKeeperClaims(b, f, tg, rounds, conc, 0)
			})
			if tg.name == "kubernetes" {
				b.Run(tg.name+"/conc="+strconv.Itoa(conc)+"/impl=agent-sandbox", func(b *testing.B) {
					benchKubeStandbyClaims(b, f, rounds, conc, 0)
				})
			}
		}
		if tg.name == "kubernetes" {
			// 10 claims a second from a pool of 10, from our keeper's
			// standby boxes and from agent-sandbox's warm pool.
			b.Run(tg.name+"/rate=10/impl=boxctl", func(b *testing.B) {
				benchKeeperClaims(b, f, tg, 3, 10, 100*time.Millisecond)
			})
			b.Run(tg.name+"/rate=10/impl=agent-sandbox", func(b *testing.B) {
				benchKubeStandbyClaims(b, f, 3, 10, 100*time.Millisecond)
			})
		}
	}
}

// benchKeeperClaims is BenchmarkPoolClaim's impl=boxctl: rounds of conc
// claims (at once, or gap apart) from a keeper's pool of conc standby
// boxes on tg, full before each round, each claim with a personal env.
func benchKeeperClaims(b *testing.B, f *fixture, tg target, rounds, conc int, gap time.Duration) {
	pl, _, _ := newPoolOpts(b, f, tg, "bench-"+randText()[:6], pool.Options{Size: conc, Parallel: 4})
	for b.Loop() {
		var mu sync.Mutex
		var handover, attach []time.Duration
		lat := claimRounds(b, rounds, conc, gap, func() { waitFull(b, pl, conc) }, func(ctx context.Context) (*sandbox.Environment, error) {
			e, outcome, err := pl.Claim(ctx, sandbox.CreateRequest{Profile: claude, Env: map[string]string{"SECRET": randText()}})
			if err == nil && outcome != pool.Hit {
				b.Errorf("claim = %s, want a hit", outcome)
			}
			if e != nil {
				mu.Lock()
				handover = append(handover, phaseTime(e, sandbox.PhaseClaim))
				attach = append(attach, phaseTime(e, sandbox.PhaseAttach))
				mu.Unlock()
			}
			return e, err
		})
		vendortest.ReportLatency(b, lat)
		reportMedian(b, handover, "handover-p50-ms")
		reportMedian(b, attach, "attach-p50-ms")
	}
}

// reportMedian reports the median of d in ms as b's metric unit (0 for
// none).
func reportMedian(b *testing.B, d []time.Duration, unit string) {
	b.ReportMetric(float64(quantile(d, 0.5).Microseconds())/1000, unit)
}

// phaseTime is how long e's create spent in the phase name.
func phaseTime(e *sandbox.Environment, name string) time.Duration {
	var d time.Duration
	for _, ph := range e.Timings() {
		if ph.Name == name {
			d += ph.Duration
		}
	}
	return d
}

// claimRounds runs rounds of conc claims, each round after before (nil:
// none), and returns every claim's latency; the environments are
// destroyed after their round. The claims of a round start at once, or
// gap apart (a rate of one per gap).
func claimRounds(b *testing.B, rounds, conc int, gap time.Duration, before func(), claim func(context.Context) (*sandbox.Environment, error)) []time.Duration {
	var lat []time.Duration
	for range rounds {
		if before != nil {
			before()
		}
		var mu sync.Mutex
		var envs []*sandbox.Environment
		var wg sync.WaitGroup
		var pace *time.Ticker
		if gap > 0 {
			pace = time.NewTicker(gap)
		}
		for i := range conc {
			if i > 0 && pace != nil {
				<-pace.C
			}
			wg.Go(func() {
				start := time.Now()
				e, err := claim(b.Context())
				took := time.Since(start)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lat, envs = append(lat, took), append(envs, e)
				mu.Unlock()
			})
		}
		if pace != nil {
			pace.Stop()
		}
		wg.Wait()
		for _, e := range envs {
			wg.Go(func() { _ = e.Destroy(context.Background()) })
		}
		wg.Wait()
	}
	return lat
}
