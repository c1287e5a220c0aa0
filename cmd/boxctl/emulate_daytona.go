package main

import (
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/emukit"
	"github.com/tangle-network/boxctl/vendors/open"
)

func emulateDaytona() emulator {
	o := daytonaemu.Options{MaxLifetime: 24 * time.Hour, Registry: daytonaemu.DefaultRegistry}
	var snapshots []string
	return emulator{
		use:   "daytona",
		short: "Serve Daytona's control plane, toolbox and preview proxy, backed by Docker containers",
		long: `emulate daytona serves a local Daytona: the control plane under /api
(sandboxes, snapshots, registry push access, the events channel), the toolbox
proxy under /toolbox and a preview URL per sandbox port (a loopback address of
its own, or http://{port}-{sandboxId}.DOMAIN with --proxy-domain), as the real
services answer, with a container on the local Docker engine behind each
sandbox. Snapshots pull their image from its registry; sandboxes from an image
or a Dockerfile are built with BuildKit; sandboxes stop when idle for their
auto-stop interval and go when their image's init ends them at their deadline.
Computer use, LSP and volumes answer 501.

It prints the environment that points boxctl and Daytona's own SDKs at it
(DAYTONA_API_URL, DAYTONA_TARGET, BOXCTL_DAYTONA_HOST_ADDRESS and the key), then serves until interrupted. The API key is $DAYTONA_API_KEY, or a fresh one
that is printed. Fault switches make a share of control plane calls fail (429
or 503), creates slow, or sandboxes vanish mid-run; boxctl conformance --chaos sets them too.`,
		example: `  boxctl emulate daytona --addr 127.0.0.1:3986 --registry 127.0.0.1:5000
  boxctl emulate daytona --snapshot box=boxctl-box:dev --error-rate 0.3 --vanish-after 2m`,
		keyEnv: open.EnvDaytonaKey, keyPrefix: "dtn_", hostEnv: open.EnvDaytonaHost,
		lost: "changing calls", begin: "start",
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&o.Registry, "registry", o.Registry, "registry host:port that registry push access hands out")
			f.StringVar(&o.BuildkitAddr, "buildkit-addr", "", "buildkitd of sandboxes from an image or Dockerfile (default: BUILDKIT_HOST)")
			f.StringVar(&o.ProxyDomain, "proxy-domain", "", "domain of preview URLs, resolved to this server by the clients (default: a loopback port per sandbox port)")
			f.DurationVar(&o.MaxLifetime, "max-lifetime", o.MaxLifetime, "longest a sandbox without BOX_DEADLINE may run")
			f.StringArrayVar(&snapshots, "snapshot", nil, "active snapshot NAME=IMAGE to start with (repeatable)")
		},
		start: func(c emulateFlags, key string, log *slog.Logger) ([][2]string, emukit.Emulator, error) {
			var err error
			if o.Snapshots, err = emukit.NamedImages("--snapshot", snapshots); err != nil {
				return nil, nil, usageError{err}
			}
			if o.MaxLifetime <= 0 {
				return nil, nil, usageErrorf("--max-lifetime %v: want a positive duration", o.MaxLifetime)
			}
			o.APIKey, o.Addr, o.DockerHost, o.Network, o.Runtime, o.Faults, o.Log = key, c.addr, c.dockerHost, c.network, c.runtime, c.faults, log
			emu, err := daytonaemu.New(o)
			if err != nil {
				return nil, nil, err
			}
			return [][2]string{{open.EnvDaytonaURL, emu.APIURL()}, {open.EnvDaytonaTarget, daytonaemu.Target}}, emu, nil
		},
	}
}
