package main

import (
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/emukit"
	"github.com/tangle-network/boxctl/vendors/open"
)

func emulateE2B() emulator {
	o := e2bemu.Options{Domain: e2bemu.DefaultDomain, MaxTimeout: e2bemu.DefaultMaxTimeout}
	var templates []string
	return emulator{
		use:   "e2b",
		short: "Serve E2B's control plane, sandbox proxy and envd, backed by Docker containers",
		long: `emulate e2b serves a local E2B: the control plane (sandboxes, template builds),
and for every sandbox the proxy at {port}-{sandboxID}.DOMAIN and its envd, as
the real services answer, with a container on the local Docker engine behind
each sandbox. Template builds pull the image from its registry; sandboxes end
at their timeout.

It prints the environment that points boxctl and E2B's official SDKs at it
(E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN, E2B_API_KEY; BOXCTL_E2B_HOST_ADDRESS, where its boxes reach the broker), then serves until
interrupted. Sandboxes run templates registered with --template or built
through the template API; what the emulator does not serve answers 501. The API key is $E2B_API_KEY, or a fresh one that is
printed. Fault switches make a share of control plane calls fail (429 or
503), creates slow, or sandboxes vanish mid-run; boxctl conformance --chaos sets them too.`,
		example: `  boxctl emulate e2b --addr 127.0.0.1:3000 >e2b.env &   # then: . ./e2b.env
  boxctl emulate e2b --error-rate 0.3 --vanish-after 2m`,
		keyEnv: open.EnvE2BKey, keyPrefix: "e2b_", hostEnv: open.EnvE2BHost,
		lost: "creates", begin: "create",
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&o.Domain, "domain", o.Domain, "domain served: api.DOMAIN and {port}-{sandboxID}.DOMAIN")
			f.DurationVar(&o.MaxTimeout, "max-timeout", o.MaxTimeout, "longest a sandbox may run")
			f.IntVar(&o.MaxSandboxes, "max-sandboxes", 0, "concurrent sandboxes before 429 (0: no limit)")
			f.StringArrayVar(&templates, "template", nil, "template ID=IMAGE usable without a build (repeatable)")
			f.StringVar(&o.ECREndpoint, "ecr-endpoint", "", "ECR API endpoint for builds from \"aws\" registries")
		},
		start: func(c emulateFlags, key string, log *slog.Logger) ([][2]string, emukit.Emulator, error) {
			var err error
			if o.Templates, err = emukit.NamedImages("--template", templates); err != nil {
				return nil, nil, usageError{err}
			}
			o.APIKey, o.Addr, o.DockerHost, o.Network, o.Runtime, o.Faults, o.Log = key, c.addr, c.dockerHost, c.network, c.runtime, c.faults, log
			emu, err := e2bemu.New(o)
			if err != nil {
				return nil, nil, err
			}
			// One address serves everything: the official SDKs reach envd
			// through it with E2B_SANDBOX_URL (sandbox and port in
			// E2b-Sandbox-Id and E2b-Sandbox-Port headers); boxctl's client
			// resolves the sandbox hosts {port}-{id}.DOMAIN to it with
			// BOXCTL_E2B_DIAL.
			sdk := e2bemu.SDKEnv(emu.URL(), emu.Domain(), key)
			return [][2]string{{open.EnvE2BURL, sdk[open.EnvE2BURL]}, {open.EnvE2BSandboxURL, sdk[open.EnvE2BSandboxURL]},
				{open.EnvE2BDomain, sdk[open.EnvE2BDomain]}, {open.EnvE2BDial, strings.TrimPrefix(emu.URL(), "http://")}}, emu, nil
		},
	}
}
