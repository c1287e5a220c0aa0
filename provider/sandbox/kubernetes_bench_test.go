package sandbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// BenchmarkKubernetesStart measures Create to a ready environment on the
// test bed's cluster (box Ready, bridge spawned with its secrets, /health
// ready through the port-forward, pin checked): start=cold makes a new
// Sandbox each time, start=warm claims one from a warm pool of 2 that is
// full before every claim. box-ms/op is the vendor's Create alone (cold:
// schedule, start the pod, Ready; warm: claim, adopt, Ready), so the rest
// of ns/op is the bridge's start in the box. Destroying the box and
// refilling the pool are not timed.
func BenchmarkKubernetesStart(b *testing.B) {
	f := setup(b)
	img := kubetest.Image(b, boxtest.Options{})
	b.Run("start=cold", func(b *testing.B) {
		tv := &timedVendor{Vendor: kubetest.Vendor(b)}
		benchStarts(b, f, tv, img, nil)
	})
	b.Run("start=warm", func(b *testing.B) {
		pool := "bench-" + randText()[:8]
		kv := kubetest.Vendor(b, kubernetes.WithWarmPool(pool))
		if err := kv.EnsurePool(b.Context(), vendors.PoolSpec{Name: pool, Image: img, Replicas: 2}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = kv.DeletePool(context.Background(), pool) })
		full := func() {
			ctx, cancel := context.WithTimeout(b.Context(), 3*time.Minute)
			defer cancel()
			if err := kv.WaitPool(ctx, pool); err != nil {
				b.Fatal(err)
			}
		}
		full()
		tv := &timedVendor{Vendor: kv}
		benchStarts(b, f, tv, img, func(e *sandbox.Environment) {
			if pod := e.Box().(*kubernetes.Box).Pod(); !strings.HasPrefix(pod, pool+"-") {
				b.Fatalf("box %s runs in pod %s, not one of the pool's", e.Box().ID(), pod)
			}
			full()
		})
	})
}

// benchStarts times sandbox creates on v; after (untimed) checks each and
// readies the next.
func benchStarts(b *testing.B, f *fixture, tv *timedVendor, img string, after func(*sandbox.Environment)) {
	p, err := sandbox.New(sandbox.Options{Vendor: tv, Image: img, Router: f.Router, Lifetime: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		e, err := p.Create(b.Context(), sandbox.CreateRequest{Profile: claude})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if after != nil {
			after(e)
		}
		if err := e.Destroy(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(tv.total().Milliseconds())/float64(b.N), "box-ms/op")
}

// timedVendor adds up the time spent in Create.
type timedVendor struct {
	vendors.Vendor
	mu  sync.Mutex
	sum time.Duration
}

func (v *timedVendor) Create(ctx context.Context, spec vendors.CreateSpec) (vendors.Box, error) {
	start := time.Now()
	box, err := v.Vendor.Create(ctx, spec)
	v.mu.Lock()
	v.sum += time.Since(start)
	v.mu.Unlock()
	return box, err
}

func (v *timedVendor) total() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.sum
}
