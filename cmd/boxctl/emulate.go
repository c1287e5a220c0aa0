package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/vendors/emukit"
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
	cmd.AddCommand(emulateE2B().command(a), emulateDaytona().command(a))
	return cmd
}

// emulator is one vendor's `boxctl emulate` subcommand: its help, its own
// flags and how it starts. The rest (the address, engine, network and
// fault flags, the key, printing the environment, serving until
// interrupted) is every emulator's.
type emulator struct {
	use, short, long, example string
	// keyEnv is the variable of the API key, keyPrefix that of a fresh
	// one; hostEnv that of this machine's address as the sandboxes reach it.
	keyEnv, keyPrefix, hostEnv string
	// lost names the failed calls that may take effect anyway (the
	// emulator's Lost); begin, the step of a sandbox the create delay
	// delays and the vanish time counts from.
	lost, begin string
	// flags adds the vendor's own flags.
	flags func(f *pflag.FlagSet)
	// start serves the emulator and returns the environment that points
	// clients at it (its key and host address aside) and the emulator.
	start func(c emulateFlags, key string, log *slog.Logger) (env [][2]string, emu emukit.Emulator, err error)
}

// emulateFlags are the flags of every emulator.
type emulateFlags struct {
	addr, dockerHost, network string
	runtime                   string
	faults                    emukit.Faults
}

func (e emulator) command(a *app) *cobra.Command {
	c := &emulateFlags{addr: "127.0.0.1:0"}
	cmd := &cobra.Command{Use: e.use, Short: e.short, Long: e.long, Example: e.example, Args: boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return e.run(cmd.Context(), a, *c) }}
	f := cmd.Flags()
	f.StringVar(&c.addr, "addr", c.addr, "address to listen on, host:port (port 0 picks a free one)")
	f.StringVar(&c.dockerHost, "docker-host", "", "Docker engine address (default: DOCKER_HOST)")
	f.StringVar(&c.network, "network", "", "Docker network of the sandboxes' containers (default: the Docker vendor's)")
	f.StringVar(&c.runtime, "runtime", "", `runtime of the sandboxes' containers: "gvisor" or one of the engine's (default: the engine's)`)
	f.Float64Var(&c.faults.ErrorRate, "error-rate", 0, "share of control plane calls answered 429 or 503 (0..1)")
	f.Float64Var(&c.faults.LostRate, "lost-rate", 0.5, "share of failed "+e.lost+" that take effect anyway (0..1)")
	f.DurationVar(&c.faults.CreateDelay, "create-delay", 0, "delay every sandbox's "+e.begin+" by this long")
	f.DurationVar(&c.faults.VanishAfter, "vanish-after", 0, "every sandbox vanishes this long after its "+e.begin+" (0: never)")
	e.flags(f)
	return cmd
}

// run serves the emulator until ctx ends, once it printed the
// environment that points clients at it.
func (e emulator) run(ctx context.Context, a *app, c emulateFlags) error {
	for name, r := range map[string]float64{"--error-rate": c.faults.ErrorRate, "--lost-rate": c.faults.LostRate} {
		if r < 0 || r > 1 {
			return usageErrorf("%s %v: want 0 to 1", name, r)
		}
	}
	key := os.Getenv(e.keyEnv)
	generated := key == ""
	if generated {
		key = e.keyPrefix + localrouter.NewKey()[:40]
	}
	env, emu, err := e.start(c, key, a.log)
	if err != nil {
		return err
	}
	host, err := emu.HostAddress(ctx)
	if err != nil {
		return errors.Join(err, emu.Close())
	}
	env = append(env, [2]string{e.hostEnv, host})
	if generated {
		env = append(env, [2]string{e.keyEnv, key})
	}
	m := map[string]string{}
	for _, kv := range env {
		m[kv[0]] = kv[1]
	}
	err = a.print(m, func(w io.Writer) error { return emukit.WriteExports(w, env) })
	if err == nil {
		a.log.Info("emulator serving", "vendor", e.use, "url", env[0][1])
		<-ctx.Done()
	}
	// Stopping removes every sandbox's container, which ends their
	// streams, so the server then drains at once.
	return errors.Join(err, emu.Close())
}
