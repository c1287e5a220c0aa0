package sandboxtest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
)

// ReportMedian reports the median of d in ms as b's metric unit (0 for
// none).
func ReportMedian(b *testing.B, d []time.Duration, unit string) {
	b.ReportMetric(float64(Quantile(d, 0.5).Microseconds())/1000, unit)
}

// PhaseTime is how long e's create spent in the phase name.
func PhaseTime(e *sandbox.Environment, name string) time.Duration {
	var d time.Duration
	for _, ph := range e.Timings() {
		if ph.Name == name {
			d += ph.Duration
		}
	}
	return d
}

// ClaimRounds runs rounds of conc claims, each round after before (nil:
// none), and returns every claim's latency; the environments are
// destroyed after their round. The claims of a round start at once, or
// gap apart (a rate of one per gap).
func ClaimRounds(b *testing.B, rounds, conc int, gap time.Duration, before func(), claim func(context.Context) (*sandbox.Environment, error)) []time.Duration {
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

// Quantile is the p-quantile of ds (the nearest rank at or above it), 0
// for none.
func Quantile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}
