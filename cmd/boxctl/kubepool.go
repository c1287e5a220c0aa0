package main

import (
	"context"
	"errors"
	"fmt"
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
	return kv.KeepPool(ctx, name, o.maxAge, func(st kubernetes.PoolStatus, recycled int) {
		age := "-"
		if !st.Oldest.IsZero() {
			age = time.Since(st.Oldest).Round(time.Second).String()
		}
		fmt.Fprintf(a.errOut, "\r\x1b[Kpool %s: %d of %d ready, %d idle, oldest %s, %d recycled", name, st.Ready, st.Want, st.Idle, age, recycled)
	})
}
