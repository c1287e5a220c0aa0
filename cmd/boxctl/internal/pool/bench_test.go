package pool_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider/sandbox"
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
	for _, tg := range f.Targets(b) {
		for _, conc := range []int{1, 10} {
			rounds := max(30/conc, 3)
			b.Run(tg.Name+"/conc="+strconv.Itoa(conc)+"/impl=baseline", func(b *testing.B) {
				p := f.On(b, tg, nil)
				for b.Loop() {
					lat := sandboxtest.ClaimRounds(b, rounds, conc, 0, nil, func(ctx context.Context) (*sandbox.Environment, error) {
						return p.Create(ctx, sandbox.CreateRequest{Profile: claude})
					})
					vendortest.ReportLatency(b, lat)
				}
			})
			b.Run(tg.Name+"/conc="+strconv.Itoa(conc)+"/impl=boxctl", func(b *testing.B) {
				benchKeeperClaims(b, f, tg, rounds, conc, 0)
			})
			if tg.Name == "kubernetes" {
				b.Run(tg.Name+"/conc="+strconv.Itoa(conc)+"/impl=agent-sandbox", func(b *testing.B) {
					benchKubeStandbyClaims(b, f, rounds, conc, 0)
				})
			}
		}
		if tg.Name == "kubernetes" {
			// 10 claims a second from a pool of 10, from our keeper's
			// standby boxes and from agent-sandbox's warm pool.
			b.Run(tg.Name+"/rate=10/impl=boxctl", func(b *testing.B) {
				benchKeeperClaims(b, f, tg, 3, 10, 100*time.Millisecond)
			})
			b.Run(tg.Name+"/rate=10/impl=agent-sandbox", func(b *testing.B) {
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
		lat := sandboxtest.ClaimRounds(b, rounds, conc, gap, func() { waitFull(b, pl, conc) }, func(ctx context.Context) (*sandbox.Environment, error) {
			e, outcome, err := pl.Claim(ctx, sandbox.CreateRequest{Profile: claude, Env: map[string]string{"SECRET": randText()}})
			if err == nil && outcome != pool.Hit {
				b.Errorf("claim = %s, want a hit", outcome)
			}
			if e != nil {
				mu.Lock()
				handover = append(handover, sandboxtest.PhaseTime(e, sandbox.PhaseClaim))
				attach = append(attach, sandboxtest.PhaseTime(e, sandbox.PhaseAttach))
				mu.Unlock()
			}
			return e, err
		})
		vendortest.ReportLatency(b, lat)
		sandboxtest.ReportMedian(b, handover, "handover-p50-ms")
		sandboxtest.ReportMedian(b, attach, "attach-p50-ms")
	}
}

// benchKubeStandbyClaims is BenchmarkPoolClaim's impl=agent-sandbox: rounds
// of conc Creates (at once, or gap apart), each a claim of a standby warm
// pool of conc pods (refilled and ready before each round, untimed), with
// a personal env.
// Beside the claim latency it reports the medians of its two parts:
// bind-p50-ms, agent-sandbox's claim to the bound pod (PhaseVendorClaim),
// and handover-p50-ms, the bridge's health, pin and claim request
// (PhaseClaim).
func benchKubeStandbyClaims(b *testing.B, f *fixture, rounds, conc int, gap time.Duration) {
	p, kv, name := kubeStandbyPool(b, f, int32(conc))
	var mu sync.Mutex
	var bind, handover []time.Duration
	for b.Loop() {
		lat := sandboxtest.ClaimRounds(b, rounds, conc, gap, func() { waitKubePool(b, kv, name) }, func(ctx context.Context) (*sandbox.Environment, error) {
			e, err := p.Create(ctx, sandbox.CreateRequest{Profile: claude, Env: map[string]string{"SECRET": randText()}})
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, ph := range e.Timings() {
				switch ph.Name {
				case sandbox.PhaseVendorClaim:
					bind = append(bind, ph.Duration)
				case sandbox.PhaseClaim:
					handover = append(handover, ph.Duration)
				case sandbox.PhaseVendor:
					b.Errorf("box %s was created, not claimed", e.Box().ID())
				}
			}
			return e, nil
		})
		vendortest.ReportLatency(b, lat)
	}
	sandboxtest.ReportMedian(b, bind, "bind-p50-ms")
	sandboxtest.ReportMedian(b, handover, "handover-p50-ms")
}
