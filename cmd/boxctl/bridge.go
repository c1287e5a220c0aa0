package main

import (
	"errors"
	"flag"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/bridge"
)

// newBridgeCmd runs the bridge server in this process, configured exactly
// as box-bridge is: the environment, then the same flags. cobra parses no
// flag of this command (the bridge's flags are Go flags), so the global
// flags, before or after `bridge`, are parsed here too: --log-level
// overrides BRIDGE_LOG_LEVEL, as box-bridge's -log-level does.
func newBridgeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "bridge [flags]",
		Short: "Run the bridge server (the same server as box-bridge)",
		Long: `Run the bridge server that boxes run: it drives harness CLIs per turn and
serves their events durably over the bridge protocol. It reads BRIDGE_HOST,
BRIDGE_PORT, BRIDGE_BEARER, BRIDGE_DATA_DIR, BRIDGE_BACKENDS, BRIDGE_LOG_LEVEL,
<KEY>_BIN, <KEY>_TIMEOUT_MS, TANGLE_API_KEY and TANGLE_ROUTER_URL; flags
override them (boxctl bridge -h lists them).`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := bridge.ConfigFromEnv(os.Getenv)
			if err != nil {
				return usageError{err}
			}
			fs := flag.NewFlagSet("boxctl bridge", flag.ContinueOnError)
			fs.SetOutput(a.errOut)
			secrets := cfg.RegisterFlags(fs) // -log-level among them
			for _, name := range []string{"output", "o"} {
				fs.StringVar(&a.output, name, a.output, "boxctl's output format, text or json (the bridge prints no data)")
			}
			if err := fs.Parse(args); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return nil
				}
				return usageError{err}
			}
			if fs.NArg() > 0 {
				return usageErrorf("unexpected arguments %q", fs.Args())
			}
			if a.output != "text" && a.output != "json" {
				return usageErrorf("--output %q: want text or json", a.output)
			}
			level, err := parseLevel(cfg.LogLevel)
			if err != nil {
				return usageError{err}
			}
			a.logLevel = cfg.LogLevel
			a.log = slog.New(slog.NewTextHandler(a.errOut, &slog.HandlerOptions{Level: level}))
			if err := secrets.Load(&cfg); err != nil {
				return err
			}
			return bridge.Serve(cmd.Context(), cfg, a.log, nil)
		},
	}
}
