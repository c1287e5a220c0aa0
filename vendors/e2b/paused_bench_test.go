package e2b_test

import (
	"context"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/e2b"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// BenchmarkStandbyReach measures what a warm pool on E2B pays at a claim
// before its first request reaches the box, on the emulator:
// state=running is a request to a running sandbox (what a pool of running
// standby boxes pays: the handover is that request); state=paused is a
// connect that resumes a paused sandbox with its processes, then the same
// request (what a pool of paused standby boxes would pay). The pause
// between claims is not timed. It reports the median and p99 in ms.
func BenchmarkStandbyReach(b *testing.B) {
	env := e2btest.Shared(b)
	v := env.Client(b)
	box, err := v.Create(b.Context(), vendors.CreateSpec{Image: env.Template, RunTag: vendortest.RunTag(b),
		Lifetime: 10 * time.Minute, Retention: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = box.Destroy(context.WithoutCancel(b.Context())) })
	reach := func(b *testing.B, bx vendors.Box) {
		if res, err := bx.Exec(b.Context(), vendors.ExecSpec{Command: []string{"true"}}); err != nil || res.ExitCode != 0 {
			b.Fatalf("exec in the box = %+v, %v", res, err)
		}
	}
	b.Run("state=running", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			reach(b, box)
			lat = append(lat, time.Since(start))
		}
		vendortest.ReportLatency(b, lat)
	})
	b.Run("state=paused", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			b.StopTimer()
			if _, err := v.Suspend(b.Context(), box.ID()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			bx, err := e2b.ConnectPaused(b.Context(), v, box.ID())
			if err != nil {
				b.Fatal(err)
			}
			reach(b, bx)
			lat = append(lat, time.Since(start))
		}
		vendortest.ReportLatency(b, lat)
	})
}
