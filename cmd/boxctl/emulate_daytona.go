package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/provider/sandbox/localrouter"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/open"
)

type emulateDaytonaOptions struct {
	addr        string
	dockerHost  string
	network     string
	registry    string
	buildkit    string
	proxyDomain string
	maxLifetime time.Duration
	snapshots   []string
	faults      daytonaemu.Faults
}

func newEmulateDaytonaCmd(a *app) *cobra.Command {
	o := &emulateDaytonaOptions{addr: "127.0.0.1:0", maxLifetime: 24 * time.Hour, registry: daytonaemu.DefaultRegistry}
	cmd := &cobra.Command{
		Use:   "daytona",
		Short: "Serve Daytona's control plane, toolbox and preview proxy, backed by Docker containers",
		Long: `emulate daytona serves a local Daytona: the control plane under /api
(sandboxes, snapshots, registry push access, the events channel), the toolbox
proxy under /toolbox and a preview URL per sandbox port (a loopback address of
its own, or http://{port}-{sandboxId}.DOMAIN with --proxy-domain), as the real
services answer, with a container on the local Docker engine behind each
sandbox. Snapshots pull their image from its registry; sandboxes from an image
or a Dockerfile are built with BuildKit; sandboxes stop when idle for their
auto-stop interval and go when their image's init ends them at their deadline.
Computer use, LSP and volumes answer 501.

It prints the environment that points boxctl and Daytona's own SDKs at it
(DAYTONA_API_URL, DAYTONA_TARGET and the key), then serves until interrupted. The API key is $DAYTONA_API_KEY, or a fresh one
that is printed. Fault switches make a share of control plane calls fail (429
or 503), creates slow, or sandboxes vanish mid-run.`,
		Example: `  boxctl emulate daytona --addr 127.0.0.1:3986 --registry 127.0.0.1:5000
  boxctl emulate daytona --snapshot box=boxctl-box:dev --error-rate 0.3 --vanish-after 2m`,
		Args: boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runEmulateDaytona(cmd.Context(), a, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", o.addr, "address to listen on, host:port (port 0 picks a free one)")
	f.StringVar(&o.dockerHost, "docker-host", "", "Docker engine address (default: DOCKER_HOST)")
	f.StringVar(&o.network, "network", "", "Docker network of the sandboxes' containers (default: the Docker vendor's)")
	f.StringVar(&o.registry, "registry", o.registry, "registry host:port that registry push access hands out")
	f.StringVar(&o.buildkit, "buildkit-addr", "", "buildkitd of sandboxes from an image or Dockerfile (default: BUILDKIT_HOST)")
	f.StringVar(&o.proxyDomain, "proxy-domain", "", "domain of preview URLs, resolved to this server by the clients (default: a loopback port per sandbox port)")
	f.DurationVar(&o.maxLifetime, "max-lifetime", o.maxLifetime, "longest a sandbox without BOX_DEADLINE may run")
	f.StringArrayVar(&o.snapshots, "snapshot", nil, "active snapshot NAME=IMAGE to start with (repeatable)")
	f.Float64Var(&o.faults.ErrorRate, "error-rate", 0, "share of control plane calls answered 429 or 503 (0..1)")
	f.Float64Var(&o.faults.LostRate, "lost-rate", 0.5, "share of failed changing calls that take effect anyway (0..1)")
	f.DurationVar(&o.faults.CreateDelay, "create-delay", 0, "delay every sandbox's start by this long")
	f.DurationVar(&o.faults.VanishAfter, "vanish-after", 0, "every sandbox vanishes this long after its start (0: never)")
	return cmd
}

func (o *emulateDaytonaOptions) options() (daytonaemu.Options, error) {
	opts := daytonaemu.Options{Addr: o.addr, DockerHost: o.dockerHost, Network: o.network, Registry: o.registry, BuildkitAddr: o.buildkit,
		ProxyDomain: o.proxyDomain, MaxLifetime: o.maxLifetime, Faults: o.faults}
	var err error
	if opts.Snapshots, err = namedImages("--snapshot", o.snapshots); err != nil {
		return opts, err
	}
	if o.maxLifetime <= 0 {
		return opts, fmt.Errorf("--max-lifetime %v: want a positive duration", o.maxLifetime)
	}
	return opts, checkShares(map[string]float64{"--error-rate": o.faults.ErrorRate, "--lost-rate": o.faults.LostRate})
}

func runEmulateDaytona(ctx context.Context, a *app, o *emulateDaytonaOptions) error {
	opts, err := o.options()
	if err != nil {
		return usageError{err}
	}
	opts.APIKey = os.Getenv(open.EnvDaytonaKey)
	generated := opts.APIKey == ""
	if generated {
		opts.APIKey = "dtn_" + localrouter.NewKey()[:40]
	}
	opts.Log = a.log
	emu, err := daytonaemu.Start(opts)
	if err != nil {
		return err
	}
	env := [][2]string{{open.EnvDaytonaURL, emu.APIURL()}, {open.EnvDaytonaTarget, daytonaemu.Target}}
	if generated {
		env = append(env, [2]string{open.EnvDaytonaKey, opts.APIKey})
	}
	if err = printExports(a, env); err == nil {
		a.log.Info("daytona emulator serving", "url", emu.URL())
		<-ctx.Done()
	}
	// Closing removes every sandbox's container, which ends their streams.
	if cerr := emu.Close(); err == nil {
		err = cerr
	}
	return err
}
