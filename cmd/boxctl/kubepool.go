package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// runKubePoolUp keeps a Kubernetes warm pool: a SandboxWarmPool whose pods
// run the standby bridge from their start (agent-sandbox refills it; a
// claim needs no exec), its pods recycled past --max-age, until ctx ends,
// when the pool is deleted (claimed boxes live on).
func runKubePoolUp(ctx context.Context, a *app, kv *kubernetes.Vendor, p *sandbox.Provider, o *poolOptions, name, image string) (err error) {
	if o.metrics != "" {
		return usageErrorf("--metrics: a Kubernetes pool is claimed through agent-sandbox, whose controller serves its metrics")
	}
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
	return keepKubePool(ctx, kv, name, o.maxAge, a.errOut)
}

// keepKubePool prints the pool's state each second and recycles its pods
// past maxAge (checked every tenth of it, at least each second).
func keepKubePool(ctx context.Context, kv *kubernetes.Vendor, name string, maxAge time.Duration, status io.Writer) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	every := max(maxAge/10, time.Second)
	last := time.Now()
	recycled := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if time.Since(last) >= every {
			last = time.Now()
			n, err := kv.RecyclePool(ctx, name, maxAge)
			if err != nil && ctx.Err() == nil {
				return err
			}
			recycled += n
		}
		st, err := kv.PoolState(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		age := "-"
		if !st.Oldest.IsZero() {
			age = time.Since(st.Oldest).Round(time.Second).String()
		}
		fmt.Fprintf(status, "\r\x1b[Kpool %s: %d of %d ready, %d idle, oldest %s, %d recycled", name, st.Ready, st.Want, st.Idle, age, recycled)
	}
}
