package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/provider/sandbox/localrouter"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/open"
)

// newEmulateCmd is `boxctl emulate VENDOR`: a local emulator of a cloud
// vendor's APIs with real containers on the local Docker engine behind
// its boxes. Each vendor is a subcommand.
func newEmulateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "emulate",
		Short: "Serve a local emulator of a cloud vendor (e2b, daytona), its boxes real containers on Docker",
		Args:  boxArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newEmulateE2BCmd(a), newEmulateDaytonaCmd(a))
	return cmd
}

type emulateE2BOptions struct {
	addr       string
	domain     string
	dockerHost string
	network    string
	maxTimeout time.Duration
	maxBoxes   int
	templates  []string
	ecr        string
	faults     e2bemu.Faults
}

func newEmulateE2BCmd(a *app) *cobra.Command {
	o := &emulateE2BOptions{addr: "127.0.0.1:0", domain: e2bemu.DefaultDomain, maxTimeout: e2bemu.DefaultMaxTimeout}
	cmd := &cobra.Command{
		Use:   "e2b",
		Short: "Serve E2B's control plane, sandbox proxy and envd, backed by Docker containers",
		Long: `emulate e2b serves a local E2B: the control plane (sandboxes, template builds),
and for every sandbox the proxy at {port}-{sandboxID}.DOMAIN and its envd, as
the real services answer, with a container on the local Docker engine behind
each sandbox. Template builds pull the image from its registry; sandboxes end
at their timeout.

It prints the environment that points boxctl and E2B's official SDKs at it
(E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN, E2B_API_KEY), then serves until
interrupted. Sandboxes run templates registered with --template or built
through the template API; what the emulator does not serve answers 501. The API key is $E2B_API_KEY, or a fresh one that is
printed. Fault switches make a share of control plane calls fail (429 or
503), creates slow, or sandboxes vanish mid-run.`,
		Example: `  boxctl emulate e2b --addr 127.0.0.1:3000 >e2b.env &   # then: . ./e2b.env
  boxctl emulate e2b --error-rate 0.3 --vanish-after 2m`,
		Args: boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runEmulateE2B(cmd.Context(), a, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", o.addr, "address to listen on, host:port (port 0 picks a free one)")
	f.StringVar(&o.domain, "domain", o.domain, "domain served: api.DOMAIN and {port}-{sandboxID}.DOMAIN")
	f.StringVar(&o.dockerHost, "docker-host", "", "Docker engine address (default: DOCKER_HOST)")
	f.StringVar(&o.network, "network", "", "Docker network of the sandboxes' containers (default: the Docker vendor's)")
	f.DurationVar(&o.maxTimeout, "max-timeout", o.maxTimeout, "longest a sandbox may run")
	f.IntVar(&o.maxBoxes, "max-sandboxes", 0, "concurrent sandboxes before 429 (0: no limit)")
	f.StringArrayVar(&o.templates, "template", nil, "template ID=IMAGE usable without a build (repeatable)")
	f.StringVar(&o.ecr, "ecr-endpoint", "", "ECR API endpoint for builds from \"aws\" registries")
	f.Float64Var(&o.faults.ErrorRate, "error-rate", 0, "share of control plane calls answered 429 or 503 (0..1)")
	f.Float64Var(&o.faults.LostRate, "lost-rate", 0.5, "share of failed creates that make the sandbox anyway (0..1)")
	f.DurationVar(&o.faults.CreateDelay, "create-delay", 0, "delay every create by this long")
	f.DurationVar(&o.faults.VanishAfter, "vanish-after", 0, "every sandbox vanishes this long after its create (0: never)")
	return cmd
}

func (o *emulateE2BOptions) options() (e2bemu.Options, error) {
	opts := e2bemu.Options{Domain: o.domain, DockerHost: o.dockerHost, Network: o.network, MaxTimeout: o.maxTimeout,
		MaxSandboxes: o.maxBoxes, ECREndpoint: o.ecr, Faults: o.faults}
	var err error
	if opts.Templates, err = namedImages("--template", o.templates); err != nil {
		return opts, err
	}
	return opts, checkShares(map[string]float64{"--error-rate": o.faults.ErrorRate, "--lost-rate": o.faults.LostRate})
}

// namedImages reads the NAME=IMAGE values of a repeated flag.
func namedImages(flag string, kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		name, img, ok := strings.Cut(kv, "=")
		if !ok || name == "" || img == "" {
			return nil, fmt.Errorf("%s %q: want NAME=IMAGE", flag, kv)
		}
		out[name] = img
	}
	return out, nil
}

// checkShares refuses a fault rate flag outside 0..1.
func checkShares(rates map[string]float64) error {
	for name, r := range rates {
		if r < 0 || r > 1 {
			return fmt.Errorf("%s %v: want 0 to 1", name, r)
		}
	}
	return nil
}

func runEmulateE2B(ctx context.Context, a *app, o *emulateE2BOptions) error {
	opts, err := o.options()
	if err != nil {
		return usageError{err}
	}
	opts.APIKey = os.Getenv(open.EnvE2BKey)
	generated := opts.APIKey == ""
	if generated {
		opts.APIKey = "e2b_" + localrouter.NewKey()[:40]
	}
	opts.Log = a.log
	l, err := net.Listen("tcp", o.addr)
	if err != nil {
		return usageErrorf("--addr %s: %w", o.addr, err)
	}
	emu, err := e2bemu.New(opts)
	if err != nil {
		l.Close()
		return err
	}
	srv := &http.Server{Handler: emu, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	// One address serves everything: the official SDKs reach envd through
	// it with E2B_SANDBOX_URL (sandbox and port in E2b-Sandbox-Id and
	// E2b-Sandbox-Port headers); boxctl's client resolves the sandbox
	// hosts {port}-{id}.DOMAIN to it with BOXCTL_E2B_DIAL.
	sdk := e2bemu.SDKEnv("http://"+dialAddr(l.Addr()), emu.Domain(), opts.APIKey)
	env := [][2]string{{open.EnvE2BURL, sdk[open.EnvE2BURL]}, {open.EnvE2BSandboxURL, sdk[open.EnvE2BSandboxURL]},
		{open.EnvE2BDomain, sdk[open.EnvE2BDomain]}, {open.EnvE2BDial, dialAddr(l.Addr())}}
	if generated {
		env = append(env, [2]string{open.EnvE2BKey, opts.APIKey})
	}
	err = printExports(a, env)
	if err == nil {
		a.log.Info("e2b emulator serving", "addr", l.Addr().String(), "domain", emu.Domain())
		select {
		case <-ctx.Done():
		case err = <-served:
		}
	}
	// The sandboxes go first: that ends their streams, so the server
	// then drains at once.
	cerr := emu.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, cerr)
}

// dialAddr is the address clients dial for a listener's: loopback for
// an unspecified host.
func dialAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// printExports prints the environment that points clients at an
// emulator: shell exports, or a JSON object with --output json.
func printExports(a *app, env [][2]string) error {
	return a.print(envMap(env), func(w io.Writer) error {
		for _, kv := range env {
			if _, err := fmt.Fprintf(w, "export %s=%s\n", kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
}

func envMap(kvs [][2]string) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv[0]] = kv[1]
	}
	return m
}
