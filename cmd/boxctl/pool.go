package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localbroker"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/egress"
)

// poolOptions are the flags of `boxctl pool`.
type poolOptions struct {
	target, harness, image, metrics string
	runtime, egressMode             string
	size                            int
	maxAge, lifetime                time.Duration
}

func newPoolCmd(a *app) *cobra.Command {
	o := &poolOptions{target: docker.Name, harness: "claude-code", size: pool.DefaultSize, maxAge: pool.DefaultMaxAge, lifetime: time.Hour}
	cmd := &cobra.Command{Use: "pool", Short: "Keep warm pools of boxes that boxctl up claims from"}
	up := &cobra.Command{Use: "up", Short: "Keep a pool full until interrupted, with a live status line",
		Long: `pool up boots --size boxes of --harness ahead, their bridges waiting unclaimed and holding
no secret, and keeps the pool full until Ctrl-C, which destroys the boxes still waiting.
boxctl up with the same --target, --harness and image claims from it. --metrics ADDR
serves the keeper's Prometheus metrics on http://ADDR/metrics. With --target kubernetes
the pool is a SandboxWarmPool whose boxes run the standby bridge from their start:
agent-sandbox keeps it full and a claim adopts a box; the keeper recycles boxes past
--max-age and deletes the pool at Ctrl-C, and its --metrics are what it sees of the
pool (size, idle, ready, recycled, the oldest idle box's age).`,
		Args: boxArgs(cobra.NoArgs), RunE: func(cmd *cobra.Command, _ []string) error { return runPoolUp(cmd.Context(), a, o) }}
	lsTarget := ""
	ls := &cobra.Command{Use: "ls", Short: "List the pools and their waiting boxes", Args: boxArgs(cobra.NoArgs),
		Long: `pool ls lists the pools of this machine's keepers, or with --target the pools of that
target: a target whose vendor keeps warm pools itself (kubernetes) lists the pools boxctl
made there; any other lists this machine's keepers' pools.`,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPoolLs(cmd.Context(), a, lsTarget) }}
	ls.Flags().StringVar(&lsTarget, "target", "", "list the pools of this target (a vendor that keeps its own: kubernetes)")
	rm := &cobra.Command{Use: "rm NAME", Short: "Destroy the boxes waiting in a pool", Args: boxArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, closeVendor, err := a.openVendor(o.target)
			if err != nil {
				return err
			}
			defer closeVendor()
			n, err := pool.For(v, "").Drain(cmd.Context(), args[0])
			if n < 0 {
				fmt.Fprintf(a.out, "deleted %s warm pool %s\n", o.target, args[0])
			} else {
				fmt.Fprintf(a.out, "destroyed %d boxes of pool %s\n", n, args[0])
			}
			return err
		}}
	for _, c := range []*cobra.Command{up, rm} {
		c.Flags().StringVar(&o.target, "target", o.target, "where the boxes run: "+strings.Join(boxTargets, ", "))
	}
	f := up.Flags()
	f.StringVar(&o.harness, "harness", o.harness, "the harness of the pool's boxes")
	f.StringVar(&o.image, "image", "", "box image (default: the last boxctl build for --target)")
	f.IntVar(&o.size, "size", o.size, "boxes kept waiting")
	f.StringVar(&o.runtime, "runtime", "", `the boxes' runtime, as boxctl up --runtime takes it ("gvisor"); up claims from the pool of its own --runtime`)
	f.DurationVar(&o.maxAge, "max-age", o.maxAge, "how long a box waits before it is recycled")
	f.DurationVar(&o.lifetime, "lifetime", o.lifetime, "the longest lifetime a claim may ask, counted from the claim")
	f.StringVar(&o.metrics, "metrics", "", "serve the keeper's metrics on this address (host:port)")
	f.StringVar(&o.egressMode, "egress", egressDeny, `the boxes' egress as they wait, as boxctl up takes it: "deny" (the broker only; a claim gives the box its own policy: docker) or "open"; up claims from the pool of its own kind`)
	cmd.AddCommand(up, ls, rm)
	return cmd
}

