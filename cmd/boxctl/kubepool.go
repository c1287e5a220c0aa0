package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// runKubePoolUp keeps a Kubernetes warm pool: a SandboxWarmPool whose pods
// run the standby bridge from their start (agent-sandbox refills it; a
// claim needs no exec), its pods recycled past --max-age, until ctx ends,
// when the pool is deleted (claimed boxes live on).
func runKubePoolUp(ctx context.Context, a *app, kv *kubernetes.Vendor, p *sandbox.Provider, o *poolOptions, name, image string) (err error) {
	env, err := p.StandbyEnv(o.harness)
	if err != nil {
		return usageError{err}
	}
	spec := kubernetes.PoolSpec{Name: name, Image: image, Replicas: int32(o.size),
		Standby: &kubernetes.StandbySpec{Harness: o.harness, Port: sandbox.BridgePort, Env: env, Dir: sandbox.Workspace}}
	if err := kv.EnsurePool(ctx, spec); err != nil {
		return err
	}
	defer func() {
		fmt.Fprintf(a.errOut, "\ndeleting pool %s\n", name)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, kv.DeletePool(dctx, name))
	}()
	var last atomic.Pointer[pool.VendorStats]
	last.Store(&pool.VendorStats{Size: o.size})
	if o.metrics != "" {
		// The keeper's view of the pool; claims are agent-sandbox's to
		// count, in its controller's metrics.
		stop, err := pool.ServeMetrics(o.metrics, pool.VendorMetrics(name, func() pool.VendorStats { return *last.Load() }))
		if err != nil {
			return err
		}
		defer stop()
	}
	return kv.KeepPool(ctx, name, o.maxAge, func(st kubernetes.PoolStatus, recycled int) {
		last.Store(&pool.VendorStats{Size: st.Want, Idle: st.Idle, Ready: st.Ready, Recycled: int64(recycled), Oldest: st.Oldest})
		fmt.Fprintf(a.errOut, "\r\x1b[Kpool %s: %d of %d ready, %d idle, oldest %s, %d recycled", name, st.Ready, st.Want, st.Idle, st.OldestAge(), recycled)
	})
}