func runPoolUp(ctx context.Context, a *app, o *poolOptions) error {
	if err := checkBoxTarget(o.target); err != nil {
		return err
	}
	if o.size < 1 {
		return usageErrorf("--size %d: want at least 1", o.size)
	}
	if o.runtime != "" && !runtimeName.MatchString(o.runtime) {
		return usageErrorf("--runtime %q: want gvisor or a runtime name (lower-case letters, digits, '.', '-' and '_')", o.runtime)
	}
	up := &upOptions{target: o.target, image: o.image}
	if err := up.lastImage(a); err != nil {
		return err
	}
	if o.egressMode != egress.Open && o.target != docker.Name {
		return usageErrorf("--target %s: a pool of confined boxes is kept on docker: pass --egress open", o.target)
	}
	pol, err := egressFlags(o.egressMode, nil, o.target, false)
	if err != nil {
		return err
	}
	up.egress, up.harness, up.runtime = &pol, o.harness, o.runtime
	v, closeVendor, err := a.openVendor(o.target)
	if err != nil {
		return err
	}
	defer closeVendor()
	var gate sandbox.EgressGate
	if up.confined() {
		// The boxes wait on the confined network under deny-all: they
		// reach the broker, which holds nothing for them yet.
		s, err := a.openState()
		if err != nil {
			return err
		}
		bc, err := a.ensureBroker(ctx, s, v)
		if err != nil {
			return err
		}
		// The broker holds the gate: it stays up while the pool is kept.
		defer localbroker.KeepAwake(ctx, bc, localbroker.KeepAwakeEvery)()
		url, err := brokerURL(ctx, bc, v)
		if err != nil {
			return err
		}
		if gate, err = a.egressGate(ctx, s, v, url); err != nil {
			return err
		}
	}
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: up.image, Lifetime: o.lifetime, Runtime: o.runtime, Logger: a.log,
		Egress: up.egress, EgressGate: gate})
	if err != nil {
		return err
	}
	name := up.poolName()
	pools := pool.For(v, "")
	k, err := pools.Keeper(pool.Options{Provider: p, Name: name, Harness: o.harness, Size: o.size, MaxAge: o.maxAge, Logger: a.log})
	if err != nil {
		return usageError{err}
	}
	if err := k.Ensure(ctx); err != nil {
		return err
	}
	if pools.VendorKept() {
		fmt.Fprintf(a.errOut, "keeping %s warm pool %s (%s, %s); Ctrl-C deletes it\n", o.target, name, o.harness, up.image)
	} else {
		fmt.Fprintf(a.errOut, "keeping pool %s (%s, %s on %s); Ctrl-C drains it\n", name, o.harness, up.image, o.target)
	}
	if o.metrics != "" {
		stop, err := pool.ServeMetrics(o.metrics, pool.Handler(k))
		if err != nil {
			return err
		}
		defer stop()
	}
	defer fmt.Fprintf(a.errOut, "\nclosing pool %s\n", name)
	return k.Keep(ctx, func(s pool.Stats) { render.StatusLine(a.errOut, name, s) })
}

func runPoolLs(ctx context.Context, a *app, target string) error {
	var rows []pool.Summary
	if target == "" {
		sums, err := pool.Summaries("")
		if err != nil {
			return err
		}
		rows = sums
	} else {
		if err := checkBoxTarget(target); err != nil {
			return err
		}
		v, closeVendor, err := a.openVendor(target)
		if err != nil {
			return err
		}
		defer closeVendor()
		pools := pool.For(v, "")
		if rows, err = pools.List(ctx); err != nil {
			return err
		}
		if !pools.VendorKept() {
			// This machine's pools of the target, by their names.
			rows = slices.DeleteFunc(rows, func(s pool.Summary) bool { return !strings.HasPrefix(s.Name, target+"-") })
		}
	}
	return a.print(rows, func(w io.Writer) error { return render.Pools(w, rows, time.Now()) })
}
